//! A `POST /v1/messages` body read as the chat completion request it
//! stands for, so it runs through the OpenAI door's one reading of a
//! request (`openai::request::chat`): `system` becomes a system message;
//! `text`, `image` and `document` blocks become text and content parts;
//! an assistant's `tool_use` blocks become its `tool_calls`, a user's
//! `tool_result` blocks `tool` messages ahead of the rest of its turn;
//! `tools` (`input_schema`) and `tool_choice` (`auto`, `any`, `tool`,
//! `none`, `disable_parallel_tool_use`) their chat forms. What has no
//! chat form is refused by name, or — an assistant's own `thinking`
//! blocks, sent back as Anthropic asks — left out.

use serde_json::{Map, Value, json};

use crate::openai::errors::ApiError;

/// Fields taken as the chat request has them.
const KEPT: [&str; 6] = [
    "model",
    "stream",
    "max_tokens",
    "temperature",
    "top_p",
    "metadata",
];

/// The chat request `body` (a Messages request) stands for.
pub fn as_chat(mut body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    let mut chat = Map::new();
    for key in KEPT {
        if let Some(value) = body.remove(key) {
            chat.insert(key.to_owned(), value);
        }
    }
    if let Some(Value::Object(metadata)) = chat.get_mut("metadata") {
        // Anthropic's `metadata.user_id` is OpenAI's `user`.
        if let Some(user) = metadata.remove("user_id") {
            chat.insert("user".to_owned(), user);
        }
        chat.remove("metadata");
    }
    if let Some(stop) = body.remove("stop_sequences") {
        chat.insert("stop".to_owned(), stop);
    }
    let mut messages = Vec::new();
    match body.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(Value::Array(blocks)) => {
            let text = texts(&blocks, "system")?;
            messages.push(json!({"role": "system", "content": text}));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "system",
                "`system` must be a string or a list of text blocks.",
            ));
        }
    }
    let Some(Value::Array(sent)) = body.remove("messages") else {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must be a non-empty list of user and assistant messages.",
        ));
    };
    for (i, message) in sent.into_iter().enumerate() {
        let param = format!("messages[{i}]");
        let role = message["role"].as_str().unwrap_or("");
        match (role, &message["content"]) {
            ("user" | "assistant" | "system", Value::String(text)) => {
                messages.push(json!({"role": role, "content": text}));
            }
            // Claude Code sends reminders as system messages between turns.
            ("system", Value::Array(blocks)) => {
                messages.push(json!({"role": "system", "content": texts(blocks, &param)?}));
            }
            ("user", Value::Array(blocks)) => user(blocks, &param, &mut messages)?,
            ("assistant", Value::Array(blocks)) => messages.push(assistant(blocks, &param)?),
            ("user" | "assistant", _) => {
                return Err(ApiError::invalid(
                    &param,
                    format!("`{param}.content` must be a string or a list of content blocks."),
                ));
            }
            (other, _) => {
                return Err(ApiError::invalid(
                    &param,
                    format!(
                        "`{param}` has role {other:?}: the Messages API takes user and assistant messages (the system prompt is `system`)."
                    ),
                ));
            }
        }
    }
    chat.insert("messages".to_owned(), Value::Array(messages));
    if let Some(tools) = body.remove("tools") {
        chat.insert("tools".to_owned(), self::tools(tools)?);
    }
    if let Some(choice) = body.remove("tool_choice") {
        let (choice, parallel) = tool_choice(&choice)?;
        chat.insert("tool_choice".to_owned(), choice);
        if let Some(parallel) = parallel {
            chat.insert("parallel_tool_calls".to_owned(), Value::Bool(parallel));
        }
    }
    // Anthropic-only fields: kept as not applied (listed in `chorus`).
    for (key, value) in body {
        chat.insert(key, value);
    }
    Ok(chat)
}

