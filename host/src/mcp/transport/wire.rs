//! One line from the client, judged before rmcp sees it: a message rmcp can
//! take, or an error to answer at once (JSON-RPC's codes, carrying the
//! request's id wherever it can be read), or nothing at all (a blank line, a
//! malformed notification — notifications get no reply).

use rmcp::model::{
    CallToolRequest, CancelTaskRequest, ClientJsonRpcMessage, ClientRequest, CompleteRequest,
    ConstString, DiscoverRequest, ErrorCode, GetPromptRequest, GetTaskRequest, InitializeRequest,
    ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest,
    PingRequest, ReadResourceRequest, UpdateTaskRequest,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

pub enum Parsed {
    /// A message for the server.
    Message(Box<ClientJsonRpcMessage>),
    /// A complete JSON-RPC error response to write back instead.
    Refuse(Value),
    /// Nothing to answer; the reason, for the log.
    Skip(String),
}

/// Judges one line (without its newline).
pub fn parse(line: &[u8]) -> Parsed {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Parsed::Skip("a blank line".into());
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Parsed::Refuse(error(
                None,
                ErrorCode::PARSE_ERROR,
                format!("not JSON ({e}): send one JSON-RPC message per line"),
            ));
        }
    };
    let Value::Object(object) = value else {
        let what = if value.is_array() {
            "a batch (an array); batches are not supported: send one message per line"
        } else {
            "not a JSON-RPC message: expected an object"
        };
        return Parsed::Refuse(error(None, ErrorCode::INVALID_REQUEST, what.into()));
    };
    judge(object, line)
}

/// `object` is `line` parsed.
fn judge(object: Map<String, Value>, line: &[u8]) -> Parsed {
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let is_request = object.contains_key("id") && object.contains_key("method");
    let is_response = object.contains_key("result") || object.contains_key("error");
    let invalid = |message: String| {
        if is_request || id.is_some() && !is_response {
            Parsed::Refuse(error(id.clone(), ErrorCode::INVALID_REQUEST, message))
        } else {
            Parsed::Skip(message)
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("`jsonrpc` must be \"2.0\"".into());
    }
    let method = match object.get("method") {
        None => None,
        Some(Value::String(method)) => Some(method.clone()),
        Some(_) => return invalid("`method` must be a string".into()),
    };
    if is_request && object["id"].as_i64().is_none() && !object["id"].is_string() {
        let integral = object["id"]
            .as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9e15);
        if !integral {
            return invalid("`id` must be a string or an integer".into());
        }
    }
    // Read again only to explain a refusal, so the message's params are
    // not copied for the messages that parse (nearly all of them).
    let params = || {
        serde_json::from_slice::<Map<String, Value>>(line)
            .ok()
            .and_then(|mut object| object.remove("params"))
    };
    let message = serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(object));
    match (message, method) {
        // An unknown method is rmcp's to answer (-32601); a known one that
        // only parsed as "custom" had params it could not read.
        (Ok(ClientJsonRpcMessage::Request(request)), Some(method))
            if matches!(request.request, ClientRequest::CustomRequest(_)) =>
        {
            match params_error(&method, params()) {
                Some(message) => Parsed::Refuse(error(id, ErrorCode::INVALID_PARAMS, message)),
                None => Parsed::Message(Box::new(ClientJsonRpcMessage::Request(request))),
            }
        }
        (Ok(message), _) => Parsed::Message(Box::new(message)),
        (Err(e), Some(method)) if is_request => match params_error(&method, params()) {
            Some(message) => Parsed::Refuse(error(id, ErrorCode::INVALID_PARAMS, message)),
            None => invalid(format!("not a valid request: {e}")),
        },
        (Err(e), Some(method)) => Parsed::Skip(format!("a malformed `{method}` notification: {e}")),
        (Err(e), None) => invalid(format!("not a valid JSON-RPC message: {e}")),
    }
}

