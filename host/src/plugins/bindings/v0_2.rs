//! `chorus:strategy@0.2.0`: its generated bindings and what it adapts
//! unlike later versions (`adapt.rs` has the rest). Completions carry call
//! ids and answers cite them; settings are validated at load.

generated!("../wit/0.2.0");

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use super::{GuestAnswer, Sources};
use crate::llm;
use crate::plugins::sandbox::{State, Stopped};
use crate::plugins::types::{self as own, Kind};

pub const VERSION: &str = "0.2.0";

/// Before 0.3 a request could not ask for a response format.
fn response_format(_: &wit::ChatRequest) -> Result<Option<llm::ResponseFormat>, String> {
    Ok(None)
}

/// A 0.2 reply has no `format-sent`.
fn reply_of(reply: &llm::Reply) -> wit::Reply {
    wit::Reply {
        content: String::clone(&reply.content),
        served_by: reply.served_by.clone(),
        finish_reason: reply.finish_reason.clone(),
        usage: reply.usage.map(usage_of),
    }
}

/// A request of this version's shape: no attachments before 0.4.
fn request_of(r: &own::Request) -> wit::Request {
    wit::Request {
        run_id: r.run_id.clone(),
        pipeline: r.pipeline.clone(),
        prompt: r.prompt.clone(),
        options: r.options.to_string(),
    }
}

/// Text is the only part before 0.4.
fn part_of(part: wit::ContentPart) -> super::Part {
    match part {
        wit::ContentPart::Text(text) => super::Part::Text(text),
    }
}

/// Not in contracts before 0.4: what a provider answers such a request
/// with (404, "no endpoints support image input"); the message says which.
const UNSUPPORTED_INPUT: wit::FailureKind = wit::FailureKind::HttpStatus;

adapters!(m => {});
