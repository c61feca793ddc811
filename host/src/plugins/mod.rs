//! Strategy plugins: a thin layer over wasmtime. One engine (fuel, pooled
//! instances) and linker per configuration; each plugin compiled once (and
//! cached on disk, verified), its contract version read and served by that
//! version's bindings, its settings validated at load; every call in a fresh
//! sandboxed store; one typed entry point per world. A trap, a loop, a sleep
//! or a bad result is a `PluginError` naming the plugin — never a crash.

mod bindings;
mod cache;
mod engine;
mod engine_config;
mod oci_source;
mod output;
mod own_time;
mod registry;
mod sandbox;
mod services;
mod thread_cpu;
mod types;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Engine, Store};

pub use bindings::{CONTRACT, VERSIONS};
pub use cache::Source;
pub use oci_source::{describe, registry_access};
pub use registry::{Availability, Registry, builtin_names};
pub use sandbox::{MAX_LOG_MESSAGES, MAX_PROGRESS_MESSAGES};
pub use services::{Budget, HostServices, NoRun, no_outcome};
pub use types::*;

use bindings::{Guest, GuestAnswer, GuestToolDecision, Sources};
use engine::Slots;
use own_time::{Exceeded, OwnTime, Spent};
use sandbox::{CallLimits, State, Stopped};

/// A plugin call that did not produce a usable value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// `cpu` of CPU spent (past `limit`) in `wall` of its own time.
    #[error(
        "plugin `{plugin}` used up its CPU time ({limit:?}) and was stopped ({}); raise plugins.{plugin}.cpu_time if it needs more",
        used(*cpu, *wall)
    )]
    CpuTime {
        plugin: String,
        limit: Duration,
        cpu: Duration,
        wall: Duration,
    },
    /// `wall` of its own time spent (past `limit`), `cpu` of it running.
    #[error(
        "plugin `{plugin}` spent more than its {limit:?} of wall-clock time outside model calls, {} ({}), and was stopped; raise plugins.{plugin}.wall_time if it needs more",
        if running(*cpu, *wall) { "running" } else { "sleeping or waiting" },
        used(*cpu, *wall)
    )]
    WallTime {
        plugin: String,
        limit: Duration,
        cpu: Duration,
        wall: Duration,
    },
    /// Still working when the run's deadline came (`pipeline::deadline`).
    #[error(
        "plugin `{plugin}` was still working at the run's deadline and was stopped: the run's run_timeout ({}) is over; raise run_timeout (limits or the pipeline's) if it needs more",
        humantime::format_duration(*limit)
    )]
    Deadline { plugin: String, limit: Duration },
    #[error(
        "plugin `{plugin}` hit its memory cap of {mib} MiB and was stopped; raise plugins.{plugin}.max_memory_mib if it needs more"
    )]
    Memory { plugin: String, mib: u32 },
    #[error("plugin `{plugin}` was stopped: {message}")]
    Stopped { plugin: String, message: String },
    #[error("plugin `{plugin}` crashed: {message}")]
    Trap { plugin: String, message: String },
    #[error("plugin `{plugin}` failed: {message}")]
    Failed { plugin: String, message: String },
    #[error("plugin `{plugin}` returned something unusable: {message}")]
    Invalid { plugin: String, message: String },
    /// It failed to load (compiled in the background at a first start of
    /// `serve`), or was still compiling when the run could wait no more.
    #[error("plugin `{plugin}` did not load: {message}")]
    NotLoaded { plugin: String, message: String },
}

/// What a stopped call had used, in words.
fn used(cpu: Duration, wall: Duration) -> String {
    format!(
        "{:.2} s of CPU in {:.2} s of its own time",
        cpu.as_secs_f64(),
        wall.as_secs_f64()
    )
}

/// Whether a call that used `cpu` in `wall` was mostly running (a loop on
/// a machine too busy to give it its CPU in time), not waiting.
fn running(cpu: Duration, wall: Duration) -> bool {
    cpu >= wall / 4
}

impl PluginError {
    /// What kind of failure it is, in a word (`cpu-time`, `trap`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CpuTime { .. } => "cpu-time",
            Self::WallTime { .. } => "wall-time",
            Self::Deadline { .. } => "deadline",
            Self::Memory { .. } => "memory",
            Self::Stopped { .. } => "stopped",
            Self::Trap { .. } => "trap",
            Self::Failed { .. } => "failed",
            Self::Invalid { .. } => "invalid",
            Self::NotLoaded { .. } => "not-loaded",
        }
    }
}

