//! Loading a configuration's plugins: the process's engine and linker, the
//! built-in components, compiling (or fetching from the cache), reading and
//! checking the contract version, and linking against the host's imports.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

use super::bindings::{CONTRACT, host, prompter, selector, synthesizer};
use super::sandbox::{self, State};
use super::{Kind, Plugin, Pre, cache};
use crate::config::{ConfigError, Loaded};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
}

/// Names of the plugins compiled into chorus.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    builtin::BUILTINS.iter().map(|(name, _)| *name)
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
                    let bytes =
                        crate::config::read_regular_file(&full, crate::config::MAX_PLUGIN_BYTES)
                            .map_err(|e| {
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

#[cfg(test)]
mod tests;
