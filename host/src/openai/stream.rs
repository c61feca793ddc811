//! A run answered as server-sent events: the response's status is decided
//! when the gate has admitted the run (a refusal is still an ordinary
//! error response), then the panel's progress goes out as `reasoning`
//! deltas (the field OpenRouter and DeepSeek use, which clients show as
//! thinking) — each change, and at least every [`HEARTBEAT`] so proxies
//! and clients do not time out — then the answer: as its model writes it
//! where the strategy makes that call with `host.complete-answer` (see
//! `live`), else whole when the run has it.
//!
//! The run goes on in a task of its own (see `super::start`), under its own
//! deadline whether or not its reader reads; the response body awaits it.
//! A client that hangs up drops the body, and with it the run and every
//! upstream request. A client that stops reading holds nothing: the run's
//! events wait in a buffer of [`BUFFERED`] (past it, progress lines are
//! dropped, and the answer's text stops going out live: it follows whole,
//! from where it stopped, when the run ends), the run ends and is kept as
//! any other, and the connection is closed once a write has waited
//! `http.write_timeout`.
//!
//! What each event looks like is the API's ([`Frames`]): chat completion
//! chunks here, the Responses API's events in `responses`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::answer;
use super::errors::ApiError;
use crate::events::live::{Live, Streamed};
use crate::events::{Event, Progress, Stage};
use crate::pipeline::RunError;
use crate::record::RunRecord;

/// The longest the stream stays silent while the run works.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// Progress lines one stream carries at most (a pipeline of many calls
/// says the rest in its heartbeat).
const MAX_PROGRESS_LINES: usize = 200;

/// Events waiting for a stream's reader; past this the run does not wait
/// for it (see the module's note).
pub const BUFFERED: usize = 1024;

/// A run in flight, as its caller awaits it.
pub type Run = Pin<Box<dyn Future<Output = Result<Arc<RunRecord>, RunError>> + Send>>;

/// The events of one API's stream.
pub trait Frames: Send + 'static {
    /// The first events, once the run has an id.
    fn opening(&mut self, run_id: &str) -> Vec<Value>;
    /// A line of progress.
    fn progress(&mut self, text: &str) -> Vec<Value>;
    /// Text of the answer as its model writes it.
    fn text(&mut self, text: &str) -> Vec<Value>;
    /// The end of the answer — `rest`, what completes the text sent so
    /// far (the whole answer when nothing was) — and the events that
    /// close the stream.
    fn answer(&mut self, record: &RunRecord, rest: &str, streamed: Streamed) -> Vec<Value>;
    /// An error once the stream has begun.
    fn error(&mut self, error: &ApiError) -> Vec<Value>;
    /// Whether the stream ends with `data: [DONE]`.
    fn done_marker(&self) -> bool;
    /// An event's `event:` name, if the API names them.
    fn name(&self, event: &Value) -> Option<String>;
}

/// The watcher a streamed run is given, and what it hears. It never waits:
/// an event that finds the buffer full is dropped, and once a piece of the
/// answer's text has been, no later piece goes out (what went out stays a
/// prefix of the answer, which `Live::rest` completes at the end).
pub fn watcher() -> (Progress, mpsc::Receiver<Event>) {
    let (tx, rx) = mpsc::channel(BUFFERED);
    let text_lost = std::sync::atomic::AtomicBool::new(false);
    let progress: Progress = Arc::new(move |event: Event| {
        use std::sync::atomic::Ordering::Relaxed;
        // Token counts are many and say nothing a client shows (the
        // answer's own text, `AnswerText`, is what it shows).
        if matches!(event, Event::CallTokens { .. } | Event::CallStarted { .. }) {
            return;
        }
        let is_text = matches!(event, Event::AnswerText { .. });
        if is_text && text_lost.load(Relaxed) {
            return;
        }
        if tx.try_send(event).is_err() && is_text {
            text_lost.store(true, Relaxed);
        }
    });
    (progress, rx)
}

/// The panel's progress, in words.
#[derive(Default)]
struct Panel {
    asked: usize,
    answered: usize,
    failed: usize,
    stage: Option<Stage>,
    lines: usize,
}

