//! The tool surface: one MCP tool per pipeline, with a small input schema
//! (the whole list should cost a client few tokens) and the run result as
//! structured output. Every result — an answer, a run that failed, a call
//! with bad arguments — carries `structuredContent` that validates against
//! the tool's `outputSchema` (clients such as the TypeScript SDK check).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::resources::RUN_URI_PREFIX;
use crate::app::Chorus;
use crate::attach;
use crate::client::Client;
use crate::config::Pipeline;
use crate::events::Progress;
use crate::pipeline::{Merger, Question, RunError, Runner, options};
use crate::record::{AnswerKind, RunRecord, Totals};

/// The result's shape, kept compact: every tool repeats it in `tools/list`,
/// and clients pay for it in tokens. (The full record is documented in the
/// README and readable as a `chorus://runs/{id}` resource.)
static OUTPUT_SCHEMA: LazyLock<Arc<JsonObject>> = LazyLock::new(|| {
    let schema = json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "error": {
                "type": "object",
                "properties": {"kind": {"type": "string"}, "message": {"type": "string"}},
                "required": ["kind", "message"]
            },
            "pipeline": {"type": "string"},
            "kind": {"enum": ["synthesis", "single", "vote", "pick", "unmerged", "none", "tool-call"]},
            "summary": {"type": "string"},
            "answer": {"type": "string"},
            "notes": {"type": "array", "items": {"type": "string"}},
            "calls": {"type": "array", "items": {"type": "object"}},
            "usage": {"type": "object"},
            "elapsed_ms": {"type": "integer"},
            "details": {"type": "object"},
            "follow_up_of": {"type": "string"},
            "resynthesis_of": {"type": "string"},
            "experiment": {
                "type": "object",
                "description": "The experiment this run served ([experiments.NAME]): the pipeline asked for and the variant that ran.",
                "properties": {"name": {"type": "string"}, "variant": {"type": "string"}},
                "required": ["name", "variant"]
            },
            "sources": {
                "type": "array",
                "description": "Web sources the models cited (web search), numbered as in the answer's closing Sources list.",
                "items": {
                    "type": "object",
                    "properties": {
                        "number": {"type": "integer"},
                        "url": {"type": "string"},
                        "title": {"type": "string"},
                        "cited_by": {"type": "array", "items": {"type": "string"}},
                        "calls": {"type": "array", "items": {"type": "integer"}}
                    },
                    "required": ["number", "url", "cited_by", "calls"]
                }
            }
        },
        "required": ["pipeline", "kind", "summary", "answer", "notes", "calls", "usage", "elapsed_ms", "details"]
    });
    Arc::new(schema.as_object().cloned().unwrap_or_default())
});

pub fn tool(name: &str, pipeline: &Pipeline) -> Tool {
    let mut properties = options::schema(&pipeline.options);
    properties.insert(
        "prompt".into(),
        json!({
            "type": "string",
            "description": "The question or task, complete and self-contained: the models see nothing else."
        }),
    );
    let input = json!({
        "type": "object",
        "properties": properties,
        "required": ["prompt"],
        "additionalProperties": false
    });
    Tool::new(
        name.to_owned(),
        pipeline.description.clone(),
        input.as_object().cloned().unwrap_or_default(),
    )
    .with_raw_output_schema(OUTPUT_SCHEMA.clone())
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(true))
}

/// The tools a runner serves: one per pipeline, `resynthesize`, and
/// `feedback` when the configuration declares metrics.
pub fn list(runner: &Runner) -> Vec<Tool> {
    let mut tools: Vec<Tool> = runner
        .pipelines()
        .map(|(name, pipeline)| tool(name, pipeline))
        .collect();
    let synthesizers = runner.synthesizer_names();
    let pipelines: Vec<&str> = runner.pipelines().map(|(n, _)| n.as_str()).collect();
    tools.push(resynthesize_tool(&synthesizers, &pipelines));
    tools.extend(feedback::tool(&runner.loaded.config.metrics));
    tools
}

/// The tool that merges a kept run's answers again.
pub const RESYNTHESIZE: &str = "resynthesize";

/// `resynthesize`: its choices are the synthesizer plugins and pipelines.
pub fn resynthesize_tool(synthesizers: &[&str], pipelines: &[&str]) -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "run_id": {
                "type": "string",
                "description": "The run whose answers to merge again."
            },
            "synthesizer": {
                "type": "string",
                "enum": synthesizers,
                "description": "Merge with this synthesizer plugin instead of the run's own."
            },
            "pipeline": {
                "type": "string",
                "enum": pipelines,
                "description": "Merge the way this pipeline does (its synthesizer and options)."
            }
        },
        "required": ["run_id"],
        "additionalProperties": false
    });
    Tool::new(
        RESYNTHESIZE,
        "Merge an earlier run's answers again, with another synthesizer or pipeline if given, \
         without asking its panel again: only the merge is paid for. The result is a new run \
         that names its source in `resynthesis_of`.",
        input.as_object().cloned().unwrap_or_default(),
    )
    .with_raw_output_schema(OUTPUT_SCHEMA.clone())
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(true))
}

