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
    /// The run's attachments, in id order (contract 0.4 on shows them).
    pub attachments: Vec<AttachmentInfo>,
    /// The tools the run's caller offered (contract 0.6 on shows them).
    pub tools: Option<std::sync::Arc<crate::llm::tools::ToolUse>>,
}

/// A run attachment as plugins see it: what it is, never its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachmentInfo {
    pub info: crate::attach::Info,
    /// The describer's text, once the run made one (synthesizers see it).
    pub description: Option<String>,
}

impl AttachmentInfo {
    /// The run's attachments, not yet described.
    pub fn list(infos: &[crate::attach::Info]) -> Vec<Self> {
        infos
            .iter()
            .map(|info| Self {
                info: info.clone(),
                description: None,
            })
            .collect()
    }
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
    /// The calls the caller is to make, when the answer is a call
    /// (contract 0.6 on); empty for a text answer.
    pub tool_calls: Vec<crate::llm::tools::ToolCall>,
}

/// What a synthesizer made of the panel's tool calls (contract 0.6 on).
#[derive(Debug, Clone)]
pub enum ToolDecision {
    /// chorus decides, as it does for plugins of older contracts.
    ByHost,
    /// No call: the answers are merged into text.
    Merge,
    /// The run's answer: a call, or text that needs no merge.
    Answer(Answer),
}

/// A plan as the run store keeps it: everything a re-synthesis needs.
/// Borrowed from the plan, so writing it builds no JSON tree.
#[derive(Serialize)]
struct StoredPlan<'a> {
    notes: &'a [String],
    panel: Vec<StoredSeat<'a>>,
    synthesizers: &'a [String],
}

#[derive(Serialize)]
struct StoredSeat<'a> {
    model: &'a str,
    sampling: &'a Sampling,
}

impl<'a> StoredPlan<'a> {
    fn of(plan: &'a Plan) -> Self {
        Self {
            notes: &plan.notes,
            panel: plan
                .panel
                .iter()
                .map(|seat| StoredSeat {
                    model: &seat.model,
                    sampling: &seat.sampling,
                })
                .collect(),
            synthesizers: &plan.synthesizers,
        }
    }
}

/// A plan as the run store keeps it, as JSON text (what the store writes).
pub fn plan_json(plan: &Plan) -> String {
    serde_json::to_string(&StoredPlan::of(plan)).unwrap_or_else(|_| "{}".to_owned())
}

/// A plan as the run store keeps it, as a JSON value (a run kept in memory).
pub fn plan_to_value(plan: &Plan) -> Value {
    serde_json::to_value(StoredPlan::of(plan)).unwrap_or_default()
}

/// The inverse of `plan_to_value`; missing parts are left empty.
pub fn plan_from_value(value: &Value) -> Plan {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let panel = value["panel"]
        .as_array()
        .map(|seats| {
            seats
                .iter()
                .filter_map(|seat| {
                    let sampling = &seat["sampling"];
                    Some(Seat {
                        model: seat["model"].as_str()?.to_owned(),
                        sampling: Sampling {
                            temperature: sampling["temperature"].as_f64().map(|t| t as f32),
                            top_p: sampling["top_p"].as_f64().map(|t| t as f32),
                            max_tokens: sampling["max_tokens"]
                                .as_u64()
                                .and_then(|n| u32::try_from(n).ok()),
                            seed: sampling["seed"].as_u64(),
                        },
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Plan {
        panel,
        synthesizers: strings(&value["synthesizers"]),
        notes: strings(&value["notes"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_survives_the_store() {
        let plan = Plan {
            panel: vec![Seat {
                model: "m1".into(),
                sampling: Sampling {
                    temperature: Some(0.5),
                    top_p: None,
                    max_tokens: Some(300),
                    seed: Some(7),
                },
            }],
            synthesizers: vec!["s".into()],
            notes: vec!["n".into()],
        };
        let text = plan_json(&plan);
        assert_eq!(plan_from_value(&serde_json::from_str(&text).unwrap()), plan);
        assert_eq!(plan_from_value(&plan_to_value(&plan)), plan);
        assert_eq!(
            text,
            r#"{"notes":["n"],"panel":[{"model":"m1","sampling":{"temperature":0.5,"top_p":null,"max_tokens":300,"seed":7}}],"synthesizers":["s"]}"#
        );
    }
}
