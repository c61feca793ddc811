//! The model catalog: what each provider lists at `GET {base_url}/models`
//! (ids, context windows, prices, supported parameters), fetched when first
//! needed, kept in memory, and cached on disk with an expiry so chorus
//! works offline from the last list it saw.
//!
//! A fresh disk copy saves the fetch; when the provider cannot be reached
//! (no network, DNS, refused, timed out) an expired copy is used and said
//! to be old; when the provider answers that it has no list (404), that is
//! believed. Servers on this machine are not cached on disk by default:
//! their list changes as models are loaded, and another server may take
//! the port tomorrow.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::client::ProviderClient;
use super::types::FailureKind;
use crate::config::{Provider, read_regular_file, show_duration};

mod parse;
pub use parse::parse;

/// The default disk expiry for a remote provider's list.
const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a list is reused in memory at least, and how long a failed
/// fetch is remembered before trying again.
const MEMORY_TTL: Duration = Duration::from_secs(60);
/// The longest wait between tries of a provider that could not be reached
/// while its expired disk copy stands in: from `MEMORY_TTL`, each failed try
/// doubles the wait up to this — the provider is back within minutes of
/// being back, not a day later.
const STALE_RETRY_MAX: Duration = Duration::from_secs(16 * 60);
/// The largest cache file read back.
const CACHE_FILE_LIMIT: u64 = 64 << 20;

/// One model a provider lists. Prices are USD per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listed {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub context_window: Option<u32>,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default)]
    pub input_price: Option<f64>,
    #[serde(default)]
    pub output_price: Option<f64>,
    /// Prompt tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_price: Option<f64>,
    /// Prompt tokens written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_price: Option<f64>,
    #[serde(default)]
    pub supported_parameters: Vec<String>,
    /// What the model takes as input (`text`, `image`, `file`, `audio`),
    /// from OpenRouter's `architecture.input_modalities`; empty when the
    /// provider does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_modalities: Vec<String>,
}

/// A provider's list, and where it came from.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub provider: String,
    pub models: Vec<Listed>,
    pub fetched_at: SystemTime,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// Fetched from the provider just now (this process).
    Fetched,
    /// A disk copy younger than the expiry.
    Cached,
    /// An expired disk copy: the provider could not be reached.
    Stale { error: String },
}

impl Catalog {
    pub fn get(&self, id: &str) -> Option<&Listed> {
        self.models.iter().find(|m| m.id == id)
    }

    /// Where the list came from, for `chorus check` and `chorus models`.
    pub fn describe(&self) -> String {
        let age = SystemTime::now()
            .duration_since(self.fetched_at)
            .unwrap_or_default();
        let age = humantime::format_duration(Duration::from_secs(age.as_secs() / 60 * 60));
        let n = self.models.len();
        match &self.origin {
            Origin::Fetched => format!("{n} models, fetched now"),
            Origin::Cached => format!("{n} models, cached {age} ago"),
            Origin::Stale { error } => {
                format!("{n} models from a cache {age} old: the provider is unreachable ({error})")
            }
        }
    }
}

