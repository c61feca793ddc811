//! Generated bindings for the three plugin worlds of `chorus:strategy@0.1.0`,
//! and conversions between them and the host's own types. The worlds share
//! one `types` and one `host` module, so a value crosses between them freely.

pub mod selector {
    wasmtime::component::bindgen!({
        world: "selector-plugin",
        path: "../wit",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

pub mod prompter {
    wasmtime::component::bindgen!({
        world: "prompter-plugin",
        path: "../wit",
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
        path: "../wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "chorus:strategy/types": super::selector::chorus::strategy::types,
            "chorus:strategy/host": super::selector::chorus::strategy::host,
        },
    });
}

pub use selector::chorus::strategy::host;
pub use selector::chorus::strategy::types as wit;

/// The contract version these bindings were generated from.
pub const CONTRACT: &str = "0.1.0";

use super::types as own;
use crate::llm;

impl From<wit::Role> for llm::Role {
    fn from(role: wit::Role) -> Self {
        match role {
            wit::Role::System => llm::Role::System,
            wit::Role::User => llm::Role::User,
            wit::Role::Assistant => llm::Role::Assistant,
        }
    }
}

impl From<llm::Role> for wit::Role {
    fn from(role: llm::Role) -> Self {
        match role {
            llm::Role::System => wit::Role::System,
            llm::Role::User => wit::Role::User,
            llm::Role::Assistant => wit::Role::Assistant,
        }
    }
}

impl From<wit::Sampling> for llm::Sampling {
    fn from(s: wit::Sampling) -> Self {
        Self {
            temperature: s.temperature,
            top_p: s.top_p,
            max_tokens: s.max_tokens,
            seed: s.seed,
        }
    }
}

impl From<llm::Sampling> for wit::Sampling {
    fn from(s: llm::Sampling) -> Self {
        Self {
            temperature: s.temperature,
            top_p: s.top_p,
            max_tokens: s.max_tokens,
            seed: s.seed,
        }
    }
}

impl From<wit::ChatRequest> for llm::ChatRequest {
    fn from(r: wit::ChatRequest) -> Self {
        Self {
            label: r.label,
            model: r.model,
            messages: r
                .messages
                .into_iter()
                .map(|m| llm::Message {
                    role: m.role.into(),
                    content: m.content,
                })
                .collect(),
            sampling: r.sampling.into(),
        }
    }
}

impl From<llm::FailureKind> for wit::FailureKind {
    fn from(kind: llm::FailureKind) -> Self {
        use llm::FailureKind as K;
        match kind {
            K::Timeout => Self::Timeout,
            K::RateLimited => Self::RateLimited,
            K::HttpStatus => Self::HttpStatus,
            K::Connection => Self::Connection,
            K::MalformedResponse => Self::MalformedResponse,
            K::ResponseTooLarge => Self::ResponseTooLarge,
            K::Cancelled => Self::Cancelled,
            K::OverBudget => Self::OverBudget,
            K::UnknownModel => Self::UnknownModel,
            K::MissingApiKey => Self::MissingApiKey,
            // Not in contract 0.1: the nearest kind; the message says which.
            K::Cut => Self::Cancelled,
            K::TokenLimit => Self::MalformedResponse,
        }
    }
}

impl From<&llm::Completion> for wit::Completion {
    fn from(c: &llm::Completion) -> Self {
        Self {
            label: c.label.clone(),
            model: c.model.clone(),
            latency_ms: c.latency_ms,
            attempts: c.attempts,
            outcome: match &c.outcome {
                Ok(reply) => Ok(wit::Reply {
                    content: reply.content.clone(),
                    served_by: reply.served_by.clone(),
                    finish_reason: reply.finish_reason.clone(),
                    usage: reply.usage.map(|u| wit::Usage {
                        prompt_tokens: u.prompt_tokens,
                        completion_tokens: u.completion_tokens,
                        cost: u.cost,
                    }),
                }),
                Err(f) => Err(wit::Failure {
                    kind: f.kind.into(),
                    status: f.status,
                    message: f.message.clone(),
                }),
            },
        }
    }
}

impl From<&llm::ModelInfo> for wit::ModelInfo {
    fn from(m: &llm::ModelInfo) -> Self {
        Self {
            id: m.id.clone(),
            provider: m.provider.clone(),
            context_window: m.context_window,
            input_price: m.input_price,
            output_price: m.output_price,
            tags: m.tags.clone(),
        }
    }
}

impl From<&own::Request> for wit::Request {
    fn from(r: &own::Request) -> Self {
        Self {
            run_id: r.run_id.clone(),
            pipeline: r.pipeline.clone(),
            prompt: r.prompt.clone(),
            options: r.options.to_string(),
        }
    }
}

impl From<wit::Plan> for own::Plan {
    fn from(p: wit::Plan) -> Self {
        Self {
            panel: p
                .panel
                .into_iter()
                .map(|s| own::Seat {
                    model: s.model,
                    sampling: s.sampling.into(),
                })
                .collect(),
            synthesizers: p.synthesizers,
            notes: p.notes,
        }
    }
}

impl From<&own::Plan> for wit::Plan {
    fn from(p: &own::Plan) -> Self {
        Self {
            panel: p
                .panel
                .iter()
                .map(|s| wit::Seat {
                    model: s.model.clone(),
                    sampling: s.sampling.into(),
                })
                .collect(),
            synthesizers: p.synthesizers.clone(),
            notes: p.notes.clone(),
        }
    }
}

impl From<wit::Prompts> for own::Prompts {
    fn from(p: wit::Prompts) -> Self {
        Self {
            requests: p.requests.into_iter().map(Into::into).collect(),
            notes: p.notes,
        }
    }
}

impl From<wit::AnswerKind> for own::AnswerKind {
    fn from(kind: wit::AnswerKind) -> Self {
        match kind {
            wit::AnswerKind::Synthesis => Self::Synthesis,
            wit::AnswerKind::Single => Self::Single,
            wit::AnswerKind::Vote => Self::Vote,
            wit::AnswerKind::Pick => Self::Pick,
            wit::AnswerKind::Unmerged => Self::Unmerged,
            wit::AnswerKind::None => Self::None,
        }
    }
}
