//! `[plugins.NAME]`: the strategy plugins (a built-in, a `.wasm` file or an
//! OCI reference) and what one call of each may use, with their defaults
//! and their check.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::check::{Invalid, MAX_TIMEOUT, duration};

/// A strategy plugin: a WebAssembly component and its settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// One of the plugins compiled into chorus (see `chorus check`).
    #[serde(default)]
    pub builtin: Option<String>,
    /// A `.wasm` component, relative to this file.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// A component on an OCI registry: `oci://HOST/REPO@sha256:DIGEST`
    /// (or `:TAG`, pinned to the digest it resolves to), see the `oci` module.
    #[serde(default)]
    pub source: Option<String>,
    /// Handed to the plugin as a JSON object on every call.
    #[serde(default)]
    pub settings: toml::Table,
    /// CPU time one call of this plugin may use (time waiting for the host's
    /// model calls does not count).
    #[serde(default = "defaults::cpu_time", with = "humantime_serde")]
    pub cpu_time: Duration,
    /// Memory one call may grow to, in MiB: all its linear memories and
    /// tables together.
    #[serde(default = "defaults::memory_mib")]
    pub max_memory_mib: u32,
    /// Wall-clock time one call may spend outside the model calls it asks
    /// the host for (sleeping or waiting counts; `cpu_time` bounds work).
    #[serde(default = "defaults::wall_time", with = "humantime_serde")]
    pub wall_time: Duration,
}

impl PluginSpec {
    /// Whether this is a built-in exactly as the built-in configuration
    /// (plugins.toml, compiled in) configures one of its entries: the same
    /// built-in, settings and limits. Such a plugin's settings are known to
    /// be accepted — chorus's own tests load that configuration — so
    /// `serve` can leave loading it until a run first needs it without
    /// moving a refusal from its start to that run.
    pub fn is_shipped(&self) -> bool {
        self.builtin.is_some() && shipped().iter().any(|spec| spec == self)
    }

    /// `Err((key, message))` for the first key of plugin `name` that is
    /// wrong.
    pub(super) fn check(&self, name: &str) -> Result<(), Invalid> {
        let key = |k: &str| format!("plugins.{name}.{k}");
        let named = [
            self.builtin.is_some(),
            self.path.is_some(),
            self.source.is_some(),
        ];
        match named.iter().filter(|n| **n).count() {
            1 => {}
            0 => {
                return Err((
                    format!("plugins.{name}"),
                    "set `builtin = \"...\"`, `path = \"plugin.wasm\"` or `source = \"oci://...\"`"
                        .into(),
                ));
            }
            _ => {
                return Err((
                    format!("plugins.{name}"),
                    "set one of `builtin`, `path` and `source`, not several".into(),
                ));
            }
        }
        if let Some(source) = &self.source {
            super::oci_reference::Reference::parse(source).map_err(|e| (key("source"), e))?;
        }
        duration(&key("cpu_time"), self.cpu_time, Duration::from_secs(600))?;
        duration(&key("wall_time"), self.wall_time, MAX_TIMEOUT)?;
        if self.max_memory_mib == 0 || self.max_memory_mib > 4096 {
            return Err((key("max_memory_mib"), "must be between 1 and 4096".into()));
        }
        Ok(())
    }
}

/// The plugins of the built-in configuration, read from it once.
fn shipped() -> &'static [PluginSpec] {
    #[derive(Deserialize)]
    struct Shipped {
        #[serde(default)]
        plugins: std::collections::BTreeMap<String, PluginSpec>,
    }
    static SHIPPED: std::sync::OnceLock<Vec<PluginSpec>> = std::sync::OnceLock::new();
    SHIPPED.get_or_init(|| {
        toml::from_str::<Shipped>(super::BUILTIN_TOML)
            .map(|shipped| shipped.plugins.into_values().collect())
            .unwrap_or_default()
    })
}

mod defaults {
    use std::time::Duration;

    pub fn cpu_time() -> Duration {
        Duration::from_secs(2)
    }
    pub fn memory_mib() -> u32 {
        64
    }
    pub fn wall_time() -> Duration {
        Duration::from_secs(10)
    }
}
