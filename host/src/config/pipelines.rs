//! `[pipelines.NAME]`: a pipeline is one MCP tool (selector -> prompter ->
//! fan-out -> synthesizer) with its options; here its schema, the check of
//! a pipeline on its own (its name, options and times) and of an option's
//! value. What it names in other sections (plugins, models) is checked in
//! `validate.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::FanOutOverride;
use super::check::{Invalid, MAX_TIMEOUT, duration, duration_or_zero, search_results};

/// Tools chorus provides next to the pipelines' own.
pub const RESERVED_TOOLS: &[&str] = &["resynthesize", "feedback"];

/// Options every pipeline takes, handled by chorus rather than the plugins.
pub const BUILTIN_OPTIONS: &[&str] = &["max_cost_usd", "follow_up_of", "web_search"];

/// A pipeline is one MCP tool: selector -> prompter -> fan-out -> synthesizer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// What the tool does, as the MCP client's model will read it.
    pub description: String,
    pub selector: String,
    pub prompter: String,
    pub synthesizer: String,
    /// Overrides `limits.run_timeout` for this pipeline.
    #[serde(default, with = "humantime_serde")]
    pub run_timeout: Option<Duration>,
    /// Overrides keys of the top-level `[fan_out]` for this pipeline.
    #[serde(default)]
    pub fan_out: FanOutOverride,
    /// What the tool takes besides `prompt`; checked by chorus and handed
    /// to every plugin of the run as `request.options`.
    #[serde(default)]
    pub options: BTreeMap<String, OptionSpec>,
    /// Overrides `models."ID".fallbacks` for this pipeline's runs:
    /// `{ "ID" = ["fallback", …] }` (an empty list: no fallback here).
    #[serde(default)]
    pub fallbacks: BTreeMap<String, Vec<String>>,
    /// Every panel member of this pipeline's runs searches the web (a
    /// call's `web_search` argument can switch it on too).
    #[serde(default)]
    pub web_search: bool,
    /// Most search results each searching call reads.
    #[serde(default)]
    pub web_search_max_results: Option<u32>,
    /// `"low"`, `"medium"` or `"high"`.
    #[serde(default)]
    pub web_search_context: Option<super::search::SearchContext>,
    /// What a panel member that cannot take an attachment's kind gets.
    #[serde(default)]
    pub attachments_for_text_models: ForTextModels,
    /// The model (of [models]) that describes attachments for those that
    /// cannot see them; the cheapest that can see them all when unset.
    #[serde(default)]
    pub describer: Option<String>,
    /// With `[cache] responses` set: this pipeline's sampled requests
    /// (temperature unset or above 0, no seed) are answered from the
    /// response cache too, so a repeated run gets the same sample.
    #[serde(default)]
    pub cache_sampled: bool,
}

/// `attachments_for_text_models`: what a panel member gets when it cannot
/// take an attachment's kind (an image, a PDF, audio).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForTextModels {
    /// It is left out of the panel; the notes and the call list say why.
    Skip,
    /// A model that can see the attachments first describes them; the
    /// member gets the description, marked as one.
    #[default]
    Describe,
    /// The run fails at planning, before anything is spent.
    Fail,
}

impl ForTextModels {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::Describe => "describe",
            Self::Fail => "fail",
        }
    }
}

/// One option of a pipeline's tool.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionSpec {
    #[serde(rename = "type")]
    pub kind: OptionType,
    /// Shown to the MCP client's model: keep it short.
    pub description: String,
    #[serde(default)]
    pub minimum: Option<f64>,
    #[serde(default)]
    pub maximum: Option<f64>,
    /// Used when the call leaves the option out; without one the plugin
    /// sees no value and applies its own default.
    #[serde(default)]
    pub default: Option<toml::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionType {
    Integer,
    Number,
    String,
    Boolean,
}

impl OptionType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Integer => "integer",
            Self::Number => "number",
            Self::String => "string",
            Self::Boolean => "boolean",
        }
    }
}

impl Pipeline {
    /// `Err((key, message))` for the first key of pipeline `name` that is
    /// wrong on its own: its name (an MCP tool's), options and times.
    pub(super) fn check(&self, name: &str) -> Result<(), Invalid> {
        search_results(
            &format!("pipelines.{name}.web_search_max_results"),
            self.web_search_max_results,
        )?;
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
        if RESERVED_TOOLS.contains(&name) {
            return Err((
                format!("pipelines.{name}"),
                format!("`{name}` is the name of a tool chorus provides itself: choose another"),
            ));
        }
        for (option, spec) in &self.options {
            check_option_spec(&format!("pipelines.{name}.options.{option}"), option, spec)?;
        }
        if let Some(timeout) = self.run_timeout {
            duration(
                &format!("pipelines.{name}.run_timeout"),
                timeout,
                MAX_TIMEOUT,
            )?;
        }
        if let Some(grace) = self.fan_out.straggler_grace {
            duration_or_zero(
                &format!("pipelines.{name}.fan_out.straggler_grace"),
                grace,
                MAX_TIMEOUT,
            )?;
        }
        Ok(())
    }
}

/// An option's name, bounds and default, `key` being where it is written.
fn check_option_spec(key: &str, option: &str, spec: &OptionSpec) -> Result<(), Invalid> {
    if BUILTIN_OPTIONS.contains(&option) {
        return Err((
            key.into(),
            format!("`{option}` is an option every pipeline takes already; choose another name"),
        ));
    }
    let valid_name = option != "prompt"
        && !option.is_empty()
        && option
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid_name {
        return Err((
            key.into(),
            "an option name is letters, digits and `_`, and not `prompt`".into(),
        ));
    }
    if let (Some(min), Some(max)) = (spec.minimum, spec.maximum)
        && min > max
    {
        return Err((
            key.into(),
            format!("minimum ({min}) is above maximum ({max})"),
        ));
    }
    if let Some(default) = &spec.default {
        let value = serde_json::to_value(default).unwrap_or_default();
        check_option(option, spec, &value).map_err(|m| (format!("{key}.default"), m))?;
    }
    Ok(())
}

/// Checks one option value against its spec; the message says what is wrong.
pub fn check_option(
    name: &str,
    spec: &OptionSpec,
    value: &serde_json::Value,
) -> Result<(), String> {
    let number = match (spec.kind, value) {
        // JSON Schema's integer includes integral floats such as `2.0`.
        (OptionType::Integer, serde_json::Value::Number(n)) if integral(n).is_some() => n.as_f64(),
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

/// The integer `n` stands for, written as `2` or `2.0`.
pub fn integral(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0)
            .map(|f| f as i64)
    })
}

fn article(kind: OptionType) -> &'static str {
    if kind == OptionType::Integer {
        "an"
    } else {
        "a"
    }
}
