//! Configuration: reading plugins.toml, checking it, and the built-in default.
//!
//! Every error names the file, the key and what would be valid, because the
//! person reading it is usually looking at an MCP client's log, not a debugger.

mod schema;

use std::fmt;
use std::path::{Path, PathBuf};

pub use schema::*;

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
        validate(&config).map_err(|(key, message)| error(key, None, message))?;
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

/// Checks one option value against its spec; the message says what is wrong.
pub fn check_option(
    name: &str,
    spec: &OptionSpec,
    value: &serde_json::Value,
) -> Result<(), String> {
    let number = match (spec.kind, value) {
        (OptionType::Integer, serde_json::Value::Number(n)) if n.is_i64() || n.is_u64() => {
            n.as_f64()
        }
        (OptionType::Number, serde_json::Value::Number(n)) => n.as_f64(),
        (OptionType::String, serde_json::Value::String(_))
        | (OptionType::Boolean, serde_json::Value::Bool(_)) => None,
        _ => {
            return Err(format!(
                "`{name}` must be {} {}, got {value}",
                article(spec.kind),
                spec.kind.as_str()
            ));
        }
    };
    if let Some(n) = number
        && (spec.minimum.is_some_and(|min| n < min) || spec.maximum.is_some_and(|max| n > max))
    {
        let bound = |b: Option<f64>| b.map_or("…".to_owned(), |b| b.to_string());
        return Err(format!(
            "`{name}` must be between {} and {}, got {n}",
            bound(spec.minimum),
            bound(spec.maximum)
        ));
    }

    Ok(())
}

fn article(kind: OptionType) -> &'static str {
    if kind == OptionType::Integer {
        "an"
    } else {
        "a"
    }
}

fn position_of(text: &str, span: Option<std::ops::Range<usize>>) -> Option<(usize, usize)> {
    let start = span?.start.min(text.len());
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some((line, col))
}

type Invalid = (String, String);

