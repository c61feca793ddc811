//! Tool calling on the chat-completions wire: the functions a caller
//! offers a run (`Tool`), how a model may use them (`ToolChoice`), a
//! call a model proposes (`ToolCall`), and the exchange since the
//! question — the calls the caller ran and their results — that every
//! model asked the question sees next (`Exchanged`). The request side
//! writes them as OpenAI's `tools`, `tool_choice`, assistant
//! `tool_calls` and `tool` messages for a model that takes tools, and as
//! plain text for one that does not; the reply side reads a model's
//! calls, whole or from a stream's deltas.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The most tool calls one reply may carry; more are dropped and the
/// reply is malformed beyond them.
pub const MAX_TOOL_CALLS: usize = 64;

/// A function a model may call (OpenAI's `tools[].function`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments' JSON Schema (an object).
    pub parameters: Value,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

/// What providers take as a function's (or a schema's) name: 1 to 64
/// letters, digits, `_` or `-`.
pub fn is_function_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Tool {
    /// A tool a strategy offers its own call: a name providers take and
    /// parameters that are a JSON object, or why not.
    pub fn offered(
        name: String,
        description: Option<String>,
        parameters: &str,
    ) -> Result<Self, String> {
        if !is_function_name(&name) {
            return Err(format!(
                "the tool name {name:?} must be 1 to 64 letters, digits, `_` or `-`"
            ));
        }
        let parameters: Value = serde_json::from_str(parameters)
            .map_err(|e| format!("the parameters of tool `{name}` are not JSON: {e}"))?;
        if !parameters.is_object() {
            return Err(format!(
                "the parameters of tool `{name}` must be a JSON Schema object, not {parameters}"
            ));
        }
        Ok(Self {
            name,
            description,
            parameters,
            strict: false,
        })
    }
}

/// Whether, and which, a model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Function(String),
}

impl ToolChoice {
    fn wire(&self) -> Value {
        match self {
            Self::Auto => json!("auto"),
            Self::None => json!("none"),
            Self::Required => json!("required"),
            Self::Function(name) => json!({"type": "function", "function": {"name": name}}),
        }
    }
}

/// A call a model proposed: which function, with what arguments (JSON
/// text, as the model wrote it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    /// The call as OpenAI writes it in `tool_calls`.
    pub fn wire(&self) -> Value {
        json!({
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        })
    }
}

/// One step of the exchange since the question.
#[derive(Debug, Clone, PartialEq)]
pub enum Exchanged {
    /// The calls the caller's model made (with any text it wrote).
    Called { text: String, calls: Vec<ToolCall> },
    /// What one of them returned.
    Returned { call_id: String, content: String },
}

/// The tools a caller offered a run, and the exchange so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    pub tools: Vec<Tool>,
    pub choice: ToolChoice,
    /// `parallel_tool_calls`, when the caller set it.
    pub parallel: Option<bool>,
    pub exchange: Vec<Exchanged>,
}

impl ToolUse {
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Rough prompt tokens of the tools and the exchange, as sent.
    pub fn estimate_tokens(&self) -> u64 {
        let tools: u64 = self
            .tools
            .iter()
            .map(|t| {
                super::estimate_tokens(&t.parameters.to_string())
                    + super::estimate_tokens(t.description.as_deref().unwrap_or(""))
                    + 8
            })
            .sum();
        let exchange: u64 = self
            .exchange
            .iter()
            .map(|step| match step {
                Exchanged::Called { text, calls } => {
                    super::estimate_tokens(text)
                        + calls
                            .iter()
                            .map(|c| super::estimate_tokens(&c.arguments) + 8)
                            .sum::<u64>()
                }
                Exchanged::Returned { content, .. } => super::estimate_tokens(content) + 4,
            })
            .sum();
        tools.saturating_add(exchange)
    }

    /// The fields a request to a model that takes tools carries.
    pub fn wire_fields(&self) -> [(&'static str, Option<Value>); 3] {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|tool| json!({"type": "function", "function": tool}))
            .collect();
        if tools.is_empty() {
            // The exchange alone: a history with tools no longer offered.
            return [
                ("tools", None),
                ("tool_choice", None),
                ("parallel_tool_calls", None),
            ];
        }
        [
            ("tools", Some(Value::Array(tools))),
            ("tool_choice", Some(self.choice.wire())),
            ("parallel_tool_calls", self.parallel.map(Value::Bool)),
        ]
    }

    /// The exchange as messages: OpenAI's assistant `tool_calls` and `tool`
    /// messages when the model takes tools, else the same said in text.
    pub fn wire_messages(&self, native: bool) -> Vec<Value> {
        self.exchange
            .iter()
            .map(|step| match (step, native) {
                (Exchanged::Called { text, calls }, true) => json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { json!(text) },
                    "tool_calls": calls.iter().map(ToolCall::wire).collect::<Vec<_>>(),
                }),
                (Exchanged::Returned { call_id, content }, true) => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": content})
                }
                (Exchanged::Called { text, calls }, false) => {
                    let calls: Vec<String> = calls
                        .iter()
                        .map(|c| format!("`{}` with {} (call {})", c.name, c.arguments, c.id))
                        .collect();
                    let said = format!("{text}\n\n[I called {}.]", calls.join(", "));
                    json!({"role": "assistant", "content": said.trim_start()})
                }
                (Exchanged::Returned { call_id, content }, false) => json!({
                    "role": "user",
                    "content": format!("[The result of call {call_id}:]\n{content}"),
                }),
            })
            .collect()
    }
}