/// A loaded plugin, ready to call.
pub struct Plugin {
    pub name: String,
    pub kind: Kind,
    /// The contract version it was built for.
    pub contract: String,
    /// `builtin:NAME` or the file path.
    pub origin: String,
    pub source: Source,
    pub load_time: Duration,
    settings: String,
    limits: CallLimits,
    engine: Engine,
    slots: Slots,
    guest: Guest,
}

/// One call in progress: its store, its stopwatch, and its pool slot.
struct Call {
    store: Store<State>,
    own_time: OwnTime,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

type Outcome<T> = Result<wasmtime::Result<Result<T, String>>, Exceeded>;

impl Plugin {
    pub async fn select(
        &self,
        host: Arc<dyn HostServices>,
        request: &Request,
    ) -> Result<Plan, PluginError> {
        self.expect(Kind::Selector)?;
        let mut call = self.begin(host).await?;
        let run = self.guest.select(&mut call.store, request, &self.settings);
        let result = call.own_time.clone().bound(run).await;
        self.conclude(&call, result)
    }

    pub async fn prompt(
        &self,
        host: Arc<dyn HostServices>,
        request: &Request,
        plan: &Plan,
    ) -> Result<Prompts, PluginError> {
        self.expect(Kind::Prompter)?;
        let mut call = self.begin(host).await?;
        let run = self
            .guest
            .prompt(&mut call.store, request, plan, &self.settings);
        let result = call.own_time.clone().bound(run).await;
        self.conclude(&call, result)
    }

    /// Merges `completions` into an answer whose sources are call ids
    /// (a 0.1 plugin's fan-out indices are mapped here).
    pub async fn synthesize(
        &self,
        host: Arc<dyn HostServices>,
        request: &Request,
        plan: &Plan,
        completions: &[crate::llm::Completion],
    ) -> Result<Answer, PluginError> {
        self.expect(Kind::Synthesizer)?;
        let mut call = self.begin(host).await?;
        let run =
            self.guest
                .synthesize(&mut call.store, request, plan, completions, &self.settings);
        let result = call.own_time.clone().bound(run).await;
        let answer = self.conclude(&call, result)?;
        self.answer(answer, request, completions)
    }

    /// What the synthesizer makes of the panel's tool calls
    /// (`choose-tool-calls`); `None` for a plugin of a contract before 0.6,
    /// which sees them as text only and leaves the decision to chorus.
    pub async fn choose_tool_calls(
        &self,
        host: Arc<dyn HostServices>,
        request: &Request,
        plan: &Plan,
        completions: &[crate::llm::Completion],
    ) -> Result<Option<ToolDecision>, PluginError> {
        self.expect(Kind::Synthesizer)?;
        if !self.guest.chooses_tool_calls() {
            return Ok(None);
        }
        let mut call = self.begin(host).await?;
        let run = async {
            let decided = self
                .guest
                .choose_tool_calls(&mut call.store, request, plan, completions, &self.settings)
                .await?;
            Ok(decided.unwrap_or(Ok(GuestToolDecision::ByHost)))
        };
        let result = call.own_time.clone().bound(run).await;
        Ok(Some(match self.conclude(&call, result)? {
            GuestToolDecision::ByHost => ToolDecision::ByHost,
            GuestToolDecision::Merge => ToolDecision::Merge,
            GuestToolDecision::Answer(answer) => {
                ToolDecision::Answer(self.answer(answer, request, completions)?)
            }
        }))
    }

    /// The memory cap of one call, in MiB (`max_memory_mib`).
    pub fn max_memory_mib(&self) -> u32 {
        self.limits.max_memory_mib
    }

    /// Runs the plugin's `validate-settings` (0.2 on) outside any run.
    pub async fn validate_settings(&self) -> Result<(), PluginError> {
        let mut call = self.begin(Arc::new(NoRun)).await?;
        let run = self
            .guest
            .validate_settings(&mut call.store, &self.settings);
        let result = call.own_time.clone().bound(run).await;
        self.conclude(&call, result)
    }

    fn expect(&self, kind: Kind) -> Result<(), PluginError> {
        if self.kind == kind {
            return Ok(());
        }
        Err(PluginError::Invalid {
            plugin: self.name.clone(),
            message: format!("it is a {}, not a {kind}", self.kind),
        })
    }