fn validate(config: &Config) -> Result<(), Invalid> {
    let names = |keys: &mut dyn Iterator<Item = &String>| {
        let list: Vec<&str> = keys.map(String::as_str).collect();
        if list.is_empty() {
            "none".to_owned()
        } else {
            list.join(", ")
        }
    };
    if config.providers.is_empty() {
        return Err((
            "providers".into(),
            "define at least one provider, e.g. [providers.openrouter]".into(),
        ));
    }
    if config.pipelines.is_empty() {
        return Err((
            "pipelines".into(),
            "define at least one pipeline, e.g. [pipelines.ask]".into(),
        ));
    }
    let limits = &config.limits;
    for (key, zero) in [
        ("limits.max_prompt_bytes", limits.max_prompt_bytes == 0),
        ("limits.run_timeout", limits.run_timeout.is_zero()),
        ("limits.max_calls_per_run", limits.max_calls_per_run == 0),
        ("limits.max_runs_kept", limits.max_runs_kept == 0),
    ] {
        if zero {
            return Err((key.into(), "must be greater than zero".into()));
        }
    }

    for (name, p) in &config.providers {
        let key = |k: &str| format!("providers.{name}.{k}");
        if !matches!(p.base_url.scheme(), "http" | "https") {
            return Err((
                key("base_url"),
                format!("must be an http:// or https:// URL, got `{}`", p.base_url),
            ));
        }
        if p.base_url.cannot_be_a_base() || p.base_url.host().is_none() {
            return Err((key("base_url"), format!("`{}` has no host", p.base_url)));
        }
        if let Some(var) = &p.api_key_env
            && (var.is_empty() || var.contains('=') || var.contains('\0'))
        {
            return Err((
                key("api_key_env"),
                format!("`{var}` is not an environment variable name"),
            ));
        }
        if p.max_concurrency == 0 {
            return Err((key("max_concurrency"), "must be at least 1".into()));
        }
        if p.retry.max_attempts == 0 {
            return Err((
                key("retry.max_attempts"),
                "must be at least 1 (1 means no retries)".into(),
            ));
        }
        if p.max_response_bytes == 0 {
            return Err((
                key("max_response_bytes"),
                "must be greater than zero".into(),
            ));
        }
        for (k, zero) in [
            ("connect_timeout", p.connect_timeout.is_zero()),
            ("request_timeout", p.request_timeout.is_zero()),
            ("read_timeout", p.read_timeout.is_zero()),
        ] {
            if zero {
                return Err((key(k), "must be greater than zero".into()));
            }
        }
        for (header, value) in &p.headers {
            let name_ok = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !name_ok {
                return Err((
                    key(&format!("headers.{header}")),
                    "is not a valid HTTP header name".into(),
                ));
            }
            if value.bytes().any(|b| b.is_ascii_control()) {
                return Err((
                    key(&format!("headers.{header}")),
                    "has control characters in its value".into(),
                ));
            }
        }
    }

    for (id, model) in &config.models {
        match &model.provider {
            Some(p) if !config.providers.contains_key(p) => {
                return Err((
                    format!("models.\"{id}\".provider"),
                    format!(
                        "no provider named `{p}` (defined: {})",
                        names(&mut config.providers.keys())
                    ),
                ));
            }
            None if config.providers.len() > 1 => {
                return Err((
                    format!("models.\"{id}\".provider"),
                    format!(
                        "required when there is more than one provider (defined: {})",
                        names(&mut config.providers.keys())
                    ),
                ));
            }
            _ => {}
        }
        for (k, price) in [
            ("input_price", model.input_price),
            ("output_price", model.output_price),
        ] {
            if price.is_some_and(|p| !p.is_finite() || p < 0.0) {
                return Err((
                    format!("models.\"{id}\".{k}"),
                    "must be a price in USD per million tokens, zero or more".into(),
                ));
            }
        }
    }

    for (name, plugin) in &config.plugins {
        let key = |k: &str| format!("plugins.{name}.{k}");
        match (&plugin.builtin, &plugin.path) {
            (Some(_), Some(_)) => {
                return Err((
                    format!("plugins.{name}"),
                    "set either `builtin` or `path`, not both".into(),
                ));
            }
            (None, None) => {
                return Err((
                    format!("plugins.{name}"),
                    "set `builtin = \"...\"` or `path = \"plugin.wasm\"`".into(),
                ));
            }
            _ => {}
        }
        if plugin.cpu_time.is_zero() {
            return Err((key("cpu_time"), "must be greater than zero".into()));
        }
        if plugin.max_memory_mib == 0 || plugin.max_memory_mib > 4096 {
            return Err((key("max_memory_mib"), "must be between 1 and 4096".into()));
        }
    }

    for (name, pipeline) in &config.pipelines {
        let valid_tool_name = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_tool_name {
            return Err((
                format!("pipelines.{name}"),
                "a pipeline name becomes an MCP tool name: use 1-64 letters, digits, `_` or `-`"
                    .into(),
            ));
        }
        for (role, plugin) in [
            ("selector", &pipeline.selector),
            ("prompter", &pipeline.prompter),
            ("synthesizer", &pipeline.synthesizer),
        ] {
            if !config.plugins.contains_key(plugin) {
                return Err((
                    format!("pipelines.{name}.{role}"),
                    format!(
                        "no plugin named `{plugin}` (defined: {})",
                        names(&mut config.plugins.keys())
                    ),
                ));
            }
        }
        for (option, spec) in &pipeline.options {
            let key = format!("pipelines.{name}.options.{option}");
            let valid_name = option != "prompt"
                && !option.is_empty()
                && option
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid_name {
                return Err((
                    key,
                    "an option name is letters, digits and `_`, and not `prompt`".into(),
                ));
            }
            if let (Some(min), Some(max)) = (spec.minimum, spec.maximum)
                && min > max
            {
                return Err((key, format!("minimum ({min}) is above maximum ({max})")));
            }
            if let Some(default) = &spec.default {
                let value = serde_json::to_value(default).unwrap_or_default();
                crate::config::check_option(option, spec, &value)
                    .map_err(|m| (format!("{key}.default"), m))?;
            }
        }
        if pipeline.run_timeout.is_some_and(|t| t.is_zero()) {
            return Err((
                format!("pipelines.{name}.run_timeout"),
                "must be greater than zero".into(),
            ));
        }
    }

    if let Some(default) = &config.default_pipeline
        && !config.pipelines.contains_key(default)
    {
        return Err((
            "default_pipeline".into(),
            format!(
                "no pipeline named `{default}` (defined: {})",
                names(&mut config.pipelines.keys())
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