/// The run id and the merger of a `resynthesize` call, or what is wrong.
pub fn resynthesis_arguments(arguments: Option<JsonObject>) -> Result<(String, Merger), String> {
    let mut arguments = arguments.ok_or("missing arguments: pass {\"run_id\": \"…\"}")?;
    let mut text = |name: &str| match arguments.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_owned())),
        Some(other) => Err(format!("`{name}` must be a non-empty string, got {other}")),
    };
    let run_id = text("run_id")?.ok_or("missing `run_id`: the run whose answers to merge")?;
    let merger = match (text("synthesizer")?, text("pipeline")?) {
        (Some(_), Some(_)) => return Err("give `synthesizer` or `pipeline`, not both".into()),
        (Some(synthesizer), None) => Merger::Synthesizer(synthesizer),
        (None, Some(pipeline)) => Merger::Pipeline(pipeline),
        (None, None) => Merger::AsBefore,
    };
    if let Some(unknown) = arguments.keys().next() {
        return Err(format!(
            "unknown argument `{unknown}`: this tool takes `run_id`, `synthesizer`, `pipeline`"
        ));
    }
    Ok((run_id, merger))
}

/// The prompt and the other arguments (the pipeline's options, checked by
/// the pipeline) of a call, or a message saying what is wrong.
pub fn split_arguments(arguments: Option<JsonObject>) -> Result<(String, JsonObject), String> {
    let mut arguments =
        arguments.ok_or("missing arguments: pass {\"prompt\": \"your question\"}")?;
    match arguments.remove("prompt") {
        Some(Value::String(prompt)) => Ok((prompt, arguments)),
        Some(other) => Err(format!(
            "`prompt` must be a string, got {}",
            type_name(&other)
        )),
        None => Err("missing `prompt`: pass {\"prompt\": \"your question\"}".to_owned()),
    }
}

/// A tool call, its arguments checked: what to run.
pub struct Call {
    /// The tool's name: a pipeline's, or `resynthesize`.
    pub tool: String,
    pub work: Work,
    /// Who calls it.
    pub client: Arc<Client>,
    /// The caller's trace, which the run's continues (only when runs are
    /// traced; see `telemetry::parent`).
    pub trace: Option<opentelemetry::Context>,
}

pub enum Work {
    /// A pipeline on a question (`options` may hold the built-in ones);
    /// `sources` are the attachments named, read by `attachments::load`
    /// into the question before the run.
    Run {
        question: Question,
        options: JsonObject,
        sources: Vec<attach::Source>,
    },
    /// A kept run's answers merged again.
    Resynthesize { run_id: String, merger: Merger },
}

impl Call {
    /// Reads the call to tool `tool` (which exists), or says what is wrong
    /// with its arguments.
    pub fn parse(
        tool: String,
        arguments: Option<JsonObject>,
        client: Arc<Client>,
    ) -> Result<Self, String> {
        let work = if tool == RESYNTHESIZE {
            let (run_id, merger) = resynthesis_arguments(arguments)?;
            Work::Resynthesize { run_id, merger }
        } else {
            let (prompt, mut options) = split_arguments(arguments)?;
            let sources = attach::take(&mut options)?;
            Work::Run {
                question: Question::text(prompt),
                options,
                sources,
            }
        };
        Ok(Self {
            tool,
            work,
            client,
            trace: None,
        })
    }

    /// Runs it; the run is recorded by `chorus`. Cancel by dropping.
    pub async fn execute(
        mut self,
        chorus: &Chorus,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        use opentelemetry::context::FutureExt as _;
        let trace = self.trace.take();
        let work = self.work_on(chorus, progress);
        match trace {
            // The run's span finds its parent in the context current as
            // it starts.
            Some(trace) => work.with_context(trace).await,
            None => work.await,
        }
    }

