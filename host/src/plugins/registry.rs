//! Loading a configuration's plugins: the engine and linker, the built-in
//! components, compiling (or fetching from the verified cache), reading the
//! contract version and choosing the bindings that serve it, linking against
//! the host's imports, and validating each plugin's settings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::bindings::{self, CONTRACT, Guest, VERSIONS};
use super::engine::{self, Sizing, Slots};
use super::sandbox::{CallLimits, State};
use super::{Kind, Plugin, PluginError, cache};
use crate::config::{ConfigError, Loaded};

mod builtin {
    /// A plugin compiled into chorus (host/build.rs lists them).
    pub struct Builtin {
        pub name: &'static str,
        /// The WebAssembly component.
        pub component: &'static [u8],
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

/// The component of a built-in plugin.
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

/// Every plugin of a configuration, loaded, and the engine that runs them.
pub struct Registry {
    plugins: BTreeMap<String, Arc<Plugin>>,
    /// Each plugin's component, by SHA-256: what a reload compares.
    digests: BTreeMap<String, [u8; 32]>,
    sizing: Sizing,
    engine: Engine,
    slots: Slots,
    linker: Arc<Linker<State>>,
}

impl Registry {
    /// Loads (compiles or fetches from the cache) every plugin in the
    /// config, and has each check its settings.
    pub fn load(loaded: &Loaded) -> Result<Self, ConfigError> {
        Self::load_reusing(loaded, None)
    }

    /// Loads the plugins of `loaded`, taking from `previous` (the set being
    /// replaced by a reload) every plugin whose component, settings and
    /// limits are unchanged, as it is: compiled, linked and validated. The
    /// engine is kept too when its sizing is unchanged; runs in flight on
    /// `previous` are untouched either way.
    pub fn load_reusing(loaded: &Loaded, previous: Option<&Registry>) -> Result<Self, ConfigError> {
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

        let mut plugins = BTreeMap::new();
        let mut digests = BTreeMap::new();
        let mut fresh = Vec::new();
        for (name, spec) in &config.plugins {
            let started = Instant::now();
            let (wasm, origin, key) = component_of(loaded, name, spec)?;
            let digest: [u8; 32] = Sha256::digest(&wasm).into();
            let settings =
                serde_json::to_string(&spec.settings).unwrap_or_else(|_| "{}".to_owned());
            let limits = CallLimits {
                cpu_time: spec.cpu_time,
                wall_time: spec.wall_time,
                max_memory_mib: spec.max_memory_mib,
                max_batch: config.limits.max_calls_per_run,
            };
            digests.insert(name.clone(), digest);
            let kept = previous.and_then(|p| {
                let plugin = p.plugins.get(name)?;
                let same = p.digests.get(name) == Some(&digest)
                    && plugin.origin == origin
                    && plugin.settings == settings
                    && plugin.limits == limits;
                same.then(|| plugin.clone())
            });
            if let Some(plugin) = kept {
                plugins.insert(name.clone(), plugin);
                continue;
            }
            let precompiled = spec.builtin.as_deref().and_then(builtin_precompiled);
            let (component, source) =
                match precompiled.and_then(|code| cache::from_precompiled(&engine, name, code)) {
                    Some(component) => Ok((component, cache::Source::Precompiled)),
                    None => cache.load(&engine, name, &wasm, &digest),
                }
                .map_err(|e| {
                    loaded.error(
                        &key,
                        format!(
                            "{origin} is not a loadable WebAssembly component: {}",
                            one_line(&format!("{e:#}"))
                        ),
                    )
                })?;
            cache::prepare_images(&component, name);
            let (kind, contract) = contract_of(&engine, &component)
                .map_err(|m| loaded.error(&key, format!("{origin}: {m}")))?;
            let serving =
                serving(&contract).map_err(|m| loaded.error(&key, format!("{origin}: {m}")))?;
            let guest = linker
                .instantiate_pre(&component)
                .and_then(|pre| Guest::new(pre, kind, serving))
                .map_err(|e| {
                    let why = one_line(&format!("{e:#}"));
                    loaded.error(&key, format!("{origin} cannot be linked: {why}"))
                })?;
            let plugin = Plugin {
                name: name.clone(),
                kind,
                contract,
                origin,
                source,
                load_time: started.elapsed(),
                settings,
                limits,
                engine: engine.clone(),
                slots: slots.clone(),
                guest,
            };
            tracing::debug!(plugin = %name, kind = %kind, source = ?source, "loaded in {:?}", plugin.load_time);
            let plugin = Arc::new(plugin);
            fresh.push(plugin.clone());
            plugins.insert(name.clone(), plugin);
        }
        if let Some((name, error)) = validate_settings(&fresh) {
            let message = match error {
                PluginError::Failed { message, .. } => {
                    format!("plugin `{name}` refused its settings: {message}")
                }
                other => format!("while checking its settings, {other}"),
            };
            return Err(loaded.error(format!("plugins.{name}.settings"), message));
        }
        Ok(Self {
            plugins,
            digests,
            sizing,
            engine,
            slots,
            linker,
        })
    }

