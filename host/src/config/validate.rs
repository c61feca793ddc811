//! The checks serde cannot express: references between sections, ranges,
//! names that must be valid elsewhere (MCP tool names, HTTP headers). Each
//! failure is `(key, message)`; the caller adds the file and position.

use super::{Config, OptionSpec, OptionType};

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

type Invalid = (String, String);

pub(super) fn validate(config: &Config) -> Result<(), Invalid> {
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
        (
            "limits.max_concurrent_runs",
            limits.max_concurrent_runs == 0,
        ),
    ] {
        if zero {
            return Err((key.into(), "must be greater than zero".into()));
        }
    }

    if limits.max_concurrent_runs > 1024 {
        return Err((
            "limits.max_concurrent_runs".into(),
            "must be at most 1024 (each run reserves a slot of the plugins' instance pool)".into(),
        ));
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
        if plugin.wall_time.is_zero() {
            return Err((key("wall_time"), "must be greater than zero".into()));
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
                check_option(option, spec, &value).map_err(|m| (format!("{key}.default"), m))?;
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
