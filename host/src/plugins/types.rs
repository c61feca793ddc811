//! The strategy values plugins exchange with the pipeline, as plain Rust:
//! the pipeline never sees generated bindings.

use serde::Serialize;
use serde_json::Value;

pub use crate::llm::{ChatRequest, Sampling};
pub use crate::record::AnswerKind;

/// The kinds of plugin, one WIT world each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Selector,
    Prompter,
    Synthesizer,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Selector, Kind::Prompter, Kind::Synthesizer];

    /// The WIT interface the world exports.
    pub fn interface(self) -> &'static str {
        match self {
            Kind::Selector => "selector",
            Kind::Prompter => "prompter",
            Kind::Synthesizer => "synthesizer",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.interface())
    }
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub run_id: String,
    pub pipeline: String,
    pub prompt: String,
    /// Strategy options from the call: a JSON object.
    pub options: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seat {
    pub model: String,
    #[serde(skip)]
    pub sampling: Sampling,
}

/// The selector's decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub panel: Vec<Seat>,
    pub synthesizers: Vec<String>,
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// The prompter's output.
#[derive(Debug, Clone)]
pub struct Prompts {
    pub requests: Vec<ChatRequest>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Answer {
    pub kind: AnswerKind,
    pub text: String,
    pub sources: Vec<u32>,
    pub notes: Vec<String>,
    /// Strategy detail (votes, scores, rankings): a JSON object, if any.
    pub details: Option<Value>,
}