    async fn begin(&self, host: Arc<dyn HostServices>) -> Result<Call, PluginError> {
        let slot = self.slots.take().await;
        let own_time = OwnTime::start(self.limits.wall_time, self.limits.cpu_time);
        let store = sandbox::store(
            &self.engine,
            Arc::from(self.name.as_str()),
            host,
            &self.limits,
            own_time.clone(),
        )
        .map_err(|e| PluginError::Trap {
            plugin: self.name.clone(),
            message: format!("cannot set up its sandbox: {e:#}"),
        })?;
        Ok(Call {
            store,
            own_time,
            _slot: slot,
        })
    }

    /// Turns the raw result of a call into a value or a `PluginError` that
    /// says what happened in terms the user can act on.
    fn conclude<T>(&self, call: &Call, result: Outcome<T>) -> Result<T, PluginError> {
        let state = call.store.data();
        state.finish();
        let plugin = self.name.clone();
        let result = match result {
            Ok(result) => result,
            Err(Exceeded {
                spent: Spent::Wall,
                cpu,
                wall,
            }) => {
                return Err(PluginError::WallTime {
                    plugin,
                    limit: self.limits.wall_time,
                    cpu,
                    wall,
                });
            }
            Err(Exceeded {
                spent: Spent::Cpu,
                cpu,
                wall,
            }) => {
                return Err(PluginError::CpuTime {
                    plugin,
                    limit: self.limits.cpu_time,
                    cpu,
                    wall,
                });
            }
        };
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(PluginError::Failed { plugin, message }),
            Err(e) if e.is::<Stopped>() => Err(PluginError::Stopped {
                plugin,
                message: e
                    .downcast_ref::<Stopped>()
                    .map_or_else(|| format!("{e:#}"), Stopped::to_string),
            }),
            Err(_) if state.limiter.denied.is_some() => Err(PluginError::Memory {
                plugin,
                mib: self.limits.max_memory_mib,
            }),
            Err(e) => {
                let mut message = match e.downcast_ref::<wasmtime::Trap>() {
                    Some(trap) => trap.to_string(),
                    None => format!("{e:#}"),
                };
                if let Some(words) = state.last_words() {
                    message.push_str(&format!("; its last output: {words}"));
                }
                Err(PluginError::Trap { plugin, message })
            }
        }
    }

    /// The host's answer from the guest's: sources as call ids, details
    /// parsed.
    fn answer(
        &self,
        answer: GuestAnswer,
        request: &Request,
        completions: &[crate::llm::Completion],
    ) -> Result<Answer, PluginError> {
        let invalid = |message: String| PluginError::Invalid {
            plugin: self.name.clone(),
            message,
        };
        let sources = match answer.sources {
            Sources::CallIds(ids) => ids,
            Sources::Indices(indices) => indices
                .into_iter()
                .map(|i| match completions.get(i as usize) {
                    Some(c) => c.id.ok_or_else(|| {
                        invalid(format!(
                            "its answer cites completion {i}, which was never sent"
                        ))
                    }),
                    None => Err(invalid(format!(
                        "its answer cites completion {i}, but the fan-out has {}",
                        completions.len()
                    ))),
                })
                .collect::<Result<_, _>>()?,
        };
        let details = match answer.details.trim() {
            "" => None,
            text => Some(
                serde_json::from_str(text)
                    .map_err(|e| invalid(format!("answer.details is not JSON: {e}")))?,
            ),
        };
        match (
            answer.kind == AnswerKind::ToolCall,
            answer.tool_calls.is_empty(),
        ) {
            (true, true) => {
                return Err(invalid(
                    "its answer is of kind `tool-call` but makes no call (answer.tool-calls is empty)"
                        .to_owned(),
                ));
            }
            (false, false) => {
                return Err(invalid(format!(
                    "its answer makes {} tool calls but is of kind `{}`: an answer that makes calls is of kind `tool-call`",
                    answer.tool_calls.len(),
                    answer.kind.as_str()
                )));
            }
            _ => {}
        }
        if request.tools.is_none() && !answer.tool_calls.is_empty() {
            return Err(invalid(format!(
                "its answer calls `{}`, but the run's caller offered no tools",
                answer.tool_calls[0].name
            )));
        }
        Ok(Answer {
            kind: answer.kind,
            text: answer.text,
            sources,
            notes: answer.notes,
            details,
            tool_calls: answer.tool_calls,
        })
    }
}