/// What is wrong with `params` for `method`, when `method` is one chorus
/// serves and its params do not fit; `None` for methods it does not know.
fn params_error(method: &str, params: Option<Value>) -> Option<String> {
    fn check<T: DeserializeOwned>(method: &str, params: Option<Value>) -> Option<String> {
        let mut request = Map::new();
        request.insert("method".into(), method.into());
        if let Some(params) = params {
            request.insert("params".into(), params);
        }
        let error = serde_json::from_value::<T>(Value::Object(request)).err()?;
        Some(format!("invalid params for `{method}`: {error}"))
    }
    type Check = fn(&str, Option<Value>) -> Option<String>;
    let known: [(&str, Check); 14] = [
        (rmcp::model::PingRequestMethod::VALUE, check::<PingRequest>),
        (
            rmcp::model::InitializeResultMethod::VALUE,
            check::<InitializeRequest>,
        ),
        (
            rmcp::model::DiscoverRequestMethod::VALUE,
            check::<DiscoverRequest>,
        ),
        (
            rmcp::model::CompleteRequestMethod::VALUE,
            check::<CompleteRequest>,
        ),
        (
            rmcp::model::GetPromptRequestMethod::VALUE,
            check::<GetPromptRequest>,
        ),
        (
            rmcp::model::ListPromptsRequestMethod::VALUE,
            check::<ListPromptsRequest>,
        ),
        (
            rmcp::model::ListResourcesRequestMethod::VALUE,
            check::<ListResourcesRequest>,
        ),
        (
            rmcp::model::ListResourceTemplatesRequestMethod::VALUE,
            check::<ListResourceTemplatesRequest>,
        ),
        (
            rmcp::model::ReadResourceRequestMethod::VALUE,
            check::<ReadResourceRequest>,
        ),
        (
            rmcp::model::CallToolRequestMethod::VALUE,
            check::<CallToolRequest>,
        ),
        (
            rmcp::model::ListToolsRequestMethod::VALUE,
            check::<ListToolsRequest>,
        ),
        (rmcp::model::GetTaskMethod::VALUE, check::<GetTaskRequest>),
        (
            rmcp::model::UpdateTaskMethod::VALUE,
            check::<UpdateTaskRequest>,
        ),
        (
            rmcp::model::CancelTaskMethod::VALUE,
            check::<CancelTaskRequest>,
        ),
    ];
    known
        .into_iter()
        .find(|(name, _)| *name == method)
        .and_then(|(_, check)| check(method, params))
}

/// A JSON-RPC error response. Without a readable id the `id` is left out,
/// as MCP asks.
pub fn error(id: Option<Value>, code: ErrorCode, message: String) -> Value {
    let mut response = json!({
        "jsonrpc": "2.0",
        "error": {"code": code.0, "message": message},
    });
    if let Some(id) = id {
        response["id"] = id;
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> Value {
        match parse(line.as_bytes()) {
            Parsed::Refuse(error) => error,
            Parsed::Message(m) => panic!("accepted {line}: {m:?}"),
            Parsed::Skip(why) => panic!("skipped {line}: {why}"),
        }
    }

    #[test]
    fn garbage_gets_a_parse_error_without_an_id() {
        let error = refused("this is not json");
        assert_eq!(error["error"]["code"], -32700);
        assert!(error.get("id").is_none());
        assert_eq!(refused("[1, 2]")["error"]["code"], -32600);
    }

    #[test]
    fn a_malformed_request_is_answered_with_its_id() {
        let error = refused(r#"{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}"#);
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (json!(7), json!(-32600))
        );
        let error = refused(r#"{"jsonrpc": "2.0", "id": "x", "method": 5}"#);
        assert_eq!(error["id"], "x");
        let error = refused(r#"{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}"#);
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (json!(1.5), json!(-32600))
        );
    }

    #[test]
    fn invalid_params_of_a_known_method_are_32602_with_the_reason() {
        let error = refused(
            r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": {}}}"#,
        );
        assert_eq!(error["id"], 3);
        assert_eq!(error["error"]["code"], -32602);
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("tools/call") && message.contains("name"),
            "{message}"
        );
        let error = refused(r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": 5}"#);
        assert_eq!(error["error"]["code"], -32602);
    }

    #[test]
    fn good_messages_and_unknown_methods_pass_through() {
        for line in [
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#,
            r#"{"jsonrpc": "2.0", "id": 2, "method": "no/such/method"}"#,
            r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#,
            r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask", "arguments": {"prompt": "q"}}}"#,
        ] {
            assert!(
                matches!(parse(line.as_bytes()), Parsed::Message(_)),
                "{line}"
            );
        }
        assert!(matches!(parse(b"  \r"), Parsed::Skip(_)));
        assert!(matches!(
            parse(br#"{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 7}"#),
            Parsed::Message(_) | Parsed::Skip(_)
        ));
    }
}
