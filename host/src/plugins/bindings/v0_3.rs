//! `chorus:strategy@0.3.0`, the current contract: its generated bindings
//! and what it adapts unlike other versions (`adapt.rs` has the rest): a
//! response format on chat requests, and what was sent of it on replies.

mod generated {
    pub mod selector {
        wasmtime::component::bindgen!({
            world: "selector-plugin",
            path: "../wit/0.3.0",
            imports: { default: async | trappable },
            exports: { default: async },
        });
    }

    pub mod prompter {
        wasmtime::component::bindgen!({
            world: "prompter-plugin",
            path: "../wit/0.3.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "chorus:strategy/types": super::selector::chorus::strategy::types,
                "chorus:strategy/host": super::selector::chorus::strategy::host,
            },
        });
    }

    pub mod synthesizer {
        wasmtime::component::bindgen!({
            world: "synthesizer-plugin",
            path: "../wit/0.3.0",
            imports: { default: async | trappable },
            exports: { default: async },
            with: {
                "chorus:strategy/types": super::selector::chorus::strategy::types,
                "chorus:strategy/host": super::selector::chorus::strategy::host,
            },
        });
    }
}

use generated::selector::chorus::strategy::host;
use generated::selector::chorus::strategy::types as wit;
use generated::{prompter, selector, synthesizer};
use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use super::{GuestAnswer, Sources};
use crate::llm;
use crate::plugins::sandbox::{State, Stopped};
use crate::plugins::types::{self as own, Kind};

pub const VERSION: &str = "0.3.0";

/// A 0.3 request may ask for a response format.
fn response_format(r: &wit::ChatRequest) -> Result<Option<llm::ResponseFormat>, String> {
    Ok(match &r.response_format {
        None => None,
        Some(wit::ResponseFormat::JsonObject) => Some(llm::ResponseFormat::JsonObject),
        Some(wit::ResponseFormat::JsonSchema(s)) => Some(llm::ResponseFormat::JsonSchema(
            llm::JsonSchema::new(s.name.clone(), &s.schema, s.strict)?,
        )),
    })
}

/// A 0.3 reply says what was sent of the request's response format.
fn reply_of(reply: &llm::Reply) -> wit::Reply {
    wit::Reply {
        content: String::clone(&reply.content),
        served_by: reply.served_by.clone(),
        finish_reason: reply.finish_reason.clone(),
        usage: reply.usage.map(usage_of),
        format_sent: match reply.format_sent {
            llm::FormatSent::None => wit::FormatSent::None,
            llm::FormatSent::JsonObject => wit::FormatSent::JsonObject,
            llm::FormatSent::JsonSchema => wit::FormatSent::JsonSchema,
        },
    }
}

adapters!();
