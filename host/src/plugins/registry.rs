//! Loading a configuration's plugins: the engine and linker, the built-in
//! components, compiling (or fetching from the verified cache) several at
//! once — or, at a first start of `serve`, in the background; in `serve`, a
//! shipped built-in only when a run first needs it —, reading the contract
//! version and choosing the bindings that serve it, linking against the
//! host's imports, and validating each plugin's settings.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Engine;
use wasmtime::component::Linker;

use super::bindings;
use super::engine::{self, Sizing, Slots};
use super::oci_source::Unavailable;
use super::sandbox::{CallLimits, State};
use super::{Kind, Plugin, PluginError, cache};
use crate::config::{ConfigError, Loaded};
use crate::notice::notice;

mod component;
mod loader;
mod slot;

pub(super) use component::contract_of;
use loader::{Job, Loader, compile_in_background, in_parallel};
use slot::{Deferred, Pending, Slot};

mod builtin {
    /// A plugin compiled into chorus (host/build.rs lists them).
    pub struct Builtin {
        pub name: &'static str,
        /// The world it implements, read by the build.
        pub kind: crate::plugins::Kind,
        /// The WebAssembly component.
        pub component: &'static [u8],
        /// Its SHA-256, computed by the build: a start need not read the
        /// component (which would bring it into memory) to key the cache.
        pub digest: [u8; 32],
        /// Its code, precompiled for this target by the build, where the
        /// build could.
        pub precompiled: Option<&'static [u8]>,
    }

    include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
}

/// Names of the plugins compiled into chorus.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    builtin::BUILTINS.iter().map(|b| b.name)
}

/// The component of a built-in plugin (loading borrows it from the
/// `Builtin` itself: see `component_of`).
#[cfg(test)]
pub(super) fn builtin_bytes(name: &str) -> Option<&'static [u8]> {
    builtin(name).map(|b| b.component)
}

/// A built-in plugin's code as the build precompiled it, if it did.
pub(super) fn builtin_precompiled(name: &str) -> Option<&'static [u8]> {
    builtin(name).and_then(|b| b.precompiled)
}

fn builtin(name: &str) -> Option<&'static builtin::Builtin> {
    builtin::BUILTINS.iter().find(|b| b.name == name)
}

/// Every plugin of a configuration, loaded (or, in `serve`, still to
/// load: see [`Pending`]), and the engine that runs them.
pub struct Registry {
    plugins: BTreeMap<String, Slot>,
    /// What each plugin was loaded from and with: what a reload compares.
    identities: BTreeMap<String, Identity>,
    sizing: Sizing,
    engine: Engine,
    slots: Slots,
    linker: Arc<Linker<State>>,
}

/// A plugin's component, origin, settings and limits: a reload keeps a
/// plugin whose identity is unchanged.
#[derive(PartialEq)]
struct Identity {
    digest: [u8; 32],
    origin: String,
    settings: String,
    limits: CallLimits,
}

impl Identity {
    fn of(job: &Job) -> Self {
        Self {
            digest: job.digest,
            origin: job.origin.clone(),
            settings: job.settings.clone(),
            limits: job.limits,
        }
    }
}

/// Whether a plugin can be called.
pub enum Availability<'a> {
    Ready(&'a Arc<Plugin>),
    /// Still compiling (at a first start of `serve`).
    Loading,
    /// A built-in left to load when a run first needs it (milliseconds):
    /// [`Registry::settled`] loads it.
    Unloaded,
    /// It did not load; why, as `chorus check` says it.
    Failed(&'a ConfigError),
}

/// A plugin loaded at once, or left to compile in the background.
enum Step {
    Loaded(Arc<Plugin>),
    Later(Box<Job>),
}

/// How much of a configuration loads before the registry is returned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every plugin, loaded and checked (`chorus check`).
    Everything,
    /// A start of `serve`: what must be compiled compiles in the
    /// background, and shipped built-ins wait for their first use.
    Serving,
    /// Compiles are awaited; shipped built-ins wait for their first use:
    /// a reload, and the commands that run pipelines (`chorus ask`, `ui`,
    /// `eval`).
    Needed,
}

impl Registry {
    /// Loads (compiles or fetches from the cache) every plugin in the
    /// config, and has each check its settings.
    pub fn load(loaded: &Loaded) -> Result<Self, ConfigError> {
        Self::build(loaded, None, Mode::Everything)
    }

    /// As `load`, but a built-in with its shipped settings whose code is
    /// ready is loaded only when a run first needs it (see
    /// `load_deferred`); compiles are awaited. For the commands that run
    /// pipelines: they then load what their runs use.
    pub fn load_needed(loaded: &Loaded) -> Result<Self, ConfigError> {
        Self::build(loaded, None, Mode::Needed)
    }

