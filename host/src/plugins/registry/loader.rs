//! Compiling a configuration's components: what one plugin's load needs
//! (`Job`), the loader the threads share, several at once at start, the
//! deferred ones in the background at a first start of `serve`, and one
//! on its first use.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::component::{component_of, contract_of, serving};
use super::slot::Deferred;
use super::{builtin_precompiled, one_line, settings_refused, validate_settings};
use crate::config::{ConfigError, Loaded};
use crate::notice::notice;
use crate::plugins::bindings::Guest;
use crate::plugins::engine::Slots;
use crate::plugins::oci_source::Unavailable;
use crate::plugins::sandbox::{CallLimits, State};
use crate::plugins::{Plugin, cache};

/// One plugin to load: its component and what it is configured with.
pub(super) struct Job {
    pub(super) name: String,
    /// A built-in's is borrowed from the binary: untouched (not paged in)
    /// unless it must be compiled.
    pub(super) wasm: Cow<'static, [u8]>,
    pub(super) digest: [u8; 32],
    /// `builtin:NAME` or the file path, for messages.
    pub(super) origin: String,
    /// The config key that names the component.
    pub(super) key: String,
    pub(super) builtin: Option<String>,
    pub(super) settings: String,
    pub(super) limits: CallLimits,
}

impl Job {
    pub(super) fn of(
        loaded: &Loaded,
        name: &str,
        spec: &crate::config::PluginSpec,
    ) -> Result<Self, Unavailable> {
        let (wasm, digest, origin, key) = component_of(loaded, name, spec)?;
        Ok(Self {
            name: name.to_owned(),
            digest,
            wasm,
            origin,
            key,
            builtin: spec.builtin.clone(),
            settings: serde_json::to_string(&spec.settings).unwrap_or_else(|_| "{}".to_owned()),
            limits: CallLimits {
                cpu_time: spec.cpu_time,
                wall_time: spec.wall_time,
                max_memory_mib: spec.max_memory_mib,
                max_batch: loaded.config.limits.max_calls_per_run,
            },
        })
    }
}

/// What loading a plugin needs, shared by the threads that load them.
#[derive(Clone)]
pub(super) struct Loader {
    pub(super) loaded: Loaded,
    pub(super) engine: Engine,
    pub(super) slots: Slots,
    pub(super) linker: Arc<Linker<State>>,
    pub(super) cache: cache::CompileCache,
}

impl Loader {
    /// Whether `job`'s code is there to be loaded without compiling: the
    /// build precompiled it, or the cache has an entry (checked when read).
    pub(super) fn is_ready(&self, job: &Job) -> bool {
        job.builtin
            .as_deref()
            .and_then(builtin_precompiled)
            .is_some()
            || self.cache.has(&self.engine, &job.digest)
    }

    /// `job` loaded — ready-made, or compiled — and its settings checked.
    pub(super) fn load_checked(&self, job: &Job) -> Result<Arc<Plugin>, ConfigError> {
        let started = Instant::now();
        let plugin = match self.ready_made(job) {
            Some((component, source)) => self.finish(job, component, source, started)?,
            None => self.compile(job, started)?,
        };
        match validate_settings(std::slice::from_ref(&plugin)) {
            Some((name, error)) => Err(settings_refused(&self.loaded, &name, error)),
            None => Ok(plugin),
        }
    }

    /// `job`'s component without compiling it: the code the build
    /// precompiled (through the cache), or a verified cache entry.
    pub(super) fn ready_made(&self, job: &Job) -> Option<(Component, cache::Source)> {
        let precompiled = job.builtin.as_deref().and_then(builtin_precompiled);
        if let Some(component) = precompiled.and_then(|code| {
            self.cache
                .precompiled(&self.engine, &job.name, &job.digest, code)
        }) {
            return Some((component, cache::Source::Precompiled));
        }
        let component = self.cache.cached(&self.engine, &job.digest)?;
        Some((component, cache::Source::Cached))
    }

    /// Compiles `job` (and caches it), and links it.
    pub(super) fn compile(&self, job: &Job, started: Instant) -> Result<Arc<Plugin>, ConfigError> {
        let (component, source) = self
            .cache
            .compile(&self.engine, &job.name, &job.wasm, &job.digest)
            .map_err(|e| {
                self.loaded.error(
                    &job.key,
                    format!(
                        "{} is not a loadable WebAssembly component: {}",
                        job.origin,
                        one_line(&format!("{e:#}"))
                    ),
                )
            })?;
        self.finish(job, component, source, started)
    }

