//! `[cache]`: where compiled plugins and model catalogs are cached, and
//! how long models' answers are kept for identical requests (the response
//! cache, off by default).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::check::{Invalid, MAX_TTL, duration};

/// Where compiled plugins are cached, and how long models' answers are
/// kept for identical requests (the response cache, off by default).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cache {
    pub enabled: bool,
    /// Defaults to `$XDG_CACHE_HOME/chorus` (or `~/.cache/chorus`).
    pub dir: Option<PathBuf>,
    /// Keep answers to identical deterministic requests (temperature 0 or
    /// a fixed seed) in the run store this long, and answer them from
    /// there (see `respcache`). Unset: no response cache.
    #[serde(with = "humantime_serde")]
    pub responses: Option<Duration>,
    /// Not a key of the file: `chorus eval --cached` sets it, so every
    /// identical request is reused, sampled ones included.
    #[serde(skip)]
    pub responses_sampled: bool,
}

impl Default for Cache {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: None,
            responses: None,
            responses_sampled: false,
        }
    }
}

impl Cache {
    /// `Err((key, message))` when a key is out of its bounds.
    pub(super) fn check(&self) -> Result<(), Invalid> {
        if let Some(lifetime) = self.responses {
            duration("cache.responses", lifetime, MAX_TTL)?;
        }
        Ok(())
    }
}