impl Panel {
    /// A line when `event` changes what there is to say.
    fn see(&mut self, event: &Event) -> Option<String> {
        let line = match event {
            Event::Stage(stage) => {
                self.stage = Some(*stage);
                match stage {
                    Stage::Synthesize if self.asked > 0 && self.answered == 0 => {
                        Some(format!("{}: no answer to merge.", self.state()))
                    }
                    Stage::Synthesize => Some(format!("{}: merging the answers.", self.state())),
                    _ => None,
                }
            }
            // What the host says while a run waits (a plugin still
            // compiling on a first start, a free slot) and what a
            // plugin says it is doing.
            Event::Note { plugin, message } if plugin == "chorus" => Some(sentence(message)),
            Event::Note { plugin, message } => Some(format!("{plugin}: {}", sentence(message))),
            Event::FanOut { calls } => {
                self.asked += calls;
                Some(format!("Asking {calls} models."))
            }
            Event::CallFinished(call) if call.stage == "fan-out" => {
                if call.status == "ok" {
                    self.answered += 1;
                } else {
                    self.failed += 1;
                }
                Some(format!("{}.", self.state()))
            }
            Event::Fallback { from, to, .. } => Some(format!("{from} failed; asking {to}.")),
            _ => None,
        }?;
        self.lines += 1;
        (self.lines <= MAX_PROGRESS_LINES).then_some(line)
    }

    fn state(&self) -> String {
        let mut state = format!("{} of {} answered", self.answered, self.asked);
        if self.failed > 0 {
            state.push_str(&format!(", {} failed", self.failed));
        }
        state
    }

    fn heartbeat(&self, since: Instant) -> String {
        let doing = self.stage.map_or("working", Stage::as_str);
        format!(
            "Still {doing} ({} s; {}).",
            since.elapsed().as_secs(),
            self.state()
        )
    }
}

/// `message` as a sentence: its first letter capital, a full stop at
/// its end.
fn sentence(message: &str) -> String {
    let message = crate::text::ellipsized(message.trim(), 300);
    let mut chars = message.chars();
    let mut sentence: String = chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if !sentence.ends_with(['.', '!', '?', '…']) {
        sentence.push('.');
    }
    sentence
}

/// Runs `run` and answers in `frames`: an error response if it is refused
/// or fails before it starts, else a stream.
pub async fn respond(
    mut run: Run,
    mut events: mpsc::Receiver<Event>,
    mut frames: impl Frames,
) -> Response {
    let mut panel = Panel::default();
    let mut waiting = Vec::new();
    // Until the run has begun, its refusal is still an HTTP status.
    let run_id = loop {
        tokio::select! {
            biased;
            // A closed channel (the run ended) disables this branch.
            Some(event) = events.recv() => match event {
                Event::Started(request) => break request.run_id.clone(),
                event => waiting.extend(panel.see(&event)),
            },
            outcome = &mut run => {
                return match outcome {
                    Err(error) => ApiError::of_run(&error).into_response(),
                    Ok(record) => match ApiError::of_unanswered(&record) {
                        Some(error) => error.into_response(),
                        None => {
                            let mut all = frames.opening(&record.run_id);
                            all.extend(frames.answer(&record, &record.answer, Streamed::Whole));
                            sse(&record.run_id, finished(all, &frames))
                        }
                    },
                };
            }
        }
    };
    let mut queue: VecDeque<Value> = frames.opening(&run_id).into();
    for line in waiting {
        queue.extend(frames.progress(&line));
    }
    let state = State {
        run: Some(run),
        events,
        frames,
        panel,
        live: Live::default(),
        queue,
        ticks: tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT),
        since: Instant::now(),
        ended: false,
    };
    sse(
        &run_id,
        Box::pin(futures::stream::unfold(state, State::next)),
    )
}

/// Events in the order they go, as one finished stream.
fn finished(events: Vec<Value>, frames: &impl Frames) -> Pin<Box<dyn Stream<Item = Bytes> + Send>> {
    let mut bytes: Vec<Bytes> = events.iter().map(|e| frame(frames.name(e), e)).collect();
    if frames.done_marker() {
        bytes.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
    Box::pin(futures::stream::iter(bytes))
}

fn frame(name: Option<String>, event: &Value) -> Bytes {
    match name {
        Some(name) => Bytes::from(format!("event: {name}\ndata: {event}\n\n")),
        None => Bytes::from(format!("data: {event}\n\n")),
    }
}

fn sse(run_id: &str, stream: Pin<Box<dyn Stream<Item = Bytes> + Send>>) -> Response {
    use futures::StreamExt;
    let body = Body::from_stream(stream.map(Ok::<_, Infallible>));
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // nginx would hold the events back otherwise.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Ok(id) = HeaderValue::from_str(run_id) {
        headers.insert(super::RUN_ID_HEADER, id);
    }
    response
}

