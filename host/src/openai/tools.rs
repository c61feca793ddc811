//! Tool calling at the OpenAI endpoint: a chat request's `tools`,
//! `tool_choice` and `parallel_tool_calls` read into the run's `ToolUse`
//! (each tool's parameter schema compiled, so a schema chorus cannot
//! check is the caller's 400 before any model is asked), and the tool
//! messages of its history (`request` hands them here) read as the
//! exchange since the question.

use serde_json::{Map, Value};

use super::errors::ApiError;
use crate::llm::tools::{Exchanged, Tool, ToolCall, ToolChoice, ToolUse};
use crate::pipeline::structured::MAX_SCHEMA_BYTES;

/// OpenAI's own bound on the tools of one request.
pub const MAX_TOOLS: usize = 128;

/// The tools offered, how they may be used, and `parallel_tool_calls` (the
/// exchange is the history's, read with the messages); `None` when no
/// tool is offered (and `tool_choice` asks for none).
pub fn read(body: &Map<String, Value>) -> Result<Option<ToolUse>, ApiError> {
    if present(body.get("functions")) || present(body.get("function_call")) {
        let key = if present(body.get("functions")) {
            "functions"
        } else {
            "function_call"
        };
        return Err(ApiError::unsupported(
            key,
            format!(
                "`{key}` is OpenAI's old form of tools: send `tools` (and `tool_choice`) instead."
            ),
        ));
    }
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => {
            if tools.len() > MAX_TOOLS {
                return Err(ApiError::invalid(
                    "tools",
                    format!(
                        "`tools` holds {} tools; at most {MAX_TOOLS} are taken.",
                        tools.len()
                    ),
                ));
            }
            tools
                .iter()
                .enumerate()
                .map(|(i, tool)| tool_of(tool, &format!("tools[{i}]")))
                .collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "tools",
                "`tools` must be a list of functions.",
            ));
        }
    };
    let choice = match body.get("tool_choice") {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(Value::String(choice)) => match choice.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid(
                    "tool_choice",
                    format!(
                        "`tool_choice` {other:?} is not one of \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": …}}}}."
                    ),
                ));
            }
        },
        Some(Value::Object(choice)) => {
            let name = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| choice.get("name"))
                .and_then(Value::as_str);
            match name {
                Some(name) => ToolChoice::Function(name.to_owned()),
                None => {
                    return Err(ApiError::invalid(
                        "tool_choice",
                        "`tool_choice` names a function as {\"type\": \"function\", \"function\": {\"name\": …}}.",
                    ));
                }
            }
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "tool_choice",
                "`tool_choice` must be a string or an object.",
            ));
        }
    };
    let parallel = match body.get("parallel_tool_calls") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(parallel)) => Some(*parallel),
        Some(_) => {
            return Err(ApiError::invalid(
                "parallel_tool_calls",
                "`parallel_tool_calls` must be true or false.",
            ));
        }
    };
    if tools.is_empty() {
        return match choice {
            ToolChoice::Auto | ToolChoice::None => Ok(None),
            _ => Err(ApiError::invalid(
                "tool_choice",
                "`tool_choice` asks for a tool call, and `tools` offers none.",
            )),
        };
    }
    if let ToolChoice::Function(name) = &choice
        && !tools.iter().any(|t| &t.name == name)
    {
        return Err(ApiError::invalid(
            "tool_choice",
            format!("`tool_choice` names `{name}`, which `tools` does not offer."),
        ));
    }
    Ok(Some(ToolUse {
        tools,
        choice,
        parallel,
        exchange: Vec::new(),
    }))
}

