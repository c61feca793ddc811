//! Structured outputs: the shape a caller asked the answer to take — one
//! JSON object, or JSON matching a JSON Schema — and what chorus does to
//! keep it. The schema is compiled once, when the request is read, so a
//! schema that cannot be checked is the caller's error before any model
//! is asked (`AnswerFormat::new`; no `$ref` is ever fetched). A run asks
//! the format of the panel calls that put the caller's question and of
//! the call that writes the answer (`RunContext::with_format`), turns each
//! panel answer that is JSON into canonical JSON, so that equal answers
//! are equal text and a vote counts them as one (`canonical`), and checks
//! the answer before anyone gets it: one repair round by the model that
//! wrote it, else the run fails naming the path that does not match
//! (`held_to`).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::RunError;
use super::context::RunContext;
use crate::llm::{ChatRequest, Message, ResponseFormat, Role};
use crate::plugins::{Answer, AnswerKind};

/// At most this many problems are named, in a repair prompt or an error.
const MAX_PROBLEMS: usize = 8;

/// The largest schema taken, written as JSON: it goes to every call asked
/// for the format, and is compiled on the request's path. OpenAI's own
/// bound on a schema's strings is of the same order.
pub const MAX_SCHEMA_BYTES: usize = 128 * 1024;

/// The stage a repair call is recorded under.
pub const REPAIR_STAGE: &str = "chorus";

/// What the caller asked the answer to be, with its schema compiled.
#[derive(Clone)]
pub struct AnswerFormat {
    format: ResponseFormat,
    validator: Option<Arc<jsonschema::Validator>>,
}

impl fmt::Debug for AnswerFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AnswerFormat").field(&self.format).finish()
    }
}

/// One way an answer does not match: where (a JSON Pointer into the
/// answer; empty for the whole) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub at: String,
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            write!(f, "{}", self.what)
        } else {
            write!(f, "at `{}`: {}", self.at, self.what)
        }
    }
}

/// An answer that does not match its format, after the repair round.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the answer does not match {format}: {}; {repair}. The run's calls are kept: `chorus runs show {run_id}` shows what each model wrote",
    list(.problems, "; ")
)]
pub struct Unmatched {
    /// The format, in words ("the JSON Schema `weather`").
    pub format: String,
    pub problems: Vec<Problem>,
    /// What the repair round did.
    pub repair: String,
    pub run_id: String,
}

impl Unmatched {
    /// The first path that does not match, for an API's `param`.
    pub fn first_path(&self) -> &str {
        self.problems.first().map_or("", |p| p.at.as_str())
    }
}

/// `problems`, said one after another, `separator` between.
pub(super) fn list(problems: &[Problem], separator: &str) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

impl AnswerFormat {
    /// `format`, its schema compiled; `Err` says why a schema cannot be
    /// checked (it is not a JSON Schema, or refers to one elsewhere).
    pub fn new(format: ResponseFormat) -> Result<Self, String> {
        let validator = match &format {
            ResponseFormat::JsonObject => None,
            ResponseFormat::JsonSchema(schema) => {
                let size = schema.schema.to_string().len();
                if size > MAX_SCHEMA_BYTES {
                    return Err(format!(
                        "the schema `{}` is {size} bytes written as JSON, over chorus's limit of {MAX_SCHEMA_BYTES}",
                        schema.name
                    ));
                }
                let validator = jsonschema::validator_for(&schema.schema).map_err(|e| {
                    format!(
                        "the schema `{}` is not a JSON Schema chorus can check: {e} \
                         (a `$ref` must point inside the schema: chorus fetches none)",
                        schema.name
                    )
                })?;
                Some(Arc::new(validator))
            }
        };
        Ok(Self { format, validator })
    }

    pub fn format(&self) -> &ResponseFormat {
        &self.format
    }

    /// The format in words, for notes and errors.
    pub fn describe(&self) -> String {
        match &self.format {
            ResponseFormat::JsonObject => "a JSON object".to_owned(),
            ResponseFormat::JsonSchema(schema) => format!("the JSON Schema `{}`", schema.name),
        }
    }

    /// Asks `request` for the format: as a `response_format`, which the
    /// wire sends as far as the model takes it, and in words in the system
    /// message, for a model that takes none (and for JSON mode, which
    /// providers refuse unless the messages say "JSON").
    pub fn ask(&self, request: &mut ChatRequest) {
        request.response_format = Some(self.format.clone());
        let words = self.instruction();
        match request.messages.first_mut() {
            Some(first) if first.role == Role::System => {
                first.content.push_str("\n\n");
                first.content.push_str(&words);
            }
            _ => {
                request.messages.insert(
                    0,
                    Message {
                        role: Role::System,
                        content: words,
                    },
                );
                for placed in &mut request.placed {
                    placed.message += 1;
                }
            }
        }
    }