struct State<F> {
    /// `None` once it has ended.
    run: Option<Run>,
    events: mpsc::Receiver<Event>,
    frames: F,
    panel: Panel,
    live: Live,
    queue: VecDeque<Value>,
    ticks: tokio::time::Interval,
    since: Instant,
    ended: bool,
}

impl<F: Frames> State<F> {
    /// Queues what `event` has to say; whether it said anything.
    fn see(&mut self, event: &Event) -> bool {
        let events = match event {
            Event::AnswerText { id, attempt, text } => {
                let text = self.live.piece(*id, *attempt, text);
                self.frames.text(&text)
            }
            event => match self.panel.see(event) {
                Some(line) => self.frames.progress(&line),
                None => return false,
            },
        };
        self.queue.extend(events);
        true
    }

    async fn next(mut self) -> Option<(Bytes, Self)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                let bytes = frame(self.frames.name(&event), &event);
                return Some((bytes, self));
            }
            if self.ended {
                return None;
            }
            let Some(run) = self.run.as_mut() else {
                self.ended = true;
                if self.frames.done_marker() {
                    return Some((Bytes::from_static(b"data: [DONE]\n\n"), self));
                }
                return None;
            };
            tokio::select! {
                // Events first: what the run said before it ended goes
                // out before its answer.
                biased;
                Some(event) = self.events.recv() => {
                    if self.see(&event) {
                        self.ticks.reset();
                    }
                }
                outcome = run => {
                    self.run = None;
                    while let Ok(event) = self.events.try_recv() {
                        self.see(&event);
                    }
                    let events = match outcome {
                        Err(error) => self.frames.error(&ApiError::of_run(&error)),
                        Ok(record) => match ApiError::of_unanswered(&record) {
                            Some(error) => self.frames.error(&error),
                            None => {
                                let (rest, streamed) = self.live.rest(&record.answer);
                                self.frames.answer(&record, &rest, streamed)
                            }
                        },
                    };
                    self.queue.extend(events);
                }
                _ = self.ticks.tick() => {
                    let line = self.panel.heartbeat(self.since);
                    let events = self.frames.progress(&line);
                    self.queue.extend(events);
                }
            }
        }
    }
}

/// `chat.completion.chunk`s.
pub struct Chunks {
    pub id: String,
    pub model: String,
    pub created: u64,
    pub include_usage: bool,
    pub not_applied: Vec<String>,
}

impl Chunks {
    pub fn new(model: String, include_usage: bool, not_applied: Vec<String>) -> Self {
        Self {
            id: String::new(),
            model,
            created: answer::now(),
            include_usage,
            not_applied,
        }
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        });
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }
}

impl Frames for Chunks {
    fn opening(&mut self, run_id: &str) -> Vec<Value> {
        self.id = format!("chatcmpl-{run_id}");
        vec![self.chunk(json!({"role": "assistant", "content": ""}), None)]
    }

    fn progress(&mut self, text: &str) -> Vec<Value> {
        let line = format!("{text}\n");
        vec![self.chunk(json!({"reasoning": line, "reasoning_content": line}), None)]
    }

    fn text(&mut self, text: &str) -> Vec<Value> {
        vec![self.chunk(json!({"content": text}), None)]
    }

    fn answer(&mut self, record: &RunRecord, rest: &str, streamed: Streamed) -> Vec<Value> {
        let mut events = Vec::new();
        if let Some(calls) = answer::tool_calls_delta(record) {
            events.push(self.chunk(calls, None));
        } else if !rest.is_empty() || streamed == Streamed::Whole {
            events.push(self.chunk(json!({"content": rest}), None));
        }
        let mut last = self.chunk(json!({}), Some(answer::finish_reason(record)));
        last["chorus"] = answer::extension(record, &self.not_applied);
        last["chorus"]["streamed"] = json!(streamed.as_str());
        events.push(last);
        if self.include_usage {
            let mut usage = self.chunk(json!({}), None);
            usage["choices"] = json!([]);
            usage["usage"] = answer::usage(record);
            events.push(usage);
        }
        events
    }

    fn error(&mut self, error: &ApiError) -> Vec<Value> {
        vec![error.body()]
    }

    fn done_marker(&self) -> bool {
        true
    }

