//! What every contract version from 0.2 on adapts the same way, written
//! once: the `Guest` of a version (instantiate, call, convert), its `host`
//! imports, and the conversions between its types and the host's own.
//! A version module generates its bindings, imports them as `wit`, `host`,
//! `selector`, `prompter` and `synthesizer`, and defines what differs:
//!
//! - `VERSION`;
//! - `response_format(&wit::ChatRequest) -> Result<Option<llm::ResponseFormat>, String>`;
//! - `reply_of(&llm::Reply) -> wit::Reply` (it may use `usage_of`);
//! - `request_of(&own::Request) -> wit::Request`;
//! - `part_of(wit::ContentPart) -> super::Part`;
//! - `UNSUPPORTED_INPUT: wit::FailureKind`, what `unsupported-input` is
//!   called in the version;
//!
//! and passes the macro the `model-info` fields it has beyond 0.3's, as
//! `adapters!(m => { field: m.…, })` (`m` is the host's `llm::ModelInfo`),
//! the `host` functions it has beyond 0.4's, as
//! `adapters!(m => { … }, host => { async fn …(&mut self, …) … })`, and,
//! from 0.6, the tools of a chat request and the calls of an answer, as
//! `…, chat(r) => { tools: …, }, answer(a) => { tool_calls: …, } kinds =>
//! { wit::AnswerKind::… => …, })` (`r` is the `wit::ChatRequest`, `a` the
//! `wit::Answer`, `kinds` the answer kinds beyond 0.5's; without them a
//! request offers no tools and an answer makes no call).
//!
//! The macro's paths resolve where it is invoked, so each expansion uses
//! that version's generated types.

