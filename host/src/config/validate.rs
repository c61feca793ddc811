//! The checks serde cannot express: references between sections, ranges,
//! names that must be valid elsewhere (MCP tool names, HTTP headers). Each
//! failure is `(key, message)`; the caller adds the file and position.

use std::time::Duration;

use super::{Config, MergeReserve, OptionSpec, OptionType, show_duration};

/// Headers chorus sets itself: framing (which the HTTP client must own) and
/// authorization (which comes from `api_key_env`, so it can be scrubbed).
pub const FORBIDDEN_HEADERS: [&str; 10] = [
    "authorization",
    "proxy-authorization",
    "content-length",
    "content-type",
    "transfer-encoding",
    "host",
    "connection",
    "te",
    "trailer",
    "upgrade",
];

/// Request-body fields chorus owns; `params` and `extra_body` may not set them.
const RESERVED_BODY_FIELDS: [&str; 3] = ["model", "messages", "stream"];

/// Upper bounds that keep every value usable in arithmetic and timers.
const DAY: Duration = Duration::from_secs(24 * 3600);
const MAX_TIMEOUT: Duration = DAY;
const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
const MAX_PROMPT_BYTES: usize = 64 << 20;
const MAX_RESPONSE_BYTES: usize = 256 << 20;
const MAX_CALLS_PER_RUN: u32 = 10_000;
const MAX_RUNS_KEPT: usize = 100_000;
const MAX_CONCURRENCY: usize = 1024;
const MAX_ATTEMPTS: u32 = 20;
const MAX_USD: f64 = 1_000_000.0;
const MAX_PRICE: f64 = 1_000_000.0;

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

type Invalid = (String, String);

/// Tools chorus provides next to the pipelines' own.
pub const RESERVED_TOOLS: &[&str] = &["resynthesize"];

