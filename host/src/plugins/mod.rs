//! Strategy plugins: a thin layer over wasmtime. One engine and linker per
//! process; each plugin compiled once (and cached on disk), its contract
//! version checked at load; every call in a fresh sandboxed store; one typed
//! entry point per world. A trap, a loop or a bad result is a `PluginError`
//! naming the plugin — never a crash.

mod bindings;
mod cache;
mod sandbox;
mod types;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, Store};

pub use bindings::CONTRACT;
pub use cache::Source;
pub use sandbox::HostServices;
pub use types::*;

use crate::config::{ConfigError, Loaded};
use bindings::{host, prompter, selector, synthesizer, wit};
use sandbox::{CpuExhausted, State};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
}

/// Names of the plugins compiled into chorus.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    builtin::BUILTINS.iter().map(|(name, _)| *name)
}

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

/// Every plugin of a configuration, loaded.
pub struct Registry {
    plugins: BTreeMap<String, Arc<Plugin>>,
}

impl Registry {
    /// Loads (compiles or fetches from the cache) every plugin in the config.
    pub fn load(loaded: &Loaded) -> Result<Self, ConfigError> {
        let engine = engine();
        let mut linker: Linker<State> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| loaded.error("", format!("{e:#}")))?;
        host::add_to_linker::<State, HasSelf<State>>(&mut linker, |state| state)
            .map_err(|e| loaded.error("", format!("{e:#}")))?;
        let cache_config = &loaded.config.cache;
        let cache = cache::CompileCache::new(if cache_config.enabled {
            cache_config
                .dir
                .clone()
                .or_else(cache::CompileCache::default_dir)
        } else {
            None
        });

        let mut plugins = BTreeMap::new();
        for (name, spec) in &loaded.config.plugins {
            let started = Instant::now();
            let (wasm, origin, key) = match (&spec.builtin, &spec.path) {
                (Some(builtin), _) => {
                    let bytes = builtin::BUILTINS
                        .iter()
                        .find(|(n, _)| n == builtin)
                        .map(|(_, bytes)| bytes.to_vec())
                        .ok_or_else(|| {
                            let known: Vec<_> = builtin_names().collect();
                            loaded.error(
                                format!("plugins.{name}.builtin"),
                                format!(
                                    "no built-in plugin `{builtin}` (built in: {})",
                                    known.join(", ")
                                ),
                            )
                        })?;
                    (
                        bytes,
                        format!("builtin:{builtin}"),
                        format!("plugins.{name}.builtin"),
                    )
                }
                (None, Some(path)) => {
                    let full: PathBuf = loaded.base_dir.join(path);
                    let key = format!("plugins.{name}.path");
                    let bytes = std::fs::read(&full).map_err(|e| {
                        loaded.error(&key, format!("cannot read {}: {e}", full.display()))
                    })?;
                    (bytes, full.display().to_string(), key)
                }
                (None, None) => unreachable!("validated: a plugin has builtin or path"),
            };
            let (component, source) = cache.load(&engine, &wasm).map_err(|e| {
                loaded.error(
                    &key,
                    format!("{origin} is not a loadable WebAssembly component: {e:#}"),
                )
            })?;
            let (kind, contract) = contract_of(&engine, &component)
                .map_err(|m| loaded.error(&key, format!("{origin}: {m}")))?;
            let pre = link(&linker, &component, kind)
                .map_err(|e| loaded.error(&key, format!("{origin} cannot be linked: {e:#}")))?;
            let settings =
                serde_json::to_string(&spec.settings).unwrap_or_else(|_| "{}".to_owned());
            let plugin = Plugin {
                name: name.clone(),
                kind,
                contract,
                origin,
                source,
                load_time: started.elapsed(),
                settings,
                cpu_time: spec.cpu_time,
                max_memory_mib: spec.max_memory_mib,
                engine: engine.clone(),
                pre,
            };
            tracing::debug!(plugin = %name, kind = %kind, source = ?source, "loaded in {:?}", plugin.load_time);
            plugins.insert(name.clone(), Arc::new(plugin));
        }
        Ok(Self { plugins })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.plugins.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Plugin>> {
        self.plugins.values()
    }
}

/// The process's engine: epoch interruption on, and a ticker thread that
/// advances the epoch for as long as the engine lives.
fn engine() -> Engine {
    let mut config = wasmtime::Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config).expect("the engine configuration is valid");
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("chorus-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(sandbox::TICK);
            }
        })
        .expect("spawn the epoch ticker");
    engine
}

/// Reads which world a component implements and which contract version it
/// was built for, and refuses versions this host cannot serve.
fn contract_of(engine: &Engine, component: &Component) -> Result<(Kind, String), String> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    for name in &exports {
        let Some(rest) = name.strip_prefix("chorus:strategy/") else {
            continue;
        };
        let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
        let Some(kind) = Kind::ALL.into_iter().find(|k| k.interface() == interface) else {
            continue;
        };
        if !compatible(version, CONTRACT) {
            return Err(format!(
                "it was built for chorus:strategy@{version}, but this chorus speaks chorus:strategy@{CONTRACT}; \
                 rebuild the plugin against the wit/ directory of this chorus version"
            ));
        }
        return Ok((kind, version.to_owned()));
    }
    Err(format!(
        "it is not a chorus strategy plugin: it exports none of chorus:strategy/{{selector,prompter,synthesizer}} (it exports: {})",
        if exports.is_empty() {
            "nothing".to_owned()
        } else {
            exports.join(", ")
        }
    ))
}

/// Semver compatibility: same major version, and for 0.x the same minor.
fn compatible(guest: &str, host: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split('.');
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    match (parse(guest), parse(host)) {
        (Some((gmaj, gmin)), Some((hmaj, hmin))) => {
            gmaj == hmaj && (hmaj > 0 || gmin == hmin) && gmin <= hmin
        }
        _ => false,
    }
}

fn link(linker: &Linker<State>, component: &Component, kind: Kind) -> wasmtime::Result<Pre> {
    let pre = linker.instantiate_pre(component)?;
    Ok(match kind {
        Kind::Selector => Pre::Selector(selector::SelectorPluginPre::new(pre)?),
        Kind::Prompter => Pre::Prompter(prompter::PrompterPluginPre::new(pre)?),
        Kind::Synthesizer => Pre::Synthesizer(synthesizer::SynthesizerPluginPre::new(pre)?),
    })
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