macro_rules! adapters {
    ($m:ident => { $($model_info:tt)* }) => {
        adapters!($m => { $($model_info)* }, host => {});
    };
    ($m:ident => { $($model_info:tt)* }, host => { $($host_extra:tt)* }) => {
        adapters!(
            $m => { $($model_info)* },
            host => { $($host_extra)* },
            chat(_r) => { tools: None, },
            answer(_a) => { tool_calls: Vec::new(), } kinds => {}
        );
    };
    (
        $m:ident => { $($model_info:tt)* },
        host => { $($host_extra:tt)* },
        chat($r:ident) => { $($chat_extra:tt)* },
        answer($a:ident) => { $($answer_extra:tt)* } kinds => { $($kind_extra:tt)* }
    ) => {
        pub fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
            host::add_to_linker::<State, HasSelf<State>>(linker, |state| state)
        }

        /// A linked plugin of one kind, ready to instantiate per call.
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
                    Kind::Synthesizer => {
                        Self::Synthesizer(synthesizer::SynthesizerPluginPre::new(pre)?)
                    }
                })
            }

            /// Calls the plugin's `validate-settings`.
            pub async fn validate_settings(
                &self,
                store: &mut Store<State>,
                settings: &str,
            ) -> wasmtime::Result<Result<(), String>> {
                match self {
                    Self::Selector(pre) => {
                        let plugin = pre.instantiate_async(&mut *store).await?;
                        plugin
                            .chorus_strategy_selector()
                            .call_validate_settings(&mut *store, settings)
                            .await
                    }
                    Self::Prompter(pre) => {
                        let plugin = pre.instantiate_async(&mut *store).await?;
                        plugin
                            .chorus_strategy_prompter()
                            .call_validate_settings(&mut *store, settings)
                            .await
                    }
                    Self::Synthesizer(pre) => {
                        let plugin = pre.instantiate_async(&mut *store).await?;
                        plugin
                            .chorus_strategy_synthesizer()
                            .call_validate_settings(&mut *store, settings)
                            .await
                    }
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
                Ok(prompts.and_then(own::Prompts::try_from))
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
                let completions: Vec<wit::Completion> =
                    completions.iter().map(Into::into).collect();
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
                Ok(answer.map(guest_answer))
            }
        }

        /// An answer as the plugin returned it, before the host checks it.
        fn guest_answer($a: wit::Answer) -> GuestAnswer {
            GuestAnswer {
                kind: $a.kind.into(),
                text: $a.text,
                sources: Sources::CallIds($a.sources),
                notes: $a.notes,
                details: $a.details,
                $($answer_extra)*
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
                let requests = requests
                    .into_iter()
                    .enumerate()
                    .map(|(index, request)| {
                        let label = request.label.clone();
                        llm::ChatRequest::try_from(request).map_err(|why| {
                            wasmtime::Error::new(Stopped::BadRequest { index, label, why })
                        })
                    })
                    .collect::<wasmtime::Result<_>>()?;
                let completions = self.complete(requests).await?;
                Ok(completions.iter().map(Into::into).collect())
            }

            async fn models(&mut self) -> wasmtime::Result<Vec<wit::ModelInfo>> {
                Ok(self.host.models().iter().map(Into::into).collect())
            }

            async fn budget(&mut self) -> wasmtime::Result<wit::RunBudget> {
                let budget = self.host.budget();
                Ok(wit::RunBudget {
                    calls_left: budget.calls_left,
                    cost_left: budget.cost_left,
                    time_left_ms: u64::try_from(budget.time_left.as_millis()).unwrap_or(u64::MAX),
                })
            }

            $($host_extra)*
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

        impl TryFrom<wit::ChatRequest> for llm::ChatRequest {
            type Error = String;

            /// Fails on a response format providers would refuse (a bad schema
            /// name, a schema that is not a JSON object), saying which; versions
            /// without response formats never fail.
            fn try_from($r: wit::ChatRequest) -> Result<Self, String> {
                let response_format = response_format(&$r)?;
                let mut placed = Vec::new();
                let messages = $r
                    .messages
                    .into_iter()
                    .enumerate()
                    .map(|(index, m)| llm::Message {
                        role: m.role.into(),
                        content: text_of(index, m.content, &mut placed),
                    })
                    .collect();
                Ok(Self {
                    label: $r.label,
                    model: $r.model,
                    messages,
                    sampling: $r.sampling.into(),
                    response_format,
                    attachments: Default::default(),
                    placed,
                    $($chat_extra)*
                })
            }
        }

        /// The text of message `index`'s parts, in order; the attachments
        /// placed among them go to `placed`, at the byte of the text they
        /// come before.
        fn text_of(
            index: usize,
            parts: Vec<wit::ContentPart>,
            placed: &mut Vec<llm::Placed>,
        ) -> String {
            let mut text = String::new();
            for part in parts {
                match part_of(part) {
                    super::Part::Text(part) if text.is_empty() => text = part,
                    super::Part::Text(part) => text.push_str(&part),
                    super::Part::Attachment(id) => placed.push(llm::Placed {
                        message: index,
                        at: text.len(),
                        id,
                    }),
                }
            }
            text
        }

        /// A usage as the contract spells it.
        fn usage_of(u: llm::Usage) -> wit::Usage {
            wit::Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                reasoning_tokens: u.reasoning_tokens,
                cost: u.cost,
                cost_estimated: u.cost_estimated,
                tokens_estimated: u.tokens_estimated,
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
                    K::Cut => Self::Cut,
                    K::TokenLimit => Self::TokenLimit,
                    K::UnsupportedInput => UNSUPPORTED_INPUT,
                }
            }
        }

        impl From<&llm::Completion> for wit::Completion {
            fn from(c: &llm::Completion) -> Self {
                Self {
                    id: c.id,
                    label: c.label.clone(),
                    model: c.model.clone(),
                    latency_ms: c.latency_ms,
                    attempts: c.attempts,
                    outcome: match &c.outcome {
                        Ok(reply) => Ok(reply_of(reply)),
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
            fn from($m: &llm::ModelInfo) -> Self {
                Self {
                    id: $m.id.clone(),
                    provider: $m.provider.clone(),
                    context_window: $m.context_window,
                    max_output_tokens: $m.max_output_tokens,
                    input_price: $m.input_price,
                    output_price: $m.output_price,
                    tags: $m.tags.clone(),
                    supported_parameters: $m.supported_parameters.clone(),
                    prices_source: $m.prices_source.map(|source| {
                        match source {
                            llm::PriceSource::Config => "config",
                            llm::PriceSource::Catalog => "catalog",
                        }
                        .to_owned()
                    }),
                    listed: $m.listed,
                    $($model_info)*
                    // Nothing beyond the named fields yet; later hosts add here first.
                    extra: "{}".to_owned(),
                }
            }
        }

        impl From<&own::Request> for wit::Request {
            fn from(r: &own::Request) -> Self {
                request_of(r)
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

        impl TryFrom<wit::Prompts> for own::Prompts {
            type Error = String;

            fn try_from(p: wit::Prompts) -> Result<Self, String> {
                let requests = p
                    .requests
                    .into_iter()
                    .enumerate()
                    .map(|(index, request)| {
                        let label = request.label.clone();
                        llm::ChatRequest::try_from(request).map_err(|why| {
                            format!("request {index} (\"{label}\") cannot be sent: {why}")
                        })
                    })
                    .collect::<Result<_, _>>()?;
                Ok(Self {
                    requests,
                    notes: p.notes,
                })
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
                    $($kind_extra)*
                }
            }
        }
    };
}