    /// The plugin from its compiled component: its contract read, the
    /// bindings that serve it chosen, linked against the host's imports.
    pub(super) fn finish(
        &self,
        job: &Job,
        component: Component,
        source: cache::Source,
        started: Instant,
    ) -> Result<Arc<Plugin>, ConfigError> {
        let (name, origin, key) = (&job.name, &job.origin, &job.key);
        cache::prepare_images(&component, name);
        let (kind, contract) = contract_of(&self.engine, &component)
            .map_err(|m| self.loaded.error(key, format!("{origin}: {m}")))?;
        let serving =
            serving(&contract).map_err(|m| self.loaded.error(key, format!("{origin}: {m}")))?;
        let guest = self
            .linker
            .instantiate_pre(&component)
            .and_then(|pre| Guest::new(pre, kind, serving))
            .map_err(|e| {
                let why = one_line(&format!("{e:#}"));
                self.loaded
                    .error(key, format!("{origin} cannot be linked: {why}"))
            })?;
        let plugin = Plugin {
            name: name.clone(),
            kind,
            contract,
            origin: origin.clone(),
            source,
            load_time: started.elapsed(),
            settings: job.settings.clone(),
            limits: job.limits,
            engine: self.engine.clone(),
            slots: self.slots.clone(),
            guest,
        };
        tracing::debug!(plugin = %name, kind = %kind, source = ?source, "loaded in {:?}", plugin.load_time);
        Ok(Arc::new(plugin))
    }
}

/// Loads `job` (see [`Loader::load_checked`]) and settles `deferred` with
/// the outcome. A plugin that fails says so on stderr as a failed start
/// would have: only the calls that need it fail.
pub(super) fn load_and_settle(loader: &Loader, job: &Job, deferred: &Deferred) {
    let load = || loader.load_checked(job);
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(load)).unwrap_or_else(|_| {
            Err(loader
                .loaded
                .error(&job.key, "loading it failed unexpectedly (a panic)"))
        });
    if let Err(error) = &outcome {
        notice!(
            "chorus: plugin `{}` did not load; the pipelines that use it fail: {error}",
            job.name
        );
    }
    deferred.settle(outcome);
}

/// Compiles, links and validates each of `jobs` on a thread of its own
/// (a few at once), settling each one's slot as it is done.
pub(super) fn compile_in_background(loader: Arc<Loader>, jobs: Vec<(Job, Arc<Deferred>)>) {
    let waiting: Vec<(String, String, Arc<Deferred>)> = jobs
        .iter()
        .map(|(job, deferred)| (job.name.clone(), job.key.clone(), deferred.clone()))
        .collect();
    let loaded = loader.loaded.clone();
    let spawned = std::thread::Builder::new()
        .name("chorus-compile".into())
        .spawn(move || {
            let started = Instant::now();
            let count = jobs.len();
            in_parallel(jobs, |(job, deferred)| {
                load_and_settle(&loader, &job, &deferred)
            });
            tracing::debug!(
                "compiled {count} plugin(s) in the background in {:?}",
                started.elapsed()
            );
        });
    if let Err(e) = spawned {
        // Nothing will compile them: their calls fail rather than wait.
        for (name, key, deferred) in waiting {
            let error = loaded.error(&key, format!("cannot start a thread to compile it: {e}"));
            notice!("chorus: plugin `{name}` did not load: {error}");
            deferred.settle(Err(error));
        }
    }
}

/// How many components compile at once: one per core. (wasmtime spreads
/// the functions of one component over cores too, but a small component
/// has few, and its parse and link are serial.) `CHORUS_COMPILE_JOBS`
/// overrides it, to measure.
pub(super) fn compile_jobs() -> usize {
    std::env::var("CHORUS_COMPILE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(std::num::NonZeroUsize::get)
                .unwrap_or(1)
        })
}

/// `f` of each of `items`, in their order, on up to `compile_jobs()`
/// threads.
pub(super) fn in_parallel<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = compile_jobs().min(items.len());
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let count = items.len();
    let queue = std::sync::Mutex::new(items.into_iter().enumerate());
    let results = std::sync::Mutex::new(Vec::with_capacity(count));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some((i, item)) = next else { break };
                    let result = f(item);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}