    fn name(&self, _: &Value) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::Request;

    #[test]
    fn the_panel_line_says_what_the_host_says_and_never_merges_nothing() {
        let mut panel = Panel::default();
        let note = |plugin: &str, message: &str| Event::Note {
            plugin: plugin.into(),
            message: message.into(),
        };
        assert_eq!(
            panel.see(&note(
                "chorus",
                "waiting for plugin `medoid` to finish compiling (chorus has just started)"
            )),
            Some(
                "Waiting for plugin `medoid` to finish compiling (chorus has just started).".into()
            )
        );
        assert_eq!(
            panel.see(&note("heavy-planner", "planning 4 sub-questions")),
            Some("heavy-planner: Planning 4 sub-questions.".into())
        );
        assert_eq!(
            panel.see(&Event::FanOut { calls: 2 }),
            Some("Asking 2 models.".into())
        );
        let failed = Arc::new(crate::record::CallRecord {
            stage: "fan-out".into(),
            status: "failed".into(),
            ..Default::default()
        });
        panel.see(&Event::CallFinished(failed.clone()));
        panel.see(&Event::CallFinished(failed));
        assert_eq!(
            panel.see(&Event::Stage(Stage::Synthesize)),
            Some("0 of 2 answered, 2 failed: no answer to merge.".into())
        );
    }

    #[test]
    fn a_reader_that_falls_behind_gets_the_rest_of_the_answer_whole_from_where_its_text_stopped() {
        let (progress, mut events) = watcher();
        let piece = |i: usize| Event::AnswerText {
            id: 1,
            attempt: 1,
            text: format!("{i} ").into(),
        };
        for i in 0..BUFFERED + 10 {
            progress(piece(i));
        }
        progress(Event::FanOut { calls: 2 });
        let mut live = Live::default();
        let mut text = String::new();
        while let Ok(event) = events.try_recv() {
            let Event::AnswerText {
                id,
                attempt,
                text: t,
            } = event
            else {
                panic!("only text was buffered")
            };
            text.push_str(&live.piece(id, attempt, &t));
        }
        assert_eq!(
            text.split(' ').count() - 1,
            BUFFERED,
            "the buffer is bounded"
        );
        // Room again, but the text stays stopped: a later piece would leave
        // a gap in what the client has.
        progress(piece(BUFFERED + 10));
        progress(Event::FanOut { calls: 1 });
        assert!(matches!(events.try_recv(), Ok(Event::FanOut { calls: 1 })));
        let answer: String = (0..=BUFFERED + 10).map(|i| format!("{i} ")).collect();
        let (rest, streamed) = live.rest(&answer);
        text.push_str(&rest);
        assert_eq!(text, answer);
        assert_eq!(streamed, Streamed::Live);
    }

    /// The events of a stream as far as it has gone.
    async fn next_data(body: &mut axum::body::BodyDataStream) -> Value {
        use futures::StreamExt;
        let bytes = body.next().await.unwrap().unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        serde_json::from_str(text.trim().strip_prefix("data: ").unwrap()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_run_says_it_is_still_working_at_least_every_15_s() {
        let (progress, events) = watcher();
        let run: Run = Box::pin(async move {
            progress(Event::Started(Arc::new(Request {
                run_id: "r1".into(),
                pipeline: "ask".into(),
                prompt: "q".into(),
                options: json!({}),
                attachments: Vec::new(),
                tools: None,
            })));
            progress(Event::FanOut { calls: 5 });
            futures::future::pending().await
        });
        let frames = Chunks::new("ask".into(), false, Vec::new());
        let response = respond(run, events, frames).await;
        assert_eq!(response.status(), 200);
        let mut body = response.into_body().into_data_stream();
        let opening = next_data(&mut body).await;
        assert_eq!(opening["id"], "chatcmpl-r1");
        let asking = next_data(&mut body).await;
        assert_eq!(
            asking["choices"][0]["delta"]["reasoning"],
            "Asking 5 models.\n"
        );
        let started = tokio::time::Instant::now();
        for _ in 0..3 {
            let beat = next_data(&mut body).await;
            let line = beat["choices"][0]["delta"]["reasoning"].as_str().unwrap();
            assert!(
                line.starts_with("Still asking") || line.starts_with("Still working"),
                "{line}"
            );
        }
        assert!(
            started.elapsed() <= 3 * HEARTBEAT,
            "{:?}",
            started.elapsed()
        );
    }
}
