//! The tool surface: one MCP tool per pipeline, with a small input schema
//! (the whole list should cost a client few tokens) and the run result as
//! structured output.

use std::sync::{Arc, LazyLock};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::config::Pipeline;
use crate::pipeline::{Merger, RunError, options};
use crate::record::{AnswerKind, RunRecord};

/// The result's shape, kept compact: every tool repeats it in `tools/list`,
/// and clients pay for it in tokens. (The full record is documented in the
/// README and readable as a `chorus://runs/{id}` resource.)
static OUTPUT_SCHEMA: LazyLock<Arc<JsonObject>> = LazyLock::new(|| {
    let schema = json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "pipeline": {"type": "string"},
            "kind": {"enum": ["synthesis", "single", "vote", "pick", "unmerged", "none"]},
            "summary": {"type": "string"},
            "answer": {"type": "string"},
            "notes": {"type": "array", "items": {"type": "string"}},
            "calls": {"type": "array", "items": {"type": "object"}},
            "usage": {"type": "object"},
            "elapsed_ms": {"type": "integer"},
            "details": {"type": "object"},
            "follow_up_of": {"type": "string"},
            "resynthesis_of": {"type": "string"}
        },
        "required": ["run_id", "pipeline", "kind", "summary", "answer", "notes", "calls", "usage", "elapsed_ms"]
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
    let structured = serde_json::to_value(result).unwrap_or(Value::Null);
    let content = vec![
        ContentBlock::text(result.answer.clone()),
        ContentBlock::text(account(result)),
    ];
    let mut tool_result = if result.kind == AnswerKind::None {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    tool_result.structured_content = Some(structured);
    tool_result
}

pub fn failure(error: &RunError) -> CallToolResult {
    failure_text(&error.to_string())
}

pub fn failure_text(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("chorus: {message}"))])
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Totals;

    #[test]
    fn the_output_schema_names_exactly_the_fields_of_a_result() {
        let result = RunRecord {
            run_id: "r".into(),
            pipeline: "p".into(),
            kind: AnswerKind::Single,
            summary: "s".into(),
            answer: "a".into(),
            notes: vec![],
            calls: vec![],
            usage: Totals::default(),
            elapsed_ms: 1,
            details: Some(json!({})),
            follow_up_of: Some("r0".into()),
            resynthesis_of: Some("r1".into()),
        };
        let value = serde_json::to_value(&result).unwrap();
        let mut fields: Vec<&String> = value.as_object().unwrap().keys().collect();
        let mut declared: Vec<&String> = OUTPUT_SCHEMA["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        fields.sort();
        declared.sort();
        assert_eq!(fields, declared);
        for required in OUTPUT_SCHEMA["required"].as_array().unwrap() {
            assert!(value.get(required.as_str().unwrap()).is_some());
        }
        assert_eq!(value["kind"], "single");
    }

    #[test]
    fn resynthesis_arguments_are_checked() {
        let parse = |v: Value| resynthesis_arguments(v.as_object().cloned());
        assert_eq!(
            parse(json!({"run_id": " r1 "})).unwrap(),
            ("r1".to_owned(), Merger::AsBefore)
        );
        assert_eq!(
            parse(json!({"run_id": "r1", "synthesizer": "vote", "pipeline": null})).unwrap(),
            ("r1".to_owned(), Merger::Synthesizer("vote".into()))
        );
        assert_eq!(
            parse(json!({"run_id": "r1", "pipeline": "heavy"}))
                .unwrap()
                .1,
            Merger::Pipeline("heavy".into())
        );
        for (arguments, message) in [
            (json!({}), "missing `run_id`"),
            (json!({"run_id": 3}), "`run_id` must be a non-empty string"),
            (
                json!({"run_id": "r", "synthesizer": "a", "pipeline": "b"}),
                "not both",
            ),
            (
                json!({"run_id": "r", "model": "x"}),
                "unknown argument `model`",
            ),
        ] {
            let error = parse(arguments).unwrap_err();
            assert!(error.contains(message), "{error}");
        }
        assert!(resynthesis_arguments(None).is_err());
    }
}
