//! Configuration: reading plugins.toml, checking it, and the built-in default.
//!
//! Every error names the file, the key and what would be valid, because the
//! person reading it is usually looking at an MCP client's log, not a debugger.

mod cache;
mod check;
mod clients;
mod experiments;
mod fallbacks;
mod fan_out;
mod files;
mod follow;
mod http;
mod limits;
mod locate;
mod metrics;
mod models;
pub mod oci_reference;
mod origin;
mod overrides;
mod pipelines;
mod plugins;
mod providers;
mod schema;
mod search;
mod store;
mod telemetry;
mod tls;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use cache::Cache;
pub use check::Invalid;
pub use clients::{HttpClient, LOCAL, SHARED_TOKEN, reserved, sha256_hex};
pub use experiments::{
    DEFAULT_CONFIDENCE, DEFAULT_GUARDRAIL_RUNS, DEFAULT_MIN_RATED, DEFAULT_MIN_SHARE, Experiment,
    Guardrails, Shadow,
};
pub use fallbacks::chains as fallback_chains;
pub use fan_out::{FanOut, FanOutOverride, MergeReserve, Quorum};
pub use files::{MAX_CONFIG_BYTES, MAX_PLUGIN_BYTES, read_regular_file};
pub use http::Http;
pub use limits::Limits;
pub use metrics::{Metric, MetricKind, Optimize};
pub use models::{MODALITIES, Model};
pub use origin::{Source, user_config_path};
pub use overrides::{
    BASE_URL_ENV, MODELS_ENV, Overrides, PANEL_PLUGIN, PIPELINE_ENV, SYNTHESIZER_ENV, model_list,
};
pub use pipelines::{
    BUILTIN_OPTIONS, ForTextModels, OptionSpec, OptionType, Pipeline, RESERVED_TOOLS, check_option,
    integral,
};
pub use plugins::PluginSpec;
pub use providers::{FORBIDDEN_HEADERS, Provider, Retry};
pub use schema::Config;
pub use search::{SearchContext, SearchStyle};
pub use store::Store;
pub use telemetry::{Telemetry, otlp_url};
pub use tls::Tls;

/// The default configuration compiled into the binary: the repository's
/// plugins.toml, so `chorus serve` works from any working directory.
pub const BUILTIN_TOML: &str = include_str!("../../../plugins.toml");

/// Environment variable naming the config file when `--config` is not given.
pub const CONFIG_ENV: &str = "CHORUS_CONFIG";
/// A PostgreSQL run store's URL, over `[store] url`.
pub const STORE_URL_ENV: &str = "CHORUS_STORE_URL";

/// A checked configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// Shown in messages: a path, or `<built-in plugins.toml>`.
    pub origin: String,
    /// Plugin paths are relative to this directory.
    pub base_dir: PathBuf,
    /// The text it was parsed from, to locate keys in later errors.
    pub text: Arc<str>,
    /// The file it was read from; `None` for the built-in default. What
    /// `chorus serve` watches and reloads.
    pub path: Option<PathBuf>,
    /// Why this configuration was the one read.
    pub source: Source,
    /// What the command line and environment changed (applied already;
    /// kept to apply again on reload).
    pub overrides: Overrides,
}