/// The disk expiry of a provider's list: the configured one, else a day
/// for a remote provider and none for one on this machine.
pub fn ttl(config: &Provider) -> Duration {
    config.catalog_ttl.unwrap_or_else(|| {
        let local = match config.base_url.host() {
            Some(url::Host::Domain(d)) => d == "localhost" || d.ends_with(".localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        if local { Duration::ZERO } else { DEFAULT_TTL }
    })
}

/// Every provider's list, as far as it has been loaded.
pub struct Catalogs {
    dir: Option<PathBuf>,
    slots: Mutex<HashMap<String, Slot>>,
    /// One fetch per provider at a time.
    fetching: HashMap<String, tokio::sync::Mutex<()>>,
}

#[derive(Clone)]
struct Slot {
    result: Result<Arc<Catalog>, Unavailable>,
    at: Instant,
    /// How long `result` is reused before the provider is asked again.
    keep: Duration,
}

/// How long a result is reused in memory: a list for its expiry (at least
/// `MEMORY_TTL`), a failure for `MEMORY_TTL`, and a stale stand-in for a
/// retry interval that doubles while the provider stays unreachable.
fn keep_for(
    result: &Result<Arc<Catalog>, Unavailable>,
    previous: Option<&Slot>,
    ttl: Duration,
) -> Duration {
    let keep = ttl.max(MEMORY_TTL);
    match result {
        Err(_) => MEMORY_TTL,
        Ok(catalog) if matches!(catalog.origin, Origin::Stale { .. }) => {
            let was_stale = previous
                .and_then(|s| s.result.as_ref().ok())
                .is_some_and(|c| matches!(c.origin, Origin::Stale { .. }));
            match previous {
                Some(slot) if was_stale => (slot.keep * 2).min(STALE_RETRY_MAX),
                _ => MEMORY_TTL,
            }
            .min(keep)
        }
        Ok(_) => keep,
    }
}

/// Why a provider's list is not there.
#[derive(Debug, Clone, PartialEq)]
pub struct Unavailable {
    pub message: String,
    /// The host could not be connected to at all (DNS, refused): calls
    /// to it will fail the same way.
    pub unreachable: bool,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Catalogs {
    pub fn new(dir: Option<PathBuf>, providers: impl IntoIterator<Item = String>) -> Self {
        Self {
            dir: dir.map(|d| d.join("models")),
            slots: Mutex::new(HashMap::new()),
            fetching: providers
                .into_iter()
                .map(|p| (p, tokio::sync::Mutex::new(())))
                .collect(),
        }
    }

    /// What is loaded for `provider` now, without fetching.
    pub fn loaded(&self, provider: &str) -> Option<Result<Arc<Catalog>, Unavailable>> {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(provider)
            .map(|s| s.result.clone())
    }

    /// The provider's list: from memory, disk, or the provider. `refresh`
    /// skips memory and fresh disk copies.
    pub async fn get(
        &self,
        client: &ProviderClient,
        ttl: Duration,
        refresh: bool,
    ) -> Result<Arc<Catalog>, Unavailable> {
        let name = client.name.as_str();
        let _one_at_a_time = match self.fetching.get(name) {
            Some(lock) => Some(lock.lock().await),
            None => None,
        };
        if !refresh
            && let Some(slot) = self.slot(name)
            && slot.at.elapsed() < slot.keep
        {
            return slot.result;
        }
        let file = self.file(client);
        let on_disk = match (&file, ttl.is_zero()) {
            (Some(file), false) => read_cache(file, name, &client.base_url),
            _ => None,
        };
        if !refresh
            && let Some(catalog) = &on_disk
            && age(catalog.fetched_at) < ttl
        {
            let catalog = Arc::new(Catalog {
                origin: Origin::Cached,
                ..catalog.clone()
            });
            return self.remember(name, Ok(catalog), ttl);
        }
        let result = match client.fetch_models().await {
            Ok(body) => match parse(&body) {
                Ok(models) => {
                    let catalog = Catalog {
                        provider: name.to_owned(),
                        models,
                        fetched_at: SystemTime::now(),
                        origin: Origin::Fetched,
                    };
                    if let (Some(file), false) = (&file, ttl.is_zero()) {
                        write_cache(file, &client.base_url, &catalog);
                    }
                    Ok(Arc::new(catalog))
                }
                Err(why) => Err(Unavailable {
                    message: format!("its model list is not usable: {why}"),
                    unreachable: false,
                }),
            },
            Err((failure, connect)) => {
                let offline =
                    matches!(failure.kind, FailureKind::Connection | FailureKind::Timeout);
                match on_disk {
                    Some(catalog) if offline => Ok(Arc::new(Catalog {
                        origin: Origin::Stale {
                            error: failure.to_string(),
                        },
                        ..catalog
                    })),
                    _ => Err(Unavailable {
                        message: failure.to_string(),
                        unreachable: connect,
                    }),
                }
            }
        };
        if let Err(why) = &result {
            tracing::debug!(provider = name, "no model list: {why}");
        }
        self.remember(name, result, ttl)
    }

    /// Until when `provider`'s loaded result is reused without asking
    /// again; `None` when nothing is loaded.
    pub fn kept_until(&self, provider: &str) -> Option<Instant> {
        self.slot(provider).map(|s| s.at + s.keep)
    }

    fn slot(&self, provider: &str) -> Option<Slot> {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(provider)
            .cloned()
    }

    fn remember(
        &self,
        provider: &str,
        result: Result<Arc<Catalog>, Unavailable>,
        ttl: Duration,
    ) -> Result<Arc<Catalog>, Unavailable> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let keep = keep_for(&result, slots.get(provider), ttl);
        slots.insert(
            provider.to_owned(),
            Slot {
                result: result.clone(),
                at: Instant::now(),
                keep,
            },
        );
        result
    }

    /// `models/<provider>-<hash of base_url>.json` in the cache directory.
    fn file(&self, client: &ProviderClient) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let digest = Sha256::digest(client.base_url.as_str().as_bytes());
        let hash = crate::text::hex(&digest[..8]);
        let name: String = client
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Some(dir.join(format!("{name}-{hash}.json")))
    }
}

fn age(at: SystemTime) -> Duration {
    SystemTime::now().duration_since(at).unwrap_or_default()
}

/// The disk format: our own normalised list, not the provider's body.
#[derive(Serialize, Deserialize)]
struct CacheFile {
    base_url: String,
    fetched_at: u64,
    models: Vec<Listed>,
}

fn read_cache(file: &Path, provider: &str, base_url: &url::Url) -> Option<Catalog> {
    let bytes = read_regular_file(file, CACHE_FILE_LIMIT).ok()?;
    let cached: CacheFile = serde_json::from_slice(&bytes).ok()?;
    if cached.base_url != base_url.as_str() {
        return None;
    }
    Some(Catalog {
        provider: provider.to_owned(),
        models: cached.models,
        // A file is outside data: a time past what the clock can hold
        // makes the copy unusable, not a panic.
        fetched_at: UNIX_EPOCH.checked_add(Duration::from_secs(cached.fetched_at))?,
        origin: Origin::Cached,
    })
}

/// Written atomically (a temporary file renamed over the old one);
/// failing to cache is logged, never an error.
fn write_cache(file: &Path, base_url: &url::Url, catalog: &Catalog) {
    let write = || -> std::io::Result<()> {
        let dir = file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let cached = CacheFile {
            base_url: base_url.to_string(),
            fetched_at: catalog
                .fetched_at
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs(),
            models: catalog.models.clone(),
        };
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer(&mut temp, &cached)?;
        temp.persist(file).map_err(|e| e.error)?;
        Ok(())
    };
    if let Err(e) = write() {
        tracing::warn!("cannot cache the model list in {}: {e}", file.display());
    }
}

/// Up to `n` listed ids closest to `id`: a renamed or versioned id that
/// starts with it (`claude-sonnet-4` → `claude-sonnet-4.5`) first, then by
/// edit distance, also comparing the part after the vendor prefix, so
/// `gpt-5` finds `openai/gpt-5`.
pub fn closest<'a>(id: &str, listed: impl Iterator<Item = &'a str>, n: usize) -> Vec<&'a str> {
    let tail = |s: &str| s.rsplit('/').next().unwrap_or(s).to_lowercase();
    let wanted = id.to_lowercase();
    let mut scored: Vec<(usize, &str)> = listed
        .map(|candidate| {
            let lower = candidate.to_lowercase();
            let whole = strsim::levenshtein(&wanted, &lower);
            let short = strsim::levenshtein(&tail(id), &tail(candidate)) + 1;
            let versioned = lower.starts_with(&wanted) || tail(candidate).starts_with(&tail(id));
            // Doubled, so a versioned id (1) ranks above any other at 1.
            let score = if versioned { 1 } else { 2 * whole.min(short) };
            (score, candidate)
        })
        .collect();
    scored.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)));
    let limit = 2 * (id.chars().count() / 2).max(3);
    scored
        .into_iter()
        .filter(|(d, _)| *d <= limit)
        .take(n)
        .map(|(_, c)| c)
        .collect()
}

/// How a price reads in `chorus models`.
pub fn show_price(price: Option<f64>) -> String {
    match price {
        Some(p) => {
            let text = format!("{p:.4}");
            let text = text.trim_end_matches('0').trim_end_matches('.');
            format!("${text}")
        }
        None => "-".to_owned(),
    }
}

/// How long ago, for messages.
pub fn show_age(at: SystemTime) -> String {
    show_duration(Duration::from_secs(age(at).as_secs()))
}

#[cfg(test)]
mod tests;
