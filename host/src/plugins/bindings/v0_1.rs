//! `chorus:strategy@0.1.0`, kept so plugins built for it keep working
//! unchanged: its generated bindings, and the adapters between them and the
//! host's own types. An answer's sources are fan-out indices here; the
//! caller maps them to call ids.

generated!("../wit/0.1.0");

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use super::{GuestAnswer, Sources};
use crate::llm;
use crate::plugins::sandbox::State;
use crate::plugins::types::{self as own, Kind};

pub const VERSION: &str = "0.1.0";

pub fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    host::add_to_linker::<State, HasSelf<State>>(linker, |state| state)
}

/// A linked 0.1 plugin of one kind, ready to instantiate per call.
pub enum Guest {
    Selector(selector::SelectorPluginPre<State>),
    Prompter(prompter::PrompterPluginPre<State>),
    Synthesizer(synthesizer::SynthesizerPluginPre<State>),
}

impl Guest {
    pub fn new(pre: InstancePre<State>, kind: Kind) -> wasmtime::Result<Self> {
        Ok(match kind {
            Kind::Selector => Self::Selector(selector::SelectorPluginPre::new(pre)?),
            Kind::Prompter => Self::Prompter(prompter::PrompterPluginPre::new(pre)?),
            Kind::Synthesizer => Self::Synthesizer(synthesizer::SynthesizerPluginPre::new(pre)?),
        })
    }

    /// Instantiates the plugin and drops it: 0.1 has no `validate-settings`,
    /// so this is what loading it checks (its start-up runs, its memory fits).
    pub async fn instantiate(&self, store: &mut Store<State>) -> wasmtime::Result<()> {
        match self {
            Self::Selector(pre) => pre.instantiate_async(&mut *store).await.map(drop),
            Self::Prompter(pre) => pre.instantiate_async(&mut *store).await.map(drop),
            Self::Synthesizer(pre) => pre.instantiate_async(&mut *store).await.map(drop),
        }
    }

    pub async fn select(
        &self,
        store: &mut Store<State>,
        request: &own::Request,
        settings: &str,
    ) -> wasmtime::Result<Result<own::Plan, String>> {
        let Self::Selector(pre) = self else {
            return Err(super::wrong_kind());
        };
        let plugin = pre.instantiate_async(&mut *store).await?;
        let plan = plugin
            .chorus_strategy_selector()
            .call_select(&mut *store, &request.into(), settings)
            .await?;
        Ok(plan.map(Into::into))
    }

    pub async fn prompt(
        &self,
        store: &mut Store<State>,
        request: &own::Request,
        plan: &own::Plan,
        settings: &str,
    ) -> wasmtime::Result<Result<own::Prompts, String>> {
        let Self::Prompter(pre) = self else {
            return Err(super::wrong_kind());
        };
        let plugin = pre.instantiate_async(&mut *store).await?;
        let prompts = plugin
            .chorus_strategy_prompter()
            .call_prompt(&mut *store, &request.into(), &plan.into(), settings)
            .await?;
        Ok(prompts.map(Into::into))
    }

    pub async fn synthesize(
        &self,
        store: &mut Store<State>,
        request: &own::Request,
        plan: &own::Plan,
        completions: &[llm::Completion],
        settings: &str,
    ) -> wasmtime::Result<Result<GuestAnswer, String>> {
        let Self::Synthesizer(pre) = self else {
            return Err(super::wrong_kind());
        };
        let completions: Vec<wit::Completion> = completions.iter().map(Into::into).collect();
        let plugin = pre.instantiate_async(&mut *store).await?;
        let answer = plugin
            .chorus_strategy_synthesizer()
            .call_synthesize(
                &mut *store,
                &request.into(),
                &plan.into(),
                &completions,
                settings,
            )
            .await?;
        Ok(answer.map(|a| GuestAnswer {
            kind: a.kind.into(),
            text: a.text,
            sources: Sources::Indices(a.sources),
            notes: a.notes,
            details: a.details,
            tool_calls: Vec::new(),
        }))
    }
}

impl host::Host for State {
    async fn log(&mut self, level: wit::LogLevel, message: String) -> wasmtime::Result<()> {
        let level = match level {
            wit::LogLevel::Trace => tracing::Level::TRACE,
            wit::LogLevel::Debug => tracing::Level::DEBUG,
            wit::LogLevel::Info => tracing::Level::INFO,
            wit::LogLevel::Warn => tracing::Level::WARN,
            wit::LogLevel::Error => tracing::Level::ERROR,
        };
        self.log(level, message);
        Ok(())
    }

    async fn progress(&mut self, message: String) -> wasmtime::Result<()> {
        self.progress(message);
        Ok(())
    }

    async fn complete(
        &mut self,
        requests: Vec<wit::ChatRequest>,
    ) -> wasmtime::Result<Vec<wit::Completion>> {
        let requests = requests.into_iter().map(Into::into).collect();
        let completions = self.complete(requests).await?;
        Ok(completions.iter().map(Into::into).collect())
    }

    async fn models(&mut self) -> wasmtime::Result<Vec<wit::ModelInfo>> {
        Ok(self.host.models().iter().map(Into::into).collect())
    }
}

impl wit::Host for State {}

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
            // Before 0.3 a request could not ask for a response format.
            response_format: None,
            attachments: Default::default(),
            placed: Vec::new(),
            tools: None,
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
            // What a provider answers such a request with: 404, "no
            // endpoints support image input".
            K::UnsupportedInput => Self::HttpStatus,
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
                    content: String::clone(&reply.content),
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