    /// Whether both run on one engine (a reload keeps it unless the
    /// instance pool had to be sized anew).
    pub fn same_engine(&self, other: &Registry) -> bool {
        Engine::same(&self.engine, &other.engine)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.plugins.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Plugin>> {
        self.plugins.values()
    }
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

/// A plugin's component bytes, where they came from (for messages), and
/// the config key that names them.
fn component_of(
    loaded: &Loaded,
    name: &str,
    spec: &crate::config::PluginSpec,
) -> Result<(Vec<u8>, String, String), ConfigError> {
    match (&spec.builtin, &spec.path) {
        (Some(builtin), _) => {
            let key = format!("plugins.{name}.builtin");
            let bytes = builtin_bytes(builtin).map(<[u8]>::to_vec).ok_or_else(|| {
                let known: Vec<_> = builtin_names().collect();
                loaded.error(
                    &key,
                    format!(
                        "no built-in plugin `{builtin}` (built in: {})",
                        known.join(", ")
                    ),
                )
            })?;
            Ok((bytes, format!("builtin:{builtin}"), key))
        }
        (None, Some(path)) => {
            let full: PathBuf = loaded.base_dir.join(path);
            let key = format!("plugins.{name}.path");
            let bytes = crate::config::read_regular_file(&full, crate::config::MAX_PLUGIN_BYTES)
                .map_err(|e| loaded.error(&key, format!("cannot read {}: {e}", full.display())))?;
            Ok((bytes, full.display().to_string(), key))
        }
        (None, None) => unreachable!("validated: a plugin has builtin or path"),
    }
}

/// Reads which world a component implements and which contract version it
/// was built for.
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
        if let Some(kind) = Kind::ALL.into_iter().find(|k| k.interface() == interface) {
            return Ok((kind, version.to_owned()));
        }
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

/// The contract version whose bindings serve a plugin built for `guest`:
/// the known version with the same major and minor and a patch at least
/// the guest's. Anything else is refused, naming both versions.
fn serving(guest: &str) -> Result<&'static str, String> {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.split('.');
        let version = (
            parts.next()?.parse().ok()?,
            parts.next()?.parse().ok()?,
            parts.next()?.parse().ok()?,
        );
        parts.next().is_none().then_some(version)
    };
    let served = VERSIONS.join(", ");
    let Some((major, minor, patch)) = parse(guest) else {
        return Err(format!(
            "it was built for chorus:strategy@{guest}, which is not a version chorus knows (this chorus speaks chorus:strategy@{CONTRACT}; it serves {served})"
        ));
    };
    let newest = parse(CONTRACT).expect("CONTRACT is a version");
    for known in VERSIONS.iter().rev() {
        let (kmajor, kminor, kpatch) = parse(known).expect("VERSIONS are versions");
        if (kmajor, kminor) == (major, minor) && kpatch >= patch {
            return Ok(known);
        }
    }
    if (major, minor, patch) > newest {
        Err(format!(
            "it was built for chorus:strategy@{guest}, but this chorus speaks chorus:strategy@{CONTRACT} (and serves {served}); upgrade chorus, or rebuild the plugin against wit/{CONTRACT}"
        ))
    } else {
        Err(format!(
            "it was built for chorus:strategy@{guest}, which this chorus no longer serves (it speaks chorus:strategy@{CONTRACT} and serves {served}); rebuild the plugin against wit/{CONTRACT}"
        ))
    }
}

#[cfg(test)]
mod tests;
