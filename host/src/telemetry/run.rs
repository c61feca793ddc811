//! One run's spans, built from the events it emits: the run's span (the
//! caller's span its parent), a span per stage (each ends when the next
//! begins), per plugin call (under its stage) and per model call (under
//! the plugin that made it, else under its stage), the model calls
//! described with the OpenTelemetry GenAI semantic conventions. Prompts
//! and answers only with `capture_content`, each cut to
//! `MAX_CONTENT_BYTES`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;
use serde_json::json;

use crate::events::{Event, Progress, Stage};
use crate::llm::ChatRequest;
use crate::metrics::ProviderOf;
use crate::pipeline::RunError;
use crate::record::{CallRecord, RunRecord};

/// The most of one prompt or answer put in a span (`capture_content`).
const MAX_CONTENT_BYTES: usize = 16 * 1024;

/// A run being traced. Its spans end with [`RunTrace::end`], or, when it
/// is dropped first (the run was cancelled), as cancelled.
pub struct RunTrace {
    shared: Arc<Shared>,
}

struct Shared {
    tracer: SdkTracer,
    capture_content: bool,
    provider_of: ProviderOf,
    state: Mutex<State>,
}

struct State {
    run: Context,
    stage: Option<Context>,
    /// Plugin calls in progress: the plugin, and its span.
    plugins: Vec<(Arc<str>, Context)>,
    calls: HashMap<u32, Context>,
    ended: bool,
}

impl RunTrace {
    pub(super) fn start(
        tracer: SdkTracer,
        capture_content: bool,
        name: &str,
        client: &str,
        provider_of: ProviderOf,
        parent: &Context,
    ) -> Self {
        let span = tracer
            .span_builder(format!("run {name}"))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("chorus.pipeline", name.to_owned()),
                KeyValue::new("chorus.client", client.to_owned()),
            ])
            .start_with_context(&tracer, parent);
        let run = parent.with_span(span);
        Self {
            shared: Arc::new(Shared {
                tracer,
                capture_content,
                provider_of,
                state: Mutex::new(State {
                    run,
                    stage: None,
                    plugins: Vec::new(),
                    calls: HashMap::new(),
                    ended: false,
                }),
            }),
        }
    }

    /// The `Progress` that turns the run's events into spans.
    pub fn watcher(&self) -> Progress {
        let shared = self.shared.clone();
        Arc::new(move |event| shared.see(event))
    }

    /// The run ended with `outcome`: its span says how, and every span
    /// still open ends.
    pub fn end(self, outcome: &Result<Arc<RunRecord>, RunError>) {
        let mut state = self.shared.lock();
        let span = state.run.span();
        match outcome {
            Ok(record) => {
                let usage = &record.usage;
                span.set_attributes([
                    KeyValue::new("chorus.outcome", record.kind.as_str()),
                    KeyValue::new("chorus.cost_estimated", usage.cost_estimated),
                    KeyValue::new("chorus.tokens_estimated", usage.tokens_estimated),
                    KeyValue::new("chorus.calls", record.calls.len() as i64),
                ]);
                // An unknown cost has no attribute, never a $0 one.
                if let Some(usd) = usage.cost_usd {
                    span.set_attribute(KeyValue::new("chorus.cost_usd", usd));
                }
            }
            Err(error) => {
                let kind = crate::metrics::failure(error);
                span.set_attributes([
                    KeyValue::new("chorus.outcome", kind),
                    KeyValue::new("error.type", kind),
                ]);
                span.set_status(Status::error(error.to_string()));
            }
        }
        state.close();
    }
}

impl Drop for RunTrace {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        if !state.ended {
            state.run.span().set_attributes([
                KeyValue::new("chorus.outcome", "cancelled"),
                KeyValue::new("error.type", "cancelled"),
            ]);
            state.close();
        }
    }
}

impl State {
    /// Ends every open span, the run's last.
    fn close(&mut self) {
        for (_, call) in self.calls.drain() {
            call.span().end();
        }
        for (_, plugin) in self.plugins.drain(..).rev() {
            plugin.span().end();
        }
        if let Some(stage) = self.stage.take() {
            stage.span().end();
        }
        self.run.span().end();
        self.ended = true;
    }

