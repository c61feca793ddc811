//! Configuration: reading plugins.toml, checking it, and the built-in default.
//!
//! Every error names the file, the key and what would be valid, because the
//! person reading it is usually looking at an MCP client's log, not a debugger.

mod schema;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

pub use schema::*;
pub use validate::{BUILTIN_OPTIONS, RESERVED_TOOLS, check_option};

/// The default configuration compiled into the binary: the repository's
/// plugins.toml, so `chorus serve` works from any working directory.
pub const BUILTIN_TOML: &str = include_str!("../../../plugins.toml");

/// Environment variable naming the config file when `--config` is not given.
pub const CONFIG_ENV: &str = "CHORUS_CONFIG";

/// A checked configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// Shown in messages: a path, or `<built-in plugins.toml>`.
    pub origin: String,
    /// Plugin paths are relative to this directory.
    pub base_dir: PathBuf,
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
        if let Some(path) = explicit {
            return Self::from_file(path);
        }
        match std::env::var_os(CONFIG_ENV) {
            Some(path) if !path.is_empty() => Self::from_file(Path::new(&path)),
            _ => Self::builtin(),
        }
    }

    pub fn builtin() -> Result<Self, ConfigError> {
        let base_dir = std::env::current_dir().unwrap_or_default();
        Self::parse(BUILTIN_TOML, "<built-in plugins.toml>", base_dir)
    }

    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: origin.clone(),
            key: String::new(),
            position: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        let base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        Self::parse(&text, &origin, base_dir)
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
        validate::validate(&config).map_err(|(key, message)| error(key, None, message))?;
        Ok(Self {
            config,
            origin: origin.to_owned(),
            base_dir,
        })
    }

    /// The error for a key that was well-formed but refers to something
    /// that turned out not to work (a plugin that does not load, say).
    pub fn error(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            origin: self.origin.clone(),
            key: key.into(),
            position: None,
            message: message.into(),
        }
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

fn position_of(text: &str, span: Option<std::ops::Range<usize>>) -> Option<(usize, usize)> {
    let start = span?.start.min(text.len());
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some((line, col))
}

#[cfg(test)]
mod tests;