    /// As `load`, for `serve`: the registry is there at once. What must be
    /// compiled — neither precompiled by the build nor in the cache — is
    /// compiled in the background, for a first start whose client may send
    /// its first request before seconds of compiling are over (and not
    /// wait for chorus). A built-in with its shipped settings whose code is
    /// ready is not loaded until a run needs it: a start then maps and
    /// checks only what the configuration's pipelines actually run, and
    /// memory holds only those. [`Registry::settled`] waits for (and
    /// starts) a plugin; one that then fails to load is
    /// [`Availability::Failed`], with the error `load` would have
    /// returned, and fails only the calls that need it.
    pub fn load_deferred(loaded: &Loaded) -> Result<Self, ConfigError> {
        Self::build(loaded, None, Mode::Serving)
    }

    /// Loads the plugins of `loaded`, taking from `previous` (the set being
    /// replaced by a reload) every plugin whose component, settings and
    /// limits are unchanged, as it is: compiled, linked and validated (or
    /// still to load on first use). The engine is kept too when its sizing
    /// is unchanged; runs in flight on `previous` are untouched either way.
    /// Compiles are awaited (the previous set serves meanwhile), including
    /// those `previous` still has in the background.
    pub fn load_reusing(loaded: &Loaded, previous: Option<&Registry>) -> Result<Self, ConfigError> {
        Self::build(loaded, previous, Mode::Needed)
    }

    fn build(
        loaded: &Loaded,
        previous: Option<&Registry>,
        mode: Mode,
    ) -> Result<Self, ConfigError> {
        let config = &loaded.config;
        let largest = config
            .plugins
            .values()
            .map(|p| p.max_memory_mib)
            .max()
            .unwrap_or(64);
        let sizing = Sizing::for_runs(config.limits.max_concurrent_runs, largest);
        let previous = previous.filter(|p| p.sizing == sizing);
        let (engine, slots, linker) = match previous {
            Some(p) => (p.engine.clone(), p.slots.clone(), p.linker.clone()),
            None => {
                let (engine, slots) = engine::engine(sizing);
                let mut linker: Linker<State> = Linker::new(&engine);
                wasmtime_wasi::p2::add_to_linker_async(&mut linker)
                    .map_err(|e| loaded.error("", format!("{e:#}")))?;
                bindings::add_to_linker(&mut linker)
                    .map_err(|e| loaded.error("", format!("{e:#}")))?;
                (engine, slots, Arc::new(linker))
            }
        };
        let cache = cache::CompileCache::new(if config.cache.enabled {
            config
                .cache
                .dir
                .clone()
                .or_else(cache::CompileCache::default_dir)
        } else {
            None
        });
        if previous.is_none() {
            cache.prune(&engine);
        }
        let loader = Arc::new(Loader {
            loaded: loaded.clone(),
            engine: engine.clone(),
            slots: slots.clone(),
            linker: linker.clone(),
            cache,
        });

        let mut plugins = BTreeMap::new();
        let mut identities = BTreeMap::new();
        let mut jobs = Vec::new();
        for (name, spec) in &config.plugins {
            let job = match Job::of(loaded, name, spec) {
                Ok(job) => job,
                // At a first start of `serve`, a registry that cannot be
                // reached (and nothing cached) fails that plugin only.
                Err(Unavailable::Unreachable(error)) if mode == Mode::Serving => {
                    notice!(
                        "chorus: plugin `{name}` did not load; the pipelines that use it fail: {error}"
                    );
                    plugins.insert(name.clone(), Slot::Deferred(Deferred::failed(error)));
                    continue;
                }
                Err(Unavailable::Unreachable(error) | Unavailable::Refused(error)) => {
                    return Err(error);
                }
            };
            identities.insert(name.clone(), Identity::of(&job));
            if let Some(slot) = previous.and_then(|p| p.reusable(&job)) {
                plugins.insert(name.clone(), slot);
            } else if mode != Mode::Everything && spec.is_shipped() && loader.is_ready(&job) {
                let kind = job.builtin.as_deref().and_then(builtin).map(|b| b.kind);
                let deferred = Deferred::on_first_use(kind, loader.clone(), job);
                plugins.insert(name.clone(), Slot::Deferred(deferred));
            } else {
                jobs.push(job);
            }
        }

        // Everything ready-made loads now (milliseconds each); what must be
        // compiled, too, unless it is left to the background.
        let outcomes = in_parallel(jobs, |job| {
            let started = Instant::now();
            match loader.ready_made(&job) {
                Some((component, source)) => loader
                    .finish(&job, component, source, started)
                    .map(Step::Loaded),
                None if mode == Mode::Serving => Ok(Step::Later(Box::new(job))),
                None => loader.compile(&job, started).map(Step::Loaded),
            }
        });
        let mut fresh = Vec::new();
        let mut background = Vec::new();
        for outcome in outcomes {
            match outcome? {
                Step::Loaded(plugin) => {
                    fresh.push(plugin.clone());
                    plugins.insert(plugin.name.clone(), Slot::Ready(plugin));
                }
                Step::Later(job) => {
                    let deferred = Deferred::compiling(component::declared_kind(&job.wasm));
                    plugins.insert(job.name.clone(), Slot::Deferred(deferred.clone()));
                    background.push((*job, deferred));
                }
            }
        }
        if let Some((name, error)) = validate_settings(&fresh) {
            return Err(settings_refused(loaded, &name, error));
        }
        if !background.is_empty() {
            compile_in_background(loader, background);
        }
        Ok(Self {
            plugins,
            identities,
            sizing,
            engine,
            slots,
            linker,
        })
    }