/// A problem with the configuration, located as precisely as we can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub origin: String,
    /// Dotted key path, e.g. `providers.openrouter.retry.max_attempts`.
    pub key: String,
    /// 1-based line and column, when the parser knows them.
    pub position: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": `{}`", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Loaded {
    /// Finds the configuration the way `serve` and `ask` do: an explicit
    /// path, else `$CHORUS_CONFIG`, else the built-in default.
    pub fn discover(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let (loaded, source) = if let Some(path) = explicit {
            (Self::from_file(path)?, Source::Flag)
        } else {
            match std::env::var_os(CONFIG_ENV) {
                Some(path) if !path.is_empty() => (Self::from_file(Path::new(&path))?, Source::Env),
                _ => match user_config_path().filter(|p| p.is_file()) {
                    Some(path) => (Self::from_file(&path)?, Source::UserFile),
                    None => (Self::builtin()?, Source::BuiltIn),
                },
            }
        };
        Ok(Self { source, ..loaded })
    }

    /// Checks the configuration again after it was changed in memory (a
    /// reload that keeps what only a restart can change): the rest must
    /// still fit what was kept.
    pub fn check_again(&self) -> Result<(), ConfigError> {
        validate::validate(&self.config).map_err(|(key, message)| self.error(key, message))
    }

    /// Applies what the command line and environment say (see
    /// [`Overrides`]), then checks the result as a file is checked.
    pub fn with_overrides(mut self, overrides: &Overrides) -> Result<Self, ConfigError> {
        if overrides.is_empty() {
            return Ok(self);
        }
        let applied = overrides
            .apply(&mut self.config)
            .and_then(|()| validate::validate(&self.config));
        if let Err((key, message)) = applied {
            return Err(ConfigError {
                origin: format!("{} with the command line's settings", self.origin),
                key,
                position: None,
                message,
            });
        }
        self.overrides = overrides.clone();
        Ok(self)
    }

    pub fn builtin() -> Result<Self, ConfigError> {
        let base_dir = std::env::current_dir().unwrap_or_default();
        Self::parse(BUILTIN_TOML, "<built-in plugins.toml>", base_dir)
    }

    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let unreadable = |message: String| ConfigError {
            origin: origin.clone(),
            key: String::new(),
            position: None,
            message: format!("cannot read the config file: {message}"),
        };
        let bytes = read_regular_file(path, MAX_CONFIG_BYTES).map_err(unreadable)?;
        let text = String::from_utf8(bytes)
            .map_err(|e| unreadable(format!("it is not UTF-8 text ({e})")))?;
        let base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        let mut loaded = Self::parse(&text, &origin, base_dir)?;
        loaded.path = Some(path.to_path_buf());
        Ok(loaded)
    }

    pub fn parse(text: &str, origin: &str, base_dir: PathBuf) -> Result<Self, ConfigError> {
        let error = |key: String, position, message: String| ConfigError {
            origin: origin.to_owned(),
            key,
            position,
            message,
        };
        let deserializer = toml::Deserializer::parse(text).map_err(|e| {
            error(
                String::new(),
                position_of(text, e.span()),
                e.message().to_owned(),
            )
        })?;
        let config: Config = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let key = if key == "." { String::new() } else { key };
            error(
                key,
                position_of(text, inner.span()),
                inner.message().to_owned(),
            )
        })?;
        validate::validate(&config).map_err(|(key, message)| {
            let position = locate::position(text, &key);
            error(key, position, message)
        })?;
        // Here, not in `validate`: the files are relative to the config's.
        config.tls.roots(&base_dir).map_err(|(key, message)| {
            let position = locate::position(text, &key);
            error(key, position, message)
        })?;
        let mut config = config;
        if let Some(url) = std::env::var(STORE_URL_ENV)
            .ok()
            .filter(|u| !u.trim().is_empty())
        {
            config.store.url = Some(url.trim().to_owned());
        }
        Ok(Self {
            config,
            origin: origin.to_owned(),
            base_dir,
            text: Arc::from(text),
            path: None,
            source: Source::BuiltIn,
            overrides: Overrides::default(),
        })
    }

    /// The error for a key that was well-formed but refers to something
    /// that turned out not to work (a plugin that does not load, say).
    pub fn error(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        let key = key.into();
        ConfigError {
            origin: self.origin.clone(),
            position: self.position(&key),
            key,
            message: message.into(),
        }
    }

    /// Where `key` is written in the configuration, if it is.
    pub fn position(&self, key: &str) -> Option<(usize, usize)> {
        locate::position(&self.text, key)
    }

    /// Where caches (compiled plugins, model catalogs) go: `[cache] dir`,
    /// else `$XDG_CACHE_HOME/chorus`, else `~/.cache/chorus`; `None` when
    /// caching is off.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        let cache = &self.config.cache;
        if !cache.enabled {
            return None;
        }
        cache.dir.clone().or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME")
                        .filter(|d| !d.is_empty())
                        .map(|h| Path::new(&h).join(".cache"))
                })
                .map(|base| base.join("chorus"))
        })
    }

    /// The pipeline `chorus ask` runs by default.
    pub fn default_pipeline(&self) -> Option<&str> {
        match &self.config.default_pipeline {
            Some(name) => Some(name),
            None if self.config.pipelines.len() == 1 => {
                self.config.pipelines.keys().next().map(String::as_str)
            }
            None => None,
        }
    }

    /// The provider that serves `model`.
    pub fn provider_of<'a>(&'a self, model: &'a Model) -> &'a str {
        match &model.provider {
            Some(p) => p,
            // validate() guarantees exactly one provider in this case.
            None => self.config.providers.keys().next().map_or("", |p| p),
        }
    }
}

/// A duration the way plugins.toml writes it: `300s`, `500ms`, `1.5s`.
pub fn show_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d.as_nanos().is_multiple_of(1_000_000) && d < Duration::from_secs(10) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.3}s", d.as_secs_f64())
            .trim_end_matches('0')
            .to_owned()
    }
}

fn position_of(text: &str, span: Option<std::ops::Range<usize>>) -> Option<(usize, usize)> {
    let before = crate::text::cut_at_char_boundary(text, span?.start);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some((line, col))
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_sections;
