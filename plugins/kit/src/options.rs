//! Reading a plugin's settings and the call's options.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses a plugin's settings, with a message that says what was expected.
pub fn settings<T: DeserializeOwned>(json: &str, expected: &str) -> Result<T, String> {
    serde_json::from_str(if json.trim().is_empty() { "{}" } else { json })
        .map_err(|e| format!("bad settings: {e} (expected {expected})"))
}

/// An integer option from the request's options object, if present.
pub fn option_u32(options: &str, name: &str) -> Option<u32> {
    let value: Value = serde_json::from_str(options).ok()?;
    value
        .get(name)?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}

/// A count: the call's option `name`, else the plugin's setting, else
/// `default`; refused outside `range` with a message that says so.
pub fn count(
    options: &str,
    name: &str,
    setting: Option<u32>,
    default: u32,
    range: std::ops::RangeInclusive<u32>,
) -> Result<u32, String> {
    let value = option_u32(options, name).or(setting).unwrap_or(default);
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "{name} must be between {} and {}, got {value}",
            range.start(),
            range.end()
        ))
    }
}

/// For plugins that take no settings: an empty table, or what is wrong.
pub fn no_settings(json: &str) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct None {}
    settings::<None>(json, "no settings: this plugin has none").map(|_| ())
}