    async fn work_on(
        self,
        chorus: &Chorus,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        match self.work {
            Work::Run {
                question, options, ..
            } => {
                chorus
                    .run(&self.client, &self.tool, question, options, progress)
                    .await
            }
            Work::Resynthesize { run_id, merger } => {
                chorus
                    .resynthesize(&self.client, &run_id, merger, progress)
                    .await
            }
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A finished run as a tool result: the answer as text, a one-paragraph
/// account of how it was made, and the full record as structured content.
/// A run in which no model answered is an error result — with every cause.
pub fn success(result: &RunRecord) -> CallToolResult {
    let shown = shown_answer(result, MAX_RESULT_ANSWER_BYTES);
    let content = vec![
        ContentBlock::text(
            shown
                .as_ref()
                .map_or(&result.answer, |(text, _)| text)
                .clone(),
        ),
        ContentBlock::text(account(result)),
        ContentBlock::resource_link(super::resources::link(&result.run_id, &result.summary)),
    ];
    let mut tool_result = if result.kind == AnswerKind::None {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    let mut structured = structured(result);
    if let Some((text, note)) = shown {
        structured["answer"] = Value::String(text);
        if let Some(notes) = structured["notes"].as_array_mut() {
            notes.push(Value::String(note));
        }
    }
    tool_result.structured_content = Some(structured);
    tool_result
}

/// The most of an answer one tool result carries. It is sent twice (as
/// text and in `structuredContent`), and rmcp's clients drop any message
/// over 16 MiB — the call would never end for them. The record keeps the
/// whole answer.
const MAX_RESULT_ANSWER_BYTES: usize = super::resources::MAX_TEXT_BYTES;

/// The answer cut to `max` bytes, with a note saying where it is whole;
/// `None` when it fits.
fn shown_answer(result: &RunRecord, max: usize) -> Option<(String, String)> {
    let answer = &result.answer;
    if answer.len() <= max {
        return None;
    }
    let end = crate::text::cut_at_char_boundary(answer, max).len();
    let run = &result.run_id;
    let text = format!(
        "{}\n\n[… cut to {end} of {} bytes to fit one MCP message]",
        &answer[..end],
        answer.len()
    );
    let note = format!(
        "The answer is {} bytes, more than one MCP message carries; the first {end} are shown. \
         It is kept whole: the resource {RUN_URI_PREFIX}{run}/answer gives it in parts, \
         `chorus runs answer {run}` prints it, and each model's own answer is the resource \
         {RUN_URI_PREFIX}{run}/calls/N/reply.",
        answer.len()
    );
    Some((text, note))
}

/// The record as the output schema describes it: `details` always an
/// object (a plugin's non-object details are kept under `value`).
pub fn structured(result: &RunRecord) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or_else(|_| json!({}));
    let details = match value.get_mut("details").map(Value::take) {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(details)) => Value::Object(details),
        Some(other) => json!({"value": other}),
    };
    value["details"] = details;
    value
}

/// Whether the run store kept this outcome: every run that started, not a
/// call refused for its arguments.
pub fn kept<T>(outcome: &Result<T, RunError>) -> bool {
    match outcome {
        Ok(_) => true,
        Err(error) => matches!(error, RunError::Plugin(_) | RunError::Timeout(_)),
    }
}

/// A run that produced no result at all.
pub fn failure(pipeline: &str, error: &RunError, elapsed: Duration) -> CallToolResult {
    let kind = match error {
        RunError::Plugin(_) => "plugin-failed",
        RunError::Timeout(_) => "timeout",
        RunError::Refused(_) => "refused",
        _ => "invalid-arguments",
    };
    refusal_of_kind(pipeline, kind, &error.to_string(), elapsed)
}

/// A call whose arguments are wrong: no run was started.
pub fn refusal(pipeline: &str, message: &str) -> CallToolResult {
    refusal_of_kind(pipeline, "invalid-arguments", message, Duration::ZERO)
}

fn refusal_of_kind(pipeline: &str, kind: &str, message: &str, elapsed: Duration) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!("chorus: {message}"))]);
    result.structured_content = Some(json!({
        "pipeline": pipeline,
        "kind": "none",
        "summary": format!("No answer: {message}"),
        "answer": "",
        "notes": [],
        "calls": [],
        "usage": Totals::default(),
        "elapsed_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "details": {},
        "error": {"kind": kind, "message": message},
    }));
    result
}

/// How the answer was made, in a few lines a model (or person) can act on.
fn account(result: &RunRecord) -> String {
    let mut lines = vec![format!("[chorus run {}] {}", result.run_id, result.summary)];
    let failed: Vec<String> = result
        .calls
        .iter()
        .filter_map(|c| {
            c.error
                .as_ref()
                .map(|e| format!("{} ({}): {}", c.model, e.kind, e.message))
        })
        .collect();
    if !failed.is_empty() {
        lines.push(format!("Failed: {}", failed.join("; ")));
    }
    lines.extend(result.notes.iter().cloned());
    lines.join("\n")
}

pub mod feedback;

#[cfg(test)]
mod strict;

#[cfg(test)]
mod tests;