/// Options every pipeline takes, handled by chorus rather than the plugins.
pub const BUILTIN_OPTIONS: &[&str] = &["max_cost_usd", "follow_up_of", "web_search"];

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
    count(
        "limits.max_prompt_bytes",
        limits.max_prompt_bytes,
        1,
        MAX_PROMPT_BYTES,
    )?;
    duration("limits.run_timeout", limits.run_timeout, MAX_TIMEOUT)?;
    count(
        "limits.max_calls_per_run",
        limits.max_calls_per_run as usize,
        1,
        MAX_CALLS_PER_RUN as usize,
    )?;
    count(
        "limits.max_runs_kept",
        limits.max_runs_kept,
        1,
        MAX_RUNS_KEPT,
    )?;
    duration_or_zero("limits.run_ttl", limits.run_ttl, MAX_TTL)?;
    duration("limits.task_ttl", limits.task_ttl, MAX_TTL)?;
    if let Some(lifetime) = config.cache.responses {
        duration("cache.responses", lifetime, MAX_TTL)?;
    }
    if let Some(usd) = limits.max_cost_usd
        && !(usd.is_finite() && usd > 0.0 && usd <= MAX_USD)
    {
        return Err((
            "limits.max_cost_usd".into(),
            format!("must be an amount in USD above 0 and at most {MAX_USD}, got {usd}"),
        ));
    }
    duration_or_zero(
        "fan_out.straggler_grace",
        config.fan_out.straggler_grace,
        MAX_TIMEOUT,
    )?;

    let http = &config.http;
    duration("http.header_timeout", http.header_timeout, MAX_TIMEOUT)?;
    count("http.max_connections", http.max_connections, 1, 1 << 20)?;
    count(
        "http.max_connections_per_peer",
        http.max_connections_per_peer,
        1,
        http.max_connections,
    )?;
    let drain = usize::try_from(http.drain_seconds).unwrap_or(usize::MAX);
    count("http.drain_seconds", drain, 0, 3600)?;
    super::clients::validate(config)?;

    let store = &config.store;
    for (key, zero) in [
        ("store.max_runs", store.max_runs == 0),
        ("store.max_bytes", store.max_bytes == 0),
        ("store.max_age", store.max_age.is_some_and(|a| a.is_zero())),
        (
            "store.path",
            store
                .path
                .as_ref()
                .is_some_and(|p| p.as_os_str().is_empty()),
        ),
    ] {
        if zero {
            return Err((
                key.into(),
                if key == "store.path" {
                    "must name a file (or leave it out for the default)".into()
                } else {
                    "must be greater than zero".into()
                },
            ));
        }
    }
    if let Some(url) = &store.url {
        store_url(url).map_err(|message| ("store.url".to_owned(), message))?;
    }
    if let Some(name) = &store.password_env
        && (name.is_empty() || name.contains('='))
    {
        return Err((
            "store.password_env".into(),
            "must name an environment variable (PGPASSWORD, say)".into(),
        ));
    }
    // Each run reserves a slot of the plugins' instance pool.
    count(
        "limits.max_concurrent_runs",
        limits.max_concurrent_runs as usize,
        1,
        MAX_CONCURRENCY,
    )?;

    for (name, p) in &config.providers {
        let key = |k: &str| format!("providers.{name}.{k}");
        if p.web_search_usd_per_request
            .is_some_and(|usd| !usd.is_finite() || !(0.0..=MAX_PRICE).contains(&usd))
        {
            return Err((
                key("web_search_usd_per_request"),
                format!("must be a price in USD per searching request, from 0 to {MAX_PRICE}"),
            ));
        }
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
        count(
            &key("max_concurrency"),
            p.max_concurrency,
            1,
            MAX_CONCURRENCY,
        )?;
        per_minute(&key("requests_per_minute"), p.requests_per_minute)?;
        per_minute(&key("tokens_per_minute"), p.tokens_per_minute)?;
        if p.retry.max_attempts == 0 || p.retry.max_attempts > MAX_ATTEMPTS {
            return Err((
                key("retry.max_attempts"),
                format!(
                    "must be from 1 to {MAX_ATTEMPTS} (1 means no retries), got {}",
                    p.retry.max_attempts
                ),
            ));
        }
        duration_or_zero(
            &key("retry.initial_backoff"),
            p.retry.initial_backoff,
            MAX_BACKOFF,
        )?;
        duration_or_zero(&key("retry.max_backoff"), p.retry.max_backoff, MAX_BACKOFF)?;
        count(
            &key("max_response_bytes"),
            p.max_response_bytes,
            1,
            MAX_RESPONSE_BYTES,
        )?;
        for (k, value) in [
            ("connect_timeout", p.connect_timeout),
            ("first_token_timeout", p.first_token_timeout),
            ("idle_timeout", p.idle_timeout),
            ("request_timeout", p.request_timeout),
        ] {
            duration(&key(k), value, MAX_TIMEOUT)?;
        }
        if let Some(ttl) = p.catalog_ttl {
            duration_or_zero(&key("catalog_ttl"), ttl, MAX_TTL)?;
        }
        for field in RESERVED_BODY_FIELDS {
            if p.extra_body.contains_key(field) {
                return Err((
                    key(&format!("extra_body.{field}")),
                    format!("`{field}` is set by chorus{}", stream_hint(field, name)),
                ));
            }
        }
        for (header, value) in &p.headers {
            if FORBIDDEN_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
                let why = if header.eq_ignore_ascii_case("authorization")
                    || header.eq_ignore_ascii_case("proxy-authorization")
                {
                    "chorus sends the key itself: name its environment variable in `api_key_env` \
                     (so the key stays out of this file and out of every log)"
                } else {
                    "it is a framing header the HTTP client sets itself"
                };
                return Err((
                    key(&format!("headers.{header}")),
                    format!("`{header}` may not be set here: {why}"),
                ));
            }
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
        search_results(
            &format!("models.\"{id}\".web_search_max_results"),
            model.web_search_max_results,
        )?;
        for (k, price) in [
            ("input_price", model.input_price),
            ("output_price", model.output_price),
        ] {
            if price.is_some_and(|p| !p.is_finite() || !(0.0..=MAX_PRICE).contains(&p)) {
                return Err((
                    format!("models.\"{id}\".{k}"),
                    format!("must be a price in USD per million tokens, from 0 to {MAX_PRICE}"),
                ));
            }
        }
        if model.max_output_tokens == Some(0) {
            return Err((
                format!("models.\"{id}\".max_output_tokens"),
                "must be at least 1".into(),
            ));
        }
        for field in RESERVED_BODY_FIELDS {
            if model.params.contains_key(field) {
                let provider = model.provider.as_deref().unwrap_or("NAME");
                return Err((
                    format!("models.\"{id}\".params.{field}"),
                    format!("`{field}` is set by chorus{}", stream_hint(field, provider)),
                ));
            }
        }
    }

    for (name, plugin) in &config.plugins {
        let key = |k: &str| format!("plugins.{name}.{k}");
        let named = [
            plugin.builtin.is_some(),
            plugin.path.is_some(),
            plugin.source.is_some(),
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
        if let Some(source) = &plugin.source {
            super::oci_reference::Reference::parse(source).map_err(|e| (key("source"), e))?;
        }
        duration(&key("cpu_time"), plugin.cpu_time, Duration::from_secs(600))?;
        duration(&key("wall_time"), plugin.wall_time, MAX_TIMEOUT)?;
        if plugin.max_memory_mib == 0 || plugin.max_memory_mib > 4096 {
            return Err((key("max_memory_mib"), "must be between 1 and 4096".into()));
        }
    }

    super::fallbacks::check(config)?;
    super::attachments::check(config)?;
    super::telemetry::check(config)?;

    for (name, pipeline) in &config.pipelines {
        search_results(
            &format!("pipelines.{name}.web_search_max_results"),
            pipeline.web_search_max_results,
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
        if RESERVED_TOOLS.contains(&name.as_str()) {
            return Err((
                format!("pipelines.{name}"),
                format!("`{name}` is the name of a tool chorus provides itself: choose another"),
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
            if BUILTIN_OPTIONS.contains(&option.as_str()) {
                return Err((
                    key,
                    format!(
                        "`{option}` is an option every pipeline takes already; choose another name"
                    ),
                ));
            }
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
        if let Some(timeout) = pipeline.run_timeout {
            duration(
                &format!("pipelines.{name}.run_timeout"),
                timeout,
                MAX_TIMEOUT,
            )?;
        }
        if let Some(grace) = pipeline.fan_out.straggler_grace {
            duration_or_zero(
                &format!("pipelines.{name}.fan_out.straggler_grace"),
                grace,
                MAX_TIMEOUT,
            )?;
        }
        let run_timeout = pipeline.run_timeout.unwrap_or(limits.run_timeout);
        // A task that expires mid-run is failed ("task expired") while its
        // run is recorded as cancelled: the task must outlive every run.
        if limits.task_ttl < run_timeout + TASK_TTL_MARGIN {
            let run_key = match pipeline.run_timeout {
                Some(_) => format!("pipelines.{name}.run_timeout"),
                None => "limits.run_timeout".to_owned(),
            };
            return Err((
                "limits.task_ttl".into(),
                format!(
                    "is {}, shorter than {run_key} ({}) plus {} to finish: an MCP task would expire while its run works; \
                     set limits.task_ttl to at least {}, or shorten {run_key}",
                    show_duration(limits.task_ttl),
                    show_duration(run_timeout),
                    show_duration(TASK_TTL_MARGIN),
                    show_duration(run_timeout + TASK_TTL_MARGIN),
                ),
            ));
        }
        let (reserve_key, reserve) = match pipeline.fan_out.merge_reserve {
            Some(r) => (format!("pipelines.{name}.fan_out.merge_reserve"), r),
            None => (
                "fan_out.merge_reserve".to_owned(),
                config.fan_out.merge_reserve,
            ),
        };
        if let MergeReserve::Fixed(d) = reserve
            && d >= run_timeout
        {
            return Err((
                reserve_key,
                format!(
                    "{} leaves pipeline `{name}` no time for its fan-out: its run_timeout is {}; \
                     use less, or a share such as \"25%\"",
                    show_duration(d),
                    show_duration(run_timeout)
                ),
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

/// How much longer than the longest run an MCP task must live.
const TASK_TTL_MARGIN: Duration = Duration::from_secs(30);

/// Most search results a call may ask for (OpenRouter's plugin takes
/// up to this many).
const MAX_SEARCH_RESULTS: usize = 25;

fn search_results(key: &str, value: Option<u32>) -> Result<(), Invalid> {
    match value {
        Some(n) => count(key, n as usize, 1, MAX_SEARCH_RESULTS),
        None => Ok(()),
    }
}

/// The most a `*_per_minute` limit may be (a billion: beyond any
/// provider's, and far from overflowing the counts).
const MAX_PER_MINUTE: u64 = 1_000_000_000;

/// A provider's requests or tokens per minute: from 1 up, when set.
fn per_minute(key: &str, value: Option<u64>) -> Result<(), Invalid> {
    match value {
        Some(n) if n == 0 || n > MAX_PER_MINUTE => Err((
            key.into(),
            format!("must be from 1 to {MAX_PER_MINUTE}, got {n} (leave it out for no limit)"),
        )),
        _ => Ok(()),
    }
}

fn count(key: &str, value: usize, min: usize, max: usize) -> Result<(), Invalid> {
    if value < min || value > max {
        return Err((
            key.into(),
            format!("must be from {min} to {max}, got {value}"),
        ));
    }
    Ok(())
}

/// A duration that must be above zero and at most `max`.
fn duration(key: &str, value: Duration, max: Duration) -> Result<(), Invalid> {
    if value.is_zero() {
        return Err((key.into(), "must be greater than zero".into()));
    }
    duration_or_zero(key, value, max)
}

fn duration_or_zero(key: &str, value: Duration, max: Duration) -> Result<(), Invalid> {
    if value > max {
        return Err((
            key.into(),
            format!(
                "must be at most {}, got {}",
                humantime::format_duration(max),
                show_duration(value)
            ),
        ));
    }
    Ok(())
}

fn stream_hint(field: &str, provider: &str) -> String {
    if field == "stream" {
        format!("; to turn streaming off, set providers.{provider}.stream = false")
    } else {
        String::new()
    }
}

/// A `[store] url` as the file may give it: a PostgreSQL URL, without a
/// password (that stays in the environment).
fn store_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text)
        .map_err(|e| format!("is not a URL ({e}): write postgres://user@host:5432/database"))?;
    if !matches!(url.scheme(), "postgres" | "postgresql") {
        return Err(format!(
            "the run store's URL must start with postgres:// (it starts with {}://); \
             for a SQLite file use [store] path",
            url.scheme()
        ));
    }
    if url.password().is_some() {
        return Err(
            "holds a password: keep it out of the config file, in $PGPASSWORD or the \
             variable [store] password_env names"
                .into(),
        );
    }
    Ok(())
}