    /// The span a call made by `stage` (`fan-out`, or a plugin) belongs
    /// under: that plugin's call, else the stage, else the run.
    fn parent_of(&self, stage: &str) -> &Context {
        self.plugins
            .iter()
            .rev()
            .find(|(plugin, _)| &**plugin == stage)
            .map(|(_, cx)| cx)
            .or(self.stage.as_ref())
            .unwrap_or(&self.run)
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn child(
        &self,
        parent: &Context,
        name: String,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
        start: Option<SystemTime>,
    ) -> Context {
        let mut builder = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes);
        if let Some(start) = start {
            builder = builder.with_start_time(start);
        }
        parent.with_span(builder.start_with_context(&self.tracer, parent))
    }

    fn see(&self, event: Event) {
        let mut state = self.lock();
        if state.ended {
            return;
        }
        match event {
            Event::Started(request) => {
                let span = state.run.span();
                span.set_attribute(KeyValue::new("chorus.run.id", request.run_id.clone()));
                if self.capture_content {
                    span.set_attribute(KeyValue::new(
                        "chorus.prompt",
                        cut(&request.prompt).to_owned(),
                    ));
                }
            }
            Event::Stage(stage) => {
                if let Some(previous) = state.stage.take() {
                    previous.span().end();
                }
                let name = stage_name(stage);
                let stage = self.child(
                    &state.run,
                    format!("stage {name}"),
                    SpanKind::Internal,
                    vec![KeyValue::new("chorus.stage", name)],
                    None,
                );
                state.stage = Some(stage);
            }
            Event::PluginCalled { plugin, export } => {
                let parent = state.stage.as_ref().unwrap_or(&state.run);
                let span = self.child(
                    parent,
                    format!("{export} {plugin}"),
                    SpanKind::Internal,
                    vec![
                        KeyValue::new("chorus.plugin.name", plugin.to_string()),
                        KeyValue::new("chorus.plugin.export", export),
                    ],
                    None,
                );
                state.plugins.push((plugin, span));
            }
            Event::PluginReturned { plugin, error, .. } => {
                let Some(at) = state.plugins.iter().rposition(|(p, _)| *p == plugin) else {
                    return;
                };
                let (_, cx) = state.plugins.remove(at);
                let span = cx.span();
                if let Some(kind) = error {
                    span.set_attribute(KeyValue::new("error.type", kind));
                    span.set_status(Status::error(kind));
                }
                span.end();
            }
            Event::CallStarted { id, stage, request } => {
                let parent = state.parent_of(&stage).clone();
                let span = self.child(
                    &parent,
                    format!("chat {}", request.model),
                    SpanKind::Client,
                    self.request_attributes(id, &stage, &request),
                    None,
                );
                state.calls.insert(id, span);
            }
            Event::CallFinished(record) => {
                if record.reused_from.is_some() {
                    // Made by an earlier run: traced there.
                    return;
                }
                let call = match state.calls.remove(&record.id) {
                    Some(call) => call,
                    // Never sent (skipped for its cost), or answered from
                    // the response cache: a span of the time it took.
                    None => {
                        let parent = state.parent_of(&record.stage).clone();
                        let took = Duration::from_millis(u64::from(record.latency_ms));
                        let mut attributes = vec![
                            KeyValue::new("gen_ai.operation.name", "chat"),
                            KeyValue::new("gen_ai.request.model", record.model.clone()),
                            KeyValue::new("chorus.call.id", i64::from(record.id)),
                            KeyValue::new("chorus.call.stage", record.stage.clone()),
                        ];
                        if let Some(provider) = (self.provider_of)(&record.model) {
                            attributes.push(KeyValue::new("gen_ai.provider.name", provider));
                        }
                        self.child(
                            &parent,
                            format!("chat {}", record.model),
                            SpanKind::Client,
                            attributes,
                            SystemTime::now().checked_sub(took),
                        )
                    }
                };
                self.finish_call(&call, &record);
            }
            Event::Planned(_)
            | Event::FanOut { .. }
            | Event::CallTokens { .. }
            | Event::AnswerText { .. }
            | Event::CallQueued { .. }
            | Event::CallRetrying { .. }
            | Event::Fallback { .. }
            | Event::Note { .. } => {}
        }
    }