    /// The plugin of `previous` that `job` would load again, as it is (a
    /// first-use load not done yet is shared: it loads once, for both).
    fn reusable(&self, job: &Job) -> Option<Slot> {
        if self.identities.get(&job.name) != Some(&Identity::of(job)) {
            return None;
        }
        let outcome = match self.plugins.get(&job.name)? {
            Slot::Ready(plugin) => return Some(Slot::Ready(plugin.clone())),
            Slot::Deferred(deferred) => match (deferred.pending, deferred.outcome()) {
                (Pending::FirstUse, None) => return Some(Slot::Deferred(deferred.clone())),
                (_, Some(outcome)) => outcome,
                // A reload runs off the runtime: it may wait for the
                // compile under way rather than start the same one again.
                (Pending::Compiling, None) => deferred.wait_blocking(),
            },
        };
        outcome
            .as_ref()
            .ok()
            .map(|plugin| Slot::Ready(plugin.clone()))
    }

    /// Whether both run on one engine (a reload keeps it unless the
    /// instance pool had to be sized anew).
    pub fn same_engine(&self, other: &Registry) -> bool {
        Engine::same(&self.engine, &other.engine)
    }

    /// Whether `other` holds the plugin `name` as this registry does: the
    /// same one, loaded or not (what a reload kept).
    pub fn kept(&self, other: &Registry, name: &str) -> bool {
        match (self.plugins.get(name), other.plugins.get(name)) {
            (Some(mine), Some(theirs)) => mine.same(theirs),
            _ => false,
        }
    }

    /// The plugin `name`, if it is loaded (not still to load, not failed).
    pub fn get(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.plugins.get(name)?.loaded()
    }

    /// Whether the plugin `name` (if the configuration has it) can be called.
    pub fn availability(&self, name: &str) -> Option<Availability<'_>> {
        Some(match self.plugins.get(name)? {
            Slot::Ready(plugin) => Availability::Ready(plugin),
            Slot::Deferred(deferred) => match (deferred.outcome(), deferred.pending) {
                (None, Pending::Compiling) => Availability::Loading,
                (None, Pending::FirstUse) => Availability::Unloaded,
                (Some(Ok(plugin)), _) => Availability::Ready(plugin),
                (Some(Err(error)), _) => Availability::Failed(error),
            },
        })
    }

    /// The kind of plugin `name` is, whether or not it has loaded; `None`
    /// for one whose component could not be read.
    pub fn kind(&self, name: &str) -> Option<Kind> {
        match self.plugins.get(name)? {
            Slot::Ready(plugin) => Some(plugin.kind),
            Slot::Deferred(deferred) => deferred.kind,
        }
    }

    /// Loads each of `names` that waits for its first use, and waits until
    /// each is loaded or has failed to (at once for those loaded already).
    pub async fn settled(&self, names: &[&str]) {
        let deferred: Vec<&Arc<Deferred>> = names
            .iter()
            .filter_map(|name| match self.plugins.get(*name) {
                Some(Slot::Deferred(deferred)) => Some(deferred),
                _ => None,
            })
            .collect();
        // All started first: they load side by side.
        for each in &deferred {
            each.start();
        }
        for each in deferred {
            each.wait().await;
        }
    }

    /// Every plugin's name, loaded or not.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.plugins.keys().map(String::as_str)
    }

    /// The loaded plugins (after `load`: all of them).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Plugin>> {
        self.plugins.values().filter_map(Slot::loaded)
    }
}

/// A refusal of `name`'s settings, as loading reports it.
fn settings_refused(loaded: &Loaded, name: &str, error: PluginError) -> ConfigError {
    let message = match error {
        PluginError::Failed { message, .. } => {
            format!("plugin `{name}` refused its settings: {message}")
        }
        other => format!("while checking its settings, {other}"),
    };
    loaded.error(format!("plugins.{name}.settings"), message)
}

/// Has each of `plugins` check its settings (a 0.1 plugin is instantiated
/// instead); the first refusal, if any. Runs on a short-lived runtime of its
/// own, so loading stays callable from plain code (`chorus check`) and from
/// inside a runtime alike.
fn validate_settings(plugins: &[Arc<Plugin>]) -> Option<(String, PluginError)> {
    if plugins.is_empty() {
        return None;
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .expect("a runtime for validating settings");
                runtime.block_on(async {
                    for plugin in plugins {
                        if let Err(e) = plugin.validate_settings().await {
                            return Some((plugin.name.clone(), e));
                        }
                    }
                    None
                })
            })
            .join()
            .expect("validating settings does not panic")
    })
}

/// wasmtime's message on one line (a parse error spells out byte arrays
/// over many): a refused reload is reported as one block.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A plugin's component bytes, their SHA-256, where they came from (for
/// messages), and the config key that names them.
type Sourced = (Cow<'static, [u8]>, [u8; 32], String, String);

#[cfg(test)]
mod tests;