/// One `tool_calls` entry as a provider sends it, whole or as a delta.
#[derive(Debug, Default, Deserialize)]
pub struct WireToolCall {
    #[serde(default)]
    pub index: Option<usize>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
pub struct WireFunction {
    #[serde(default)]
    pub name: Option<String>,
    /// A string on the wire; some servers send the object itself.
    #[serde(default)]
    pub arguments: Option<Value>,
}

impl WireFunction {
    fn arguments(&self) -> String {
        match &self.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        }
    }
}

/// A reply's `tool_calls`, lenient: whatever is not a list of calls is
/// none.
#[derive(Debug, Default)]
pub struct WireToolCalls(pub Vec<WireToolCall>);

impl<'de> Deserialize<'de> for WireToolCalls {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let Value::Array(items) = value else {
            return Ok(Self::default());
        };
        Ok(Self(
            items
                .into_iter()
                .take(MAX_TOOL_CALLS)
                .filter_map(|item| serde_json::from_value(item).ok())
                .collect(),
        ))
    }
}

/// Tool calls assembled from a stream's deltas (or one whole message):
/// each delta names its call by `index`, the first carries its id and
/// name, the rest add to its arguments.
#[derive(Debug, Default)]
pub struct CallsAssembler {
    calls: Vec<ToolCall>,
}

impl CallsAssembler {
    pub fn add(&mut self, deltas: WireToolCalls) {
        for (position, delta) in deltas.0.into_iter().enumerate() {
            let index = delta.index.unwrap_or(position);
            if index >= MAX_TOOL_CALLS {
                continue;
            }
            while self.calls.len() <= index {
                self.calls.push(ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
            }
            let call = &mut self.calls[index];
            if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
                call.id = id;
            }
            if let Some(function) = delta.function {
                if let Some(name) = function.name.as_ref().filter(|n| !n.is_empty()) {
                    call.name.clone_from(name);
                }
                call.arguments.push_str(&function.arguments());
            }
        }
    }

    /// The calls, each with a name (one with none is dropped) and an id
    /// (one is made up where the provider gave none).
    pub fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .filter(|c| !c.name.is_empty())
            .enumerate()
            .map(|(i, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{i}");
                }
                call
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deltas(value: Value) -> WireToolCalls {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn calls_are_assembled_from_deltas_by_index() {
        let mut calls = CallsAssembler::default();
        calls.add(deltas(json!([
            {"index": 0, "id": "call_a", "function": {"name": "weather", "arguments": "{\"ci"}},
        ])));
        calls.add(deltas(json!([
            {"index": 0, "function": {"arguments": "ty\": \"Oslo\"}"}},
            {"index": 1, "id": "call_b", "function": {"name": "time", "arguments": {"zone": "CET"}}},
        ])));
        assert_eq!(
            calls.finish(),
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "weather".into(),
                    arguments: r#"{"city": "Oslo"}"#.into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "time".into(),
                    arguments: r#"{"zone":"CET"}"#.into()
                },
            ]
        );
    }

    #[test]
    fn garbage_is_no_call_and_a_nameless_call_is_dropped() {
        let mut calls = CallsAssembler::default();
        calls.add(deltas(json!("not a list")));
        calls.add(deltas(
            json!([7, {"index": 0, "function": {"arguments": "{}"}}]),
        ));
        calls.add(deltas(
            json!([{"index": 100000, "function": {"name": "far"}}]),
        ));
        assert!(calls.finish().is_empty());
    }

    #[test]
    fn the_exchange_is_sent_natively_or_in_words() {
        let use_ = ToolUse {
            tools: vec![],
            choice: ToolChoice::Auto,
            parallel: None,
            exchange: vec![
                Exchanged::Called {
                    text: String::new(),
                    calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "weather".into(),
                        arguments: "{}".into(),
                    }],
                },
                Exchanged::Returned {
                    call_id: "c1".into(),
                    content: "sunny".into(),
                },
            ],
        };
        let native = use_.wire_messages(true);
        assert_eq!(native[0]["tool_calls"][0]["function"]["name"], "weather");
        assert_eq!(
            native[1],
            json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
        );
        let words = use_.wire_messages(false);
        assert_eq!(words[0]["role"], "assistant");
        assert!(words[0]["content"].as_str().unwrap().contains("`weather`"));
        assert_eq!(words[1]["role"], "user");
        assert!(words[1]["content"].as_str().unwrap().ends_with("sunny"));
    }
}
