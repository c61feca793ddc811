//! What every section's `check` shares: the one error type of a check
//! ([`Invalid`], a key and what is wrong with it; `ConfigError` adds the
//! file and position), the bounds that keep every value usable in
//! arithmetic and timers, and the helpers that say so in the same words.

use std::time::Duration;

use super::show_duration;

/// A key that is wrong and what is wrong with it: `(key, message)`.
pub type Invalid = (String, String);

const DAY: Duration = Duration::from_secs(24 * 3600);
/// The longest timeout of any kind.
pub const MAX_TIMEOUT: Duration = DAY;
/// The longest time anything is kept.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
/// Requests in flight at once, of a provider or of runs.
pub const MAX_CONCURRENCY: usize = 1024;
/// The most any price (per million tokens, per request) may be, in USD.
pub const MAX_PRICE: f64 = 1_000_000.0;

/// Most search results a call may ask for (OpenRouter's plugin takes
/// up to this many).
const MAX_SEARCH_RESULTS: usize = 25;

/// A `web_search_max_results`: from 1 up, when set.
pub fn search_results(key: &str, value: Option<u32>) -> Result<(), Invalid> {
    match value {
        Some(n) => count(key, n as usize, 1, MAX_SEARCH_RESULTS),
        None => Ok(()),
    }
}

/// A number from `min` to `max`.
pub fn count(key: &str, value: usize, min: usize, max: usize) -> Result<(), Invalid> {
    if value < min || value > max {
        return Err((
            key.into(),
            format!("must be from {min} to {max}, got {value}"),
        ));
    }
    Ok(())
}

/// A duration that must be above zero and at most `max`.
pub fn duration(key: &str, value: Duration, max: Duration) -> Result<(), Invalid> {
    if value.is_zero() {
        return Err((key.into(), "must be greater than zero".into()));
    }
    duration_or_zero(key, value, max)
}

/// A duration of at most `max`, zero included.
pub fn duration_or_zero(key: &str, value: Duration, max: Duration) -> Result<(), Invalid> {
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
