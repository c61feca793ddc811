//! Strategy plugins: a thin layer over wasmtime. One engine and linker per
//! process; each plugin compiled once (and cached on disk), its contract
//! version checked at load; every call in a fresh sandboxed store; one typed
//! entry point per world. A trap, a loop or a bad result is a `PluginError`
//! naming the plugin — never a crash.

mod bindings;
mod cache;
mod registry;
mod sandbox;
mod types;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Engine, Store};

pub use bindings::CONTRACT;
pub use cache::Source;
pub use registry::{Registry, builtin_names};
pub use sandbox::HostServices;
pub use types::*;

use bindings::{host, prompter, selector, synthesizer, wit};
use sandbox::{CpuExhausted, State};

/// A plugin call that did not produce a usable value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error(
        "plugin `{plugin}` used up its CPU time ({limit:?}) and was stopped; raise plugins.{plugin}.cpu_time if it needs more"
    )]
    CpuTime { plugin: String, limit: Duration },
    #[error(
        "plugin `{plugin}` hit its memory cap of {mib} MiB and was stopped; raise plugins.{plugin}.max_memory_mib if it needs more"
    )]
    Memory { plugin: String, mib: u32 },
    #[error("plugin `{plugin}` crashed: {message}")]
    Trap { plugin: String, message: String },
    #[error("plugin `{plugin}` failed: {message}")]
    Failed { plugin: String, message: String },
    #[error("plugin `{plugin}` returned something unusable: {message}")]
    Invalid { plugin: String, message: String },
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
    cpu_time: Duration,
    max_memory_mib: u32,
    engine: Engine,
    pre: Pre,
}

enum Pre {
    Selector(selector::SelectorPluginPre<State>),
    Prompter(prompter::PrompterPluginPre<State>),
    Synthesizer(synthesizer::SynthesizerPluginPre<State>),
}

impl Plugin {
    pub async fn select(
        &self,
        host: Arc<dyn HostServices>,
        request: &Request,
    ) -> Result<Plan, PluginError> {
        let Pre::Selector(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Selector));
        };
        let mut store = self.store(host);
        let result = async {
            let plugin = pre.instantiate_async(&mut store).await?;
            plugin
                .chorus_strategy_selector()
                .call_select(&mut store, &request.into(), &self.settings)
                .await
        }
        .await;
        self.conclude(&store, result).map(Plan::from)
    }

    pub async fn prompt(
        &self,
        host: Arc<dyn HostServices>,
        request: &Request,
        plan: &Plan,
    ) -> Result<Prompts, PluginError> {
        let Pre::Prompter(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Prompter));
        };
        let mut store = self.store(host);
        let result = async {
            let plugin = pre.instantiate_async(&mut store).await?;
            plugin
                .chorus_strategy_prompter()
                .call_prompt(&mut store, &request.into(), &plan.into(), &self.settings)
                .await
        }
        .await;
        self.conclude(&store, result).map(Prompts::from)
    }

    pub async fn synthesize(
        &self,
        host: Arc<dyn HostServices>,
        request: &Request,
        plan: &Plan,
        completions: &[crate::llm::Completion],
    ) -> Result<Answer, PluginError> {
        let Pre::Synthesizer(pre) = &self.pre else {
            return Err(self.wrong_kind(Kind::Synthesizer));
        };
        let completions: Vec<wit::Completion> = completions.iter().map(Into::into).collect();
        let mut store = self.store(host);
        let result = async {
            let plugin = pre.instantiate_async(&mut store).await?;
            plugin
                .chorus_strategy_synthesizer()
                .call_synthesize(
                    &mut store,
                    &request.into(),
                    &plan.into(),
                    &completions,
                    &self.settings,
                )
                .await
        }
        .await;
        let answer = self.conclude(&store, result)?;
        let details = match answer.details.trim() {
            "" => None,
            text => Some(
                serde_json::from_str(text).map_err(|e| PluginError::Invalid {
                    plugin: self.name.clone(),
                    message: format!("answer.details is not JSON: {e}"),
                })?,
            ),
        };
        Ok(Answer {
            kind: answer.kind.into(),
            text: answer.text,
            sources: answer.sources,
            notes: answer.notes,
            details,
        })
    }

    fn store(&self, host: Arc<dyn HostServices>) -> Store<State> {
        sandbox::store(
            &self.engine,
            Arc::from(self.name.as_str()),
            host,
            self.cpu_time,
            (self.max_memory_mib as usize) << 20,
        )
    }

    /// Turns the raw result of a call into a value or a `PluginError` that
    /// says what happened in terms the user can act on.
    fn conclude<T>(
        &self,
        store: &Store<State>,
        result: wasmtime::Result<Result<T, String>>,
    ) -> Result<T, PluginError> {
        let state = store.data();
        state.finish();
        let plugin = self.name.clone();
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(PluginError::Failed { plugin, message }),
            Err(e) if e.is::<CpuExhausted>() => Err(PluginError::CpuTime {
                plugin,
                limit: self.cpu_time,
            }),
            Err(_) if state.limiter.denied.is_some() => Err(PluginError::Memory {
                plugin,
                mib: self.max_memory_mib,
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

    fn wrong_kind(&self, expected: Kind) -> PluginError {
        PluginError::Invalid {
            plugin: self.name.clone(),
            message: format!("it is a {}, not a {expected}", self.kind),
        }
    }
}

impl host::Host for State {
    async fn log(&mut self, level: wit::LogLevel, message: String) -> wasmtime::Result<()> {
        let message = bounded(message, 4096);
        let plugin = &*self.plugin;
        match level {
            wit::LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            wit::LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            wit::LogLevel::Info => tracing::info!(plugin, "{message}"),
            wit::LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            wit::LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }

    async fn progress(&mut self, message: String) -> wasmtime::Result<()> {
        self.host.progress(&self.plugin, bounded(message, 500));
        Ok(())
    }

    async fn complete(
        &mut self,
        requests: Vec<wit::ChatRequest>,
    ) -> wasmtime::Result<Vec<wit::Completion>> {
        let requests = requests.into_iter().map(Into::into).collect();
        let completions = self.host.complete(&self.plugin, requests).await;
        Ok(completions.iter().map(Into::into).collect())
    }

    async fn models(&mut self) -> wasmtime::Result<Vec<wit::ModelInfo>> {
        Ok(self.host.models().iter().map(Into::into).collect())
    }
}

impl wit::Host for State {}

fn bounded(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests;