    /// What a model call asks: the GenAI request attributes, and chorus's.
    fn request_attributes(&self, id: u32, stage: &str, request: &ChatRequest) -> Vec<KeyValue> {
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.request.model", request.model.clone()),
            KeyValue::new("chorus.call.id", i64::from(id)),
            KeyValue::new("chorus.call.stage", stage.to_owned()),
            KeyValue::new("chorus.call.label", request.label.clone()),
        ];
        if let Some(provider) = (self.provider_of)(&request.model) {
            attributes.push(KeyValue::new("gen_ai.provider.name", provider));
        }
        let sampling = &request.sampling;
        if let Some(t) = sampling.temperature {
            attributes.push(KeyValue::new("gen_ai.request.temperature", f64::from(t)));
        }
        if let Some(p) = sampling.top_p {
            attributes.push(KeyValue::new("gen_ai.request.top_p", f64::from(p)));
        }
        if let Some(n) = sampling.max_tokens {
            attributes.push(KeyValue::new("gen_ai.request.max_tokens", i64::from(n)));
        }
        if let Some(seed) = sampling.seed {
            attributes.push(KeyValue::new(
                "gen_ai.request.seed",
                i64::try_from(seed).unwrap_or(i64::MAX),
            ));
        }
        if self.capture_content {
            let messages: Vec<_> = request
                .messages
                .iter()
                .map(|m| {
                    json!({
                        "role": m.role,
                        "parts": [{"type": "text", "content": cut(&m.content)}],
                    })
                })
                .collect();
            attributes.push(KeyValue::new(
                "gen_ai.input.messages",
                serde_json::Value::Array(messages).to_string(),
            ));
        }
        attributes
    }

    /// A model call's end: usage, cost, timings and outcome; its span ends.
    fn finish_call(&self, call: &Context, record: &CallRecord) {
        let span = call.span();
        let mut attributes = vec![
            KeyValue::new("chorus.call.status", record.status.clone()),
            KeyValue::new("chorus.call.attempts", i64::from(record.attempts)),
        ];
        let numbers = [
            ("gen_ai.usage.input_tokens", record.prompt_tokens),
            ("gen_ai.usage.output_tokens", record.completion_tokens),
            ("chorus.usage.reasoning_tokens", record.reasoning_tokens),
            ("chorus.usage.cached_tokens", record.cached_tokens),
            ("chorus.usage.cache_write_tokens", record.cache_write_tokens),
            ("chorus.call.ttft_ms", record.ttft_ms),
            ("chorus.call.queued_ms", record.queued_ms),
        ];
        for (key, value) in numbers {
            if let Some(value) = value {
                attributes.push(KeyValue::new(key, i64::from(value)));
            }
        }
        if let Some(usd) = record.cost_usd {
            attributes.push(KeyValue::new("chorus.cost_usd", usd));
            attributes.push(KeyValue::new(
                "chorus.cost_estimated",
                record.cost_estimated,
            ));
        }
        if let Some(from) = &record.cached_from {
            attributes.push(KeyValue::new(
                "chorus.call.cached_from",
                from.run_id.clone(),
            ));
        }
        if let Some(error) = &record.error {
            attributes.push(KeyValue::new("error.type", error.kind.clone()));
            if let Some(status) = error.status {
                attributes.push(KeyValue::new(
                    "http.response.status_code",
                    i64::from(status),
                ));
            }
            // The provider's own message may quote the prompt back (a
            // content filter, a context overflow): content, exported only
            // where content is.
            span.set_status(Status::error(if self.capture_content {
                format!("{}: {}", error.kind, cut(&error.message))
            } else {
                error.kind.clone()
            }));
        }
        if self.capture_content
            && let Some(reply) = &record.reply
        {
            let message = json!([{
                "role": "assistant",
                "parts": [{"type": "text", "content": cut(reply)}],
            }]);
            attributes.push(KeyValue::new("gen_ai.output.messages", message.to_string()));
        }
        span.set_attributes(attributes);
        span.end();
    }
}

/// A stage's name in a span: short and fixed.
fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Select => "select",
        Stage::Prompt => "prompt",
        Stage::FanOut => "fan-out",
        Stage::Synthesize => "synthesize",
    }
}

fn cut(text: &str) -> &str {
    crate::text::cut_at_char_boundary(text, MAX_CONTENT_BYTES)
}