/// A user turn: its tool results first, as `tool` messages, then what
/// else it says as one user message.
fn user(blocks: &[Value], param: &str, messages: &mut Vec<Value>) -> Result<(), ApiError> {
    let mut parts = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let at = format!("{param}.content[{j}]");
        match block["type"].as_str() {
            Some("tool_result") => {
                let Some(id) = block["tool_use_id"].as_str() else {
                    return Err(ApiError::invalid(
                        &at,
                        format!("`{at}` needs the `tool_use_id` of the call it answers."),
                    ));
                };
                let mut content = match &block["content"] {
                    Value::Null => String::new(),
                    Value::String(text) => text.clone(),
                    Value::Array(inner) => texts(inner, &at)?,
                    _ => {
                        return Err(ApiError::invalid(
                            &at,
                            format!("`{at}.content` must be a string or a list of text blocks."),
                        ));
                    }
                };
                if block["is_error"] == true {
                    content = format!("[the tool failed] {content}");
                }
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            _ => parts.push(part(block, &at)?),
        }
    }
    if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

/// An assistant turn: its text, and its `tool_use` blocks as calls.
fn assistant(blocks: &[Value], param: &str) -> Result<Value, ApiError> {
    let mut text = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let at = format!("{param}.content[{j}]");
        match block["type"].as_str() {
            Some("text") => text.push(block["text"].as_str().unwrap_or("").to_owned()),
            Some("tool_use") => {
                let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str()) else {
                    return Err(ApiError::invalid(
                        &at,
                        format!("`{at}` needs the call's `id` and `name`."),
                    ));
                };
                let input = match &block["input"] {
                    Value::Null => json!({}),
                    input => input.clone(),
                };
                calls.push(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": input.to_string()}}));
            }
            // The model's own reasoning, sent back as Anthropic asks: no
            // panel model can read another's signed thinking.
            Some("thinking" | "redacted_thinking") => {}
            other => {
                return Err(ApiError::unsupported(
                    &at,
                    format!(
                        "`{at}` is a {other:?} block: an assistant turn here holds text and tool_use."
                    ),
                ));
            }
        }
    }
    let mut message = json!({"role": "assistant", "content": text.join("\n\n")});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    Ok(message)
}

/// A user content block as a chat content part.
fn part(block: &Value, at: &str) -> Result<Value, ApiError> {
    let source = &block["source"];
    let data_url = || {
        format!(
            "data:{};base64,{}",
            source["media_type"]
                .as_str()
                .unwrap_or("application/octet-stream"),
            source["data"].as_str().unwrap_or("")
        )
    };
    Ok(match (block["type"].as_str(), source["type"].as_str()) {
        (Some("text"), _) => json!({"type": "text", "text": block["text"]}),
        (Some("image"), Some("base64")) => {
            json!({"type": "image_url", "image_url": {"url": data_url()}})
        }
        (Some("image"), Some("url")) => {
            json!({"type": "image_url", "image_url": {"url": source["url"]}})
        }
        (Some("document"), Some("base64")) => json!({"type": "file", "file": {
            "file_data": data_url(),
            "filename": block["title"].as_str().unwrap_or("document.pdf"),
        }}),
        (Some("document"), Some("text")) => json!({"type": "text", "text": source["data"]}),
        (Some("document"), Some("url")) => {
            json!({"type": "file", "file": {"file_data": source["url"], "filename": block["title"].as_str().unwrap_or("document.pdf")}})
        }
        (kind, source) => {
            return Err(ApiError::unsupported(
                at,
                format!(
                    "`{at}` is a {kind:?} block{}: chorus takes text, image (base64 or url), document (base64, text or url) and tool_result blocks.",
                    source
                        .map(|s| format!(" with a {s:?} source"))
                        .unwrap_or_default()
                ),
            ));
        }
    })
}

/// The text of a list of `text` blocks.
fn texts(blocks: &[Value], param: &str) -> Result<String, ApiError> {
    let mut text = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        match (block["type"].as_str(), block["text"].as_str()) {
            (Some("text"), Some(t)) => text.push(t),
            _ => {
                return Err(ApiError::unsupported(
                    &format!("{param}[{j}]"),
                    format!("`{param}[{j}]` must be a text block."),
                ));
            }
        }
    }
    Ok(text.join("\n\n"))
}