/// One `tools` entry (`{"type": "function", "function": {…}}`, or the
/// Responses API's flat form).
fn tool_of(value: &Value, param: &str) -> Result<Tool, ApiError> {
    let kind = value.get("type").and_then(Value::as_str);
    if kind != Some("function") {
        return Err(ApiError::unsupported(
            param,
            format!(
                "`{param}` is a {} tool: chorus offers its models functions only (`\"type\": \"function\"`).",
                kind.map_or_else(|| "typeless".to_owned(), |k| format!("{k:?}"))
            ),
        ));
    }
    let function = value.get("function").unwrap_or(value);
    let name = function.get("name").and_then(Value::as_str).unwrap_or("");
    if !crate::llm::tools::is_function_name(name) {
        return Err(ApiError::invalid(
            param,
            format!("`{param}` needs a function name of 1 to 64 letters, digits, `_` or `-`."),
        ));
    }
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
        Some(parameters @ Value::Object(_)) => parameters.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                param,
                format!("`{param}`'s parameters must be a JSON Schema object."),
            ));
        }
    };
    let size = parameters.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(ApiError::invalid(
            param,
            format!(
                "`{param}`'s parameters are {size} bytes written as JSON, over chorus's limit of {MAX_SCHEMA_BYTES}."
            ),
        ));
    }
    if let Err(e) = jsonschema::validator_for(&parameters) {
        return Err(ApiError::invalid(
            param,
            format!(
                "`{param}`'s parameters (`{name}`) are not a JSON Schema chorus can check: {e} (a `$ref` must point inside the schema: chorus fetches none)."
            ),
        ));
    }
    Ok(Tool {
        name: name.to_owned(),
        description: function
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        parameters,
        strict: function.get("strict").and_then(Value::as_bool) == Some(true),
    })
}

/// The calls of an assistant message's `tool_calls`.
pub fn calls_of(value: &Value, param: &str) -> Result<Vec<ToolCall>, ApiError> {
    let Value::Array(calls) = value else {
        return Err(ApiError::invalid(
            param,
            format!("`{param}.tool_calls` must be a list."),
        ));
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let function = call.get("function").unwrap_or(call);
            let id = call
                .get("id")
                .or_else(|| call.get("call_id"))
                .and_then(Value::as_str);
            let name = function.get("name").and_then(Value::as_str);
            let arguments = match function.get("arguments") {
                Some(Value::String(text)) => text.clone(),
                None | Some(Value::Null) => "{}".to_owned(),
                Some(other) => other.to_string(),
            };
            match (id, name) {
                (Some(id), Some(name)) => Ok(ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments,
                }),
                _ => Err(ApiError::invalid(
                    &format!("{param}.tool_calls[{i}]"),
                    format!("`{param}.tool_calls[{i}]` needs an `id` and a function `name`."),
                )),
            }
        })
        .collect()
}

/// The exchange in words, for a turn before the question (where it is
/// history, said as text).
pub fn said(exchange: &[Exchanged]) -> String {
    exchange
        .iter()
        .map(|step| match step {
            Exchanged::Called { text, calls } => {
                let calls: Vec<String> = calls
                    .iter()
                    .map(|c| format!("`{}` with {} (call {})", c.name, c.arguments, c.id))
                    .collect();
                format!("{text}\n[The assistant called {}.]", calls.join(", "))
                    .trim_start()
                    .to_owned()
            }
            Exchanged::Returned { call_id, content } => {
                format!("[The result of call {call_id}:]\n{content}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn present(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => !items.is_empty(),
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: Value) -> Map<String, Value> {
        let Value::Object(map) = value else { panic!() };
        map
    }

    fn weather() -> Value {
        json!({"type": "function", "function": {
            "name": "get_weather", "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }})
    }

    #[test]
    fn tools_and_a_choice_are_read() {
        let offered = read(&body(json!({
            "tools": [weather()],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": false
        })))
        .unwrap()
        .unwrap();
        assert_eq!(offered.tools[0].name, "get_weather");
        assert_eq!(offered.choice, ToolChoice::Function("get_weather".into()));
        assert_eq!(offered.parallel, Some(false));
        assert!(
            read(&body(json!({"tools": [], "tool_choice": "none"})))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn what_cannot_be_offered_is_refused_by_name() {
        let refused = |value: Value| read(&body(value)).map(|_| ()).unwrap_err();
        let named = refused(
            json!({"tools": [weather()], "tool_choice": {"type": "function", "function": {"name": "other"}}}),
        );
        assert!(named.message.contains("`other`"), "{}", named.message);
        let hosted = refused(json!({"tools": [{"type": "web_search"}]}));
        assert_eq!(hosted.param.as_deref(), Some("tools[0]"));
        let bad = refused(
            json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 5}}}]}),
        );
        assert!(bad.message.contains("not a JSON Schema"), "{}", bad.message);
        let nothing = refused(json!({"tool_choice": "required"}));
        assert_eq!(nothing.param.as_deref(), Some("tool_choice"));
        assert_eq!(
            refused(json!({"functions": [{"name": "f"}]}))
                .param
                .as_deref(),
            Some("functions")
        );
        let many: Vec<Value> = (0..=MAX_TOOLS).map(|_| weather()).collect();
        assert!(
            refused(json!({"tools": many}))
                .message
                .contains("at most 128")
        );
    }
}
