//! Structured outputs at the OpenAI endpoint: a chat request's
//! `response_format` (and the Responses API's `text.format`, which
//! `responses` hands over in the same field) read into the run's answer
//! format (`pipeline::structured`). A format chorus cannot keep is
//! refused by name — never listed as not applied, since the caller's
//! parser relies on it.

use serde_json::{Map, Value};

use super::errors::ApiError;
use crate::llm::{JsonSchema, ResponseFormat};
use crate::pipeline::structured::AnswerFormat;

const PARAM: &str = "response_format";

/// The answer format `value` (a `response_format`) asks for: `None` for
/// `{"type": "text"}`, else JSON mode or a JSON Schema, compiled.
pub fn read(value: &Value) -> Result<Option<AnswerFormat>, ApiError> {
    let Value::Object(format) = value else {
        return Err(ApiError::invalid(
            PARAM,
            "`response_format` must be an object: {\"type\": \"json_schema\", \"json_schema\": {\"name\": …, \"schema\": {…}}}, {\"type\": \"json_object\"} or {\"type\": \"text\"}.",
        ));
    };
    let format = match format.get("type").and_then(Value::as_str) {
        Some("text") => return Ok(None),
        Some("json_object") => ResponseFormat::JsonObject,
        Some("json_schema") => ResponseFormat::JsonSchema(schema(format)?),
        other => {
            return Err(ApiError::unsupported(
                PARAM,
                format!(
                    "`response_format.type` {} is not one chorus keeps: use \"json_schema\", \"json_object\" or \"text\".",
                    other.map_or_else(|| "is missing, and".to_owned(), |t| format!("{t:?}"))
                ),
            ));
        }
    };
    AnswerFormat::new(format).map(Some).map_err(|e| {
        ApiError::invalid(
            "response_format.json_schema.schema",
            format!("chorus: {e}."),
        )
    })
}

/// The `json_schema` of a chat `response_format`.
fn schema(format: &Map<String, Value>) -> Result<JsonSchema, ApiError> {
    let param = "response_format.json_schema";
    let Some(Value::Object(named)) = format.get("json_schema") else {
        return Err(ApiError::invalid(
            param,
            "`response_format.json_schema` must be an object with the schema's `name` and its `schema`.",
        ));
    };
    let name = match named.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => {
            return Err(ApiError::invalid(
                &format!("{param}.name"),
                "`response_format.json_schema.name` must name the schema (letters, digits, `_` or `-`).",
            ));
        }
    };
    let strict = match named.get("strict") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(strict)) => *strict,
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("{param}.strict"),
                "`response_format.json_schema.strict` must be true or false.",
            ));
        }
    };
    let schema = named.get("schema").cloned().unwrap_or_else(|| {
        // OpenAI takes a format with no schema as "any JSON"; so does chorus.
        Value::Object(Map::new())
    });
    JsonSchema::of_value(name, schema, strict)
        .map_err(|e| ApiError::invalid(param, format!("chorus: {e}.")))
}

/// A Responses API `text.format` (flat: `name`, `schema` and `strict` beside
/// `type`) as the chat `response_format` it stands for.
pub fn from_responses(format: Value) -> Value {
    let Value::Object(mut format) = format else {
        return format;
    };
    if format.get("type").and_then(Value::as_str) != Some("json_schema")
        || format.contains_key("json_schema")
    {
        return Value::Object(format);
    }
    let mut named = Map::new();
    for key in ["name", "schema", "strict", "description"] {
        if let Some(value) = format.remove(key) {
            named.insert(key.to_owned(), value);
        }
    }
    format.insert("json_schema".to_owned(), Value::Object(named));
    Value::Object(format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_of_format_is_read() {
        assert!(read(&json!({"type": "text"})).unwrap().is_none());
        let object = read(&json!({"type": "json_object"})).unwrap().unwrap();
        assert_eq!(object.format(), &ResponseFormat::JsonObject);
        let schema = read(&json!({"type": "json_schema", "json_schema": {
            "name": "answer", "strict": true,
            "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}
        }}))
        .unwrap()
        .unwrap();
        assert!(schema.check(r#"{"n": 1}"#).is_ok());
        assert!(schema.check(r#"{"n": "one"}"#).is_err());
    }

    #[test]
    fn a_format_chorus_cannot_keep_is_refused_by_name() {
        let refused = |value: Value| read(&value).map(|_| ()).unwrap_err();
        let unknown = refused(json!({"type": "grammar"}));
        assert_eq!(unknown.param.as_deref(), Some("response_format"));
        assert_eq!(unknown.code, Some("unsupported_parameter"));
        let bad = refused(json!({"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "nonsense"}
        }}));
        assert_eq!(
            bad.param.as_deref(),
            Some("response_format.json_schema.schema")
        );
        assert!(bad.message.contains("`x`"), "{}", bad.message);
        let nameless = refused(json!({"type": "json_schema", "json_schema": {"schema": {}}}));
        assert_eq!(
            nameless.param.as_deref(),
            Some("response_format.json_schema.name")
        );
        assert!(refused(json!("json")).message.contains("must be an object"));
    }

    #[test]
    fn a_responses_text_format_is_a_chat_response_format() {
        let flat = json!({"type": "json_schema", "name": "n", "strict": true, "schema": {"type": "object"}});
        assert_eq!(
            from_responses(flat),
            json!({"type": "json_schema", "json_schema": {"name": "n", "strict": true, "schema": {"type": "object"}}})
        );
        assert_eq!(
            from_responses(json!({"type": "json_object"})),
            json!({"type": "json_object"})
        );
    }
}
