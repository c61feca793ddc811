//! The tool `feedback`: a rating of a run on one of the metrics the
//! configuration declares (`[metrics.NAME]`), given through the one gate
//! every door uses (`Chorus::give_feedback`). Listed only when some metric
//! is declared; its `metric` argument names them.

use std::collections::BTreeMap;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::app::Chorus;
use crate::app::feedback::{FeedbackError, Rating};
use crate::client::Client;
use crate::config::{Metric, MetricKind};
use crate::store::Given;

/// The tool's name (a pipeline may not take it).
pub const FEEDBACK: &str = "feedback";

/// `feedback`, naming the metrics `metrics` declares; `None` without any.
pub fn tool(metrics: &BTreeMap<String, Metric>) -> Option<Tool> {
    if metrics.is_empty() {
        return None;
    }
    let said: Vec<String> = metrics
        .iter()
        .map(|(name, metric)| match metric.kind {
            MetricKind::Boolean => format!("`{name}` (true or false)"),
            MetricKind::Float => match (metric.min, metric.max) {
                (Some(min), Some(max)) => format!("`{name}` (a number from {min} to {max})"),
                _ => format!("`{name}` (a number)"),
            },
        })
        .collect();
    let input = json!({
        "type": "object",
        "properties": {
            "run_id": {
                "type": "string",
                "description": "The run to rate: its id (as a tool's result gives it), a unique prefix, or `last`."
            },
            "metric": {
                "type": "string",
                "enum": metrics.keys().collect::<Vec<_>>(),
                "description": "What is rated."
            },
            "value": {
                "anyOf": [{"type": "boolean"}, {"type": "number"}],
                "description": "The rating: true or false for a boolean metric, a number for the others."
            },
            "comment": {
                "type": "string",
                "description": "Why, in a few words (optional)."
            }
        },
        "required": ["run_id", "metric", "value"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "metric": {"type": "string"},
            "value": {"type": "number"},
            "replaced": {"type": "boolean"},
            "error": {"type": "string"}
        }
    });
    Some(
        Tool::new(
            FEEDBACK,
            format!(
                "Rate a run's answer: {}. Only your own runs can be rated; rating a run again on \
                 the same metric replaces your earlier rating.",
                said.join(", ")
            ),
            input.as_object().cloned().unwrap_or_default(),
        )
        .with_raw_output_schema(std::sync::Arc::new(
            output.as_object().cloned().unwrap_or_default(),
        ))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
    )
}

/// The rating a call's arguments give, or what is wrong with them.
fn rating(arguments: Option<JsonObject>) -> Result<Rating, String> {
    let mut arguments = arguments
        .ok_or("missing arguments: pass {\"run_id\": \"…\", \"metric\": \"…\", \"value\": …}")?;
    let mut text = |name: &str| match arguments.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("`{name}` must be a string, got {other}")),
    };
    let run = text("run_id")?.ok_or("missing `run_id`: the run to rate")?;
    let metric = text("metric")?.ok_or("missing `metric`: what is rated")?;
    let comment = text("comment")?;
    let value = arguments
        .remove("value")
        .ok_or("missing `value`: the rating")?;
    if let Some(unknown) = arguments.keys().next() {
        return Err(format!(
            "unknown argument `{unknown}`: this tool takes `run_id`, `metric`, `value`, `comment`"
        ));
    }
    Ok(Rating {
        run,
        metric,
        value,
        comment,
    })
}

/// Gives the rating the call's arguments say, as `client`.
pub async fn call(
    chorus: &Chorus,
    client: &Client,
    arguments: Option<JsonObject>,
) -> CallToolResult {
    let refused = |message: String| {
        let mut result = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
        result.structured_content = Some(json!({"error": message}));
        result
    };
    let rating = match rating(arguments) {
        Ok(rating) => rating,
        Err(message) => return refused(message),
    };
    match chorus.give_feedback(client, rating).await {
        Ok(recorded) => {
            let f = &recorded.feedback;
            let mut result = CallToolResult::success(vec![ContentBlock::text(recorded.said())]);
            result.structured_content = Some(json!({
                "run_id": f.run_id,
                "metric": f.metric,
                "value": f.value,
                "replaced": matches!(recorded.given, Given::Replaced { .. }),
            }));
            result
        }
        // Where the store lies is for the server's log, not for a tenant.
        Err(FeedbackError::Store(error)) => {
            tracing::warn!("feedback not kept: {error}");
            refused(
                "the run store could not keep the rating: try again (the server's log says why)"
                    .to_owned(),
            )
        }
        Err(error) => refused(error.to_string()),
    }
}