    fn instruction(&self) -> String {
        let bare = "and nothing else: no prose before or after it, no code fence.";
        match &self.format {
            ResponseFormat::JsonObject => format!("Write your answer as one JSON object, {bare}"),
            ResponseFormat::JsonSchema(schema) => format!(
                "Write your answer as one JSON value that matches the JSON Schema `{}` below, {bare}\n\n{}",
                schema.name, schema.schema
            ),
        }
    }

    /// `text` as the answer in this format (the JSON alone: a code fence
    /// around it is taken off), or what does not match.
    pub fn check(&self, text: &str) -> Result<String, Vec<Problem>> {
        let json = unfenced(text);
        let value: Value = serde_json::from_str(json).map_err(|e| {
            vec![Problem {
                at: String::new(),
                what: format!("it is not JSON ({e})"),
            }]
        })?;
        match &self.validator {
            None if !value.is_object() => {
                return Err(vec![Problem {
                    at: String::new(),
                    what: format!("a JSON object was asked for, and it is {}", kind_of(&value)),
                }]);
            }
            None => {}
            Some(validator) => {
                let problems: Vec<Problem> = validator
                    .iter_errors(&value)
                    .take(MAX_PROBLEMS)
                    .map(|e| Problem {
                        at: e.instance_path().to_string(),
                        what: e.to_string(),
                    })
                    .collect();
                if !problems.is_empty() {
                    return Err(problems);
                }
            }
        }
        Ok(json.to_owned())
    }

    /// The call that repairs `text` (which does not match, as `problems`
    /// say) made to `model`.
    fn repair_request(&self, model: &str, text: &str, problems: &[Problem]) -> ChatRequest {
        let mut request = ChatRequest::plain(
            "repair",
            model,
            vec![
                Message::system(
                    "You correct a JSON answer so that it matches its format. Keep its \
                     content; change only what the problems below require.",
                ),
                Message::user(format!(
                    "The answer:\n\n{text}\n\nWhat does not match {}:\n- {}",
                    self.describe(),
                    list(problems, "\n- ")
                )),
            ],
        );
        self.ask(&mut request);
        request
    }
}

/// `text` as canonical JSON (object keys sorted, no spaces), when it is
/// JSON (a code fence around it taken off); `None` when it is not.
pub fn canonical(text: &str) -> Option<String> {
    let mut value: Value = serde_json::from_str(unfenced(text)).ok()?;
    sort_keys(&mut value);
    serde_json::to_string(&value).ok()
}

fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// `text` trimmed, without a Markdown code fence around it.
fn unfenced(text: &str) -> &str {
    let text = text.trim();
    let Some(inner) = text.strip_prefix("```") else {
        return text;
    };
    let Some(inner) = inner.strip_suffix("```") else {
        return text;
    };
    // The fence's info string ("json") ends its first line.
    match inner.split_once('\n') {
        Some((info, body)) if !info.contains(['{', '[']) => body.trim(),
        _ => inner.trim(),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `answer`, held to `format`: as it is when it matches, repaired once by
/// the model that wrote it when it does not, else `RunError::AnswerFormat`
/// naming what does not match. An answer with no text (no model answered)
/// is left as it is: the run says why elsewhere.
pub(super) async fn held_to(
    format: &AnswerFormat,
    mut answer: Answer,
    context: &RunContext,
    run_id: &str,
) -> Result<Answer, RunError> {
    if answer.kind == AnswerKind::None {
        return Ok(answer);
    }
    let problems = match format.check(&answer.text) {
        Ok(json) => {
            answer.text = json;
            return Ok(answer);
        }
        Err(problems) => problems,
    };
    let unmatched = |problems: Vec<Problem>, repair: String| {
        RunError::AnswerFormat(Unmatched {
            format: format.describe(),
            problems,
            repair,
            run_id: run_id.to_owned(),
        })
    };
    let Some(model) = writer(&answer, context) else {
        return Err(unmatched(
            problems,
            "no model of the run wrote it, so none could repair it".to_owned(),
        ));
    };
    let request = format.repair_request(&model, &answer.text, &problems);
    let Some(repair) = context.fan_out(REPAIR_STAGE, vec![request]).await.pop() else {
        return Err(unmatched(
            problems,
            "the repair call was not made".to_owned(),
        ));
    };
    let reply = match repair.outcome {
        Ok(reply) => reply,
        Err(failure) => {
            return Err(unmatched(
                problems,
                format!("the repair asked of {model} failed: {failure}"),
            ));
        }
    };
    match format.check(&reply.content) {
        Ok(json) => {
            answer.notes.push(format!(
                "The answer did not match {} ({}); {model} repaired it.",
                format.describe(),
                list(&problems, "; ")
            ));
            answer.text = json;
            answer.sources.extend(repair.id);
            Ok(answer)
        }
        Err(still) => Err(unmatched(
            still,
            format!("{model} was asked once to repair it, and its repair does not match either"),
        )),
    }
}

/// The model that wrote `answer`: the one asked to write it (a
/// synthesizer's `complete-answer`), else the latest of the calls it
/// rests on (a vote's or a pick's answer is a panel model's).
fn writer(answer: &Answer, context: &RunContext) -> Option<String> {
    if let Some(model) = context.answer_writer() {
        return Some(model);
    }
    let records = context.records();
    answer
        .sources
        .iter()
        .filter_map(|id| records.iter().find(|r| r.id == *id))
        .max_by_key(|r| r.id)
        .map(|r| r.model.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{JsonSchema, Sampling};
    use serde_json::json;

    fn schema(schema: Value) -> AnswerFormat {
        AnswerFormat::new(ResponseFormat::JsonSchema(JsonSchema {
            name: "weather".into(),
            schema,
            strict: true,
        }))
        .unwrap()
    }

    fn weather() -> AnswerFormat {
        schema(json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "array", "items": {"type": "integer", "minimum": 0}}
            },
            "required": ["city", "days"],
            "additionalProperties": false
        }))
    }

    #[test]
    fn an_answer_that_matches_is_its_json_alone() {
        let format = weather();
        assert_eq!(
            format.check("```json\n{\"city\": \"Oslo\", \"days\": [1, 2]}\n```"),
            Ok("{\"city\": \"Oslo\", \"days\": [1, 2]}".to_owned())
        );
        assert_eq!(
            format.check("  {\"city\":\"Oslo\",\"days\":[]}\n"),
            Ok("{\"city\":\"Oslo\",\"days\":[]}".to_owned())
        );
    }

    #[test]
    fn what_does_not_match_is_named_by_its_path() {
        let format = weather();
        let problems = format
            .check(r#"{"city": "Oslo", "days": [1, -2]}"#)
            .unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].at, "/days/1");
        assert!(problems[0].what.contains("minimum"), "{problems:?}");
        let prose = format.check("It will be sunny in Oslo.").unwrap_err();
        assert!(prose[0].what.starts_with("it is not JSON"), "{prose:?}");
        let missing = format.check(r#"{"days": []}"#).unwrap_err();
        assert!(missing[0].what.contains("city"), "{missing:?}");
    }

    #[test]
    fn json_mode_takes_any_object_and_only_an_object() {
        let format = AnswerFormat::new(ResponseFormat::JsonObject).unwrap();
        assert!(format.check(r#"{"a": 1}"#).is_ok());
        let list = format.check("[1, 2]").unwrap_err();
        assert_eq!(
            list[0].what,
            "a JSON object was asked for, and it is an array"
        );
    }

    #[test]
    fn a_schema_that_cannot_be_checked_is_refused_and_nothing_is_fetched() {
        let format = |schema: Value| {
            AnswerFormat::new(ResponseFormat::JsonSchema(JsonSchema {
                name: "s".into(),
                schema,
                strict: false,
            }))
        };
        let remote = format(json!({"$ref": "http://127.0.0.1:9/schema.json"})).unwrap_err();
        assert!(remote.contains("`s`"), "{remote}");
        let local = format(json!({"$ref": "file:///etc/passwd"})).unwrap_err();
        assert!(local.contains("chorus fetches none"), "{local}");
        assert!(format(json!({"type": 12})).is_err());
        let inside = format(json!({
            "$defs": {"n": {"type": "integer"}},
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/n"}}
        }))
        .unwrap();
        assert!(inside.check(r#"{"n": "x"}"#).is_err());
    }

    #[test]
    fn equal_json_is_equal_canonical_text() {
        assert_eq!(
            canonical("{\"b\": [1, {\"d\": 1, \"c\": 2}], \"a\": null}"),
            canonical("```json\n{\"a\":null,\"b\":[1,{\"c\":2,\"d\":1}]}\n```")
        );
        assert_eq!(canonical("{\"b\":1,\"a\":2}").unwrap(), "{\"a\":2,\"b\":1}");
        assert_eq!(canonical("Sunny."), None);
    }

    #[test]
    fn asking_for_the_format_keeps_attachments_in_place() {
        let mut request = ChatRequest {
            label: "panel".into(),
            model: "m".into(),
            messages: vec![Message {
                role: Role::User,
                content: "Weather?".into(),
            }],
            sampling: Sampling::default(),
            response_format: None,
            attachments: Default::default(),
            placed: vec![crate::llm::Placed {
                message: 0,
                at: 3,
                id: 0,
            }],
            tools: None,
        };
        weather().ask(&mut request);
        assert_eq!(request.messages[0].role, Role::System);
        assert!(request.messages[0].content.contains("`weather`"));
        assert_eq!(request.placed[0].message, 1);
        assert!(matches!(
            request.response_format,
            Some(ResponseFormat::JsonSchema(_))
        ));
        // A system message already there takes the words at its end.
        let before = request.messages.len();
        weather().ask(&mut request);
        assert_eq!(request.messages.len(), before);
    }
}