/// Anthropic's tools as chat tools. A server tool (a `type` other than
/// `custom`) runs at Anthropic, and no panel model can run it.
fn tools(tools: Value) -> Result<Value, ApiError> {
    let Value::Array(tools) = tools else {
        return Err(ApiError::invalid("tools", "`tools` must be a list."));
    };
    let mut chat = Vec::new();
    for (i, tool) in tools.into_iter().enumerate() {
        match tool["type"].as_str() {
            None | Some("custom") => {}
            Some(kind) => {
                return Err(ApiError::unsupported(
                    &format!("tools[{i}]"),
                    format!(
                        "`tools[{i}]` is Anthropic's server tool {kind:?}: chorus's panel calls only the caller's own tools (`input_schema`)."
                    ),
                ));
            }
        }
        let mut function = json!({"name": tool["name"], "parameters": tool["input_schema"]});
        if let Some(description) = tool["description"].as_str() {
            function["description"] = json!(description);
        }
        chat.push(json!({"type": "function", "function": function}));
    }
    Ok(Value::Array(chat))
}

/// Anthropic's `tool_choice` as chat's, and `parallel_tool_calls`.
fn tool_choice(choice: &Value) -> Result<(Value, Option<bool>), ApiError> {
    let parallel = choice["disable_parallel_tool_use"].as_bool().map(|d| !d);
    let chat = match choice["type"].as_str() {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => json!({"type": "function", "function": {"name": choice["name"]}}),
        _ => {
            return Err(ApiError::invalid(
                "tool_choice",
                "`tool_choice.type` must be \"auto\", \"any\", \"tool\" or \"none\".",
            ));
        }
    };
    Ok((chat, parallel))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(body: Value) -> Result<Value, ApiError> {
        let Value::Object(body) = body else { panic!() };
        as_chat(body).map(Value::Object)
    }

    #[test]
    fn a_claude_code_turn_reads_as_chat() {
        let read = chat(json!({
            "model": "ask",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Read", "description": "Reads a file.",
                "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
            "metadata": {"user_id": "u-1"},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "What is in a.txt?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "…", "signature": "s"},
                    {"type": "text", "text": "Reading it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.txt"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "hello"}]}
                ]}
            ]
        }))
        .unwrap();
        let messages = read["messages"].as_array().unwrap();
        assert_eq!(
            messages[0],
            json!({"role": "system", "content": "You are Claude Code."})
        );
        assert_eq!(messages[2]["content"], "Reading it.");
        assert_eq!(
            messages[2]["tool_calls"][0]["function"],
            json!({"name": "Read", "arguments": "{\"file_path\":\"a.txt\"}"})
        );
        assert_eq!(
            messages[3],
            json!({"role": "tool", "tool_call_id": "toolu_1", "content": "hello"})
        );
        assert_eq!(
            messages.len(),
            4,
            "a turn of tool results alone adds no user message"
        );
        assert_eq!(read["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(read["tool_choice"], "auto");
        assert_eq!(read["parallel_tool_calls"], false);
        assert_eq!(read["user"], "u-1");
        assert_eq!(read["max_tokens"], 1024);
    }

    #[test]
    fn images_and_documents_are_content_parts() {
        let read = chat(json!({"model": "ask", "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}, "title": "a.pdf"},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain words"}},
            {"type": "text", "text": "Compare them."}
        ]}]}))
        .unwrap();
        let parts = read["messages"][0]["content"].as_array().unwrap();
        assert_eq!(
            parts[0]["image_url"]["url"],
            "data:image/png;base64,iVBORw0KGgo="
        );
        assert_eq!(parts[1]["file"]["filename"], "a.pdf");
        assert_eq!(parts[2], json!({"type": "text", "text": "plain words"}));
    }

    #[test]
    fn what_has_no_chat_form_is_refused_by_name() {
        let refused = |body: Value| chat(body).unwrap_err();
        let server_tool = refused(json!({"model": "ask", "messages": [],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]}));
        assert_eq!(server_tool.param.as_deref(), Some("tools[0]"));
        let odd = refused(
            json!({"model": "ask", "messages": [{"role": "user", "content": [
            {"type": "search_result", "source": "x"}]}]}),
        );
        assert_eq!(odd.param.as_deref(), Some("messages[0].content[0]"));
        let role = refused(json!({"model": "ask", "messages": [{"role": "tool", "content": "x"}]}));
        assert!(role.message.contains("\"tool\""), "{}", role.message);
    }
}
