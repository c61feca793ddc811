//! The response cache (`[cache] responses = "24h"`, off by default): an
//! answer to a request identical to one already answered — same provider,
//! model, messages, attachments and sampling, with temperature 0 or a fixed
//! seed — is taken from the run store instead of asked again. Such a call
//! is recorded with `cached_from` (the earlier run and call), costs 0 and
//! takes no time. Sampled requests are cached only where the user opts in:
//! a pipeline's `cache_sampled = true`, or `chorus eval --cached`.
//!
//! This module owns the policy (which requests, for how long) and the key
//! (`key`); the store keeps the index (`store::responses`); the run's
//! context asks it before a request queues for a provider's permit. When
//! the cache is off there is no `ResponseCache` at all, so a call does no
//! extra work.

pub mod key;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use futures::future::BoxFuture;

use crate::llm::{ChatRequest, WebSearch};
use crate::pipeline::{CallCache, Hit, RunCallCache};
use crate::record::CallRef;
use crate::store::responses::CacheEntry;
use crate::store::{Store, now_ms};
pub use key::Identity;

/// How long `chorus eval --cached` keeps answers when `[cache] responses`
/// is not set.
pub const EVAL_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// The response cache of one configuration and store; the pipeline uses it
/// through its [`CallCache`] port.
pub struct ResponseCache(Arc<Policy>);

/// What the cache keeps, where, and for how long.
struct Policy {
    store: Store,
    lifetime: Duration,
    /// `chorus eval --cached`: sampled requests too, in every pipeline.
    everything: bool,
    /// Pipelines with `cache_sampled = true`.
    sampled: HashSet<String>,
    /// By provider name: its base URL and `extra_body`, as the key takes them.
    providers: HashMap<String, (String, String)>,
    /// By model id: its `params` and search settings, as written.
    models: HashMap<String, String>,
}

impl ResponseCache {
    /// The cache `config` asks for over `store`; `None` when it is off, or
    /// when runs are kept in memory only (no index: every lookup would miss).
    pub fn of(config: &Config, store: &Store) -> Option<Arc<Self>> {
        let lifetime = config.cache.responses?;
        if !store.keeps_answers() {
            tracing::warn!(
                "[cache] responses is set, but {} keeps no answers: the response cache is off",
                store.describe()
            );
            return None;
        }
        Some(Arc::new(Self(Arc::new(Policy {
            store: store.clone(),
            lifetime,
            everything: config.cache.responses_sampled,
            sampled: config
                .pipelines
                .iter()
                .filter(|(_, p)| p.cache_sampled)
                .map(|(name, _)| name.clone())
                .collect(),
            providers: config
                .providers
                .iter()
                .map(|(name, p)| {
                    (
                        name.clone(),
                        (
                            p.base_url.to_string(),
                            format!("{:?} {:?}", p.extra_body, p.headers),
                        ),
                    )
                })
                .collect(),
            models: config
                .models
                .iter()
                .map(|(id, m)| {
                    let settings = format!(
                        "{:?} {:?} {:?} {:?}",
                        m.params, m.web_search, m.web_search_max_results, m.web_search_context
                    );
                    (id.clone(), settings)
                })
                .collect(),
        }))))
    }

    /// What `chorus check` says of the response cache.
    pub fn describe(config: &Config) -> String {
        let sampled: Vec<&str> = config
            .pipelines
            .iter()
            .filter(|(_, p)| p.cache_sampled)
            .map(|(name, _)| name.as_str())
            .collect();
        match config.cache.responses {
            None => "off ([cache] responses is not set)".to_owned(),
            Some(lifetime) if !config.store.enabled => format!(
                "off: [cache] responses = \"{}\", but [store] enabled = false keeps no answers",
                humantime::format_duration(lifetime)
            ),
            Some(lifetime) => format!(
                "on: answers to identical requests at temperature 0 or with a seed are kept {} \
                 ([cache] responses); sampled requests too in {}",
                humantime::format_duration(lifetime),
                if sampled.is_empty() {
                    "no pipeline (pipelines.NAME.cache_sampled)".to_owned()
                } else {
                    format!("pipeline(s) {}", sampled.join(", "))
                }
            ),
        }
    }
}

impl CallCache for ResponseCache {
    /// The cache as run `run_id` of pipeline `pipeline` uses it: the
    /// answers of the client the run is made for ([`SCOPE`]) alone.
    fn for_run(&self, pipeline: &str, run_id: &str) -> Box<dyn RunCallCache> {
        Box::new(RunCache {
            sampled: self.0.everything || self.0.sampled.contains(pipeline),
            cache: self.0.clone(),
            run_id: run_id.to_owned(),
            scope: SCOPE
                .try_with(Clone::clone)
                .unwrap_or_else(|_| UNSCOPED.to_owned()),
        })
    }
}

impl Policy {
    fn identity(&self, scope: &str, provider: &str, model: &str) -> Identity {
        let (base_url, extra) = self.providers.get(provider).cloned().unwrap_or_default();
        let settings = self.models.get(model).map_or("", String::as_str);
        Identity {
            scope: scope.to_owned(),
            provider: provider.to_owned(),
            base_url,
            settings: format!("{extra} {settings}"),
        }
    }
}

/// One run's view of the cache: whether its sampled requests qualify, and
/// the run its answers are remembered under.
struct RunCache {
    cache: Arc<Policy>,
    sampled: bool,
    run_id: String,
    /// Whose answers it reads and keeps.
    scope: String,
}

tokio::task_local! {
    /// The client a run is made for, set by `app` around each run it makes:
    /// every run's cache is that client's alone. (A task-local, not a
    /// parameter of every run path: the scope is the composition root's
    /// business, and the pipeline never reads it.)
    pub static SCOPE: String;
}

/// The scope of a run made outside `app` (a library caller, a test): its
/// own, shared with no client's.
const UNSCOPED: &str = "(no client)";

impl RunCallCache for RunCache {
    /// The key of `request` to `provider`, or `None` when the request may
    /// not be cached (sampling randomness the run did not opt into).
    fn key(
        &self,
        provider: &str,
        request: &ChatRequest,
        search: Option<&WebSearch>,
    ) -> Option<String> {
        // An attachment the provider fetches by URL: the key would hold
        // the URL, not what is behind it, which may change or differ.
        let fetched_upstream = request
            .attachments
            .iter()
            .any(|a| matches!(a.body, crate::attach::Body::Url(_)));
        (key::qualifies(&request.sampling, self.sampled) && !fetched_upstream).then(|| {
            key::key(
                &self.cache.identity(&self.scope, provider, &request.model),
                request,
                search,
            )
        })
    }

    /// The answer kept for `key`, if any (an unreadable store is a miss,
    /// logged).
    fn lookup<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<Hit>> {
        Box::pin(self.read(key))
    }

    fn remember(&self, key: String, call: u32) -> BoxFuture<'_, ()> {
        Box::pin(self.keep(key, call))
    }
}

impl RunCache {
    async fn read(&self, key: &str) -> Option<Hit> {
        let key = key.to_owned();
        let found = self
            .cache
            .store
            .off_runtime(move |store| store.cached_answer(&key, now_ms()));
        match found.await {
            Ok(found) => found.map(|(from, stored)| Hit {
                from,
                call: stored.call,
            }),
            Err(e) => {
                tracing::warn!("the response cache could not be read: {e}");
                None
            }
        }
    }

    /// Keeps call `call` of this run as the answer to `key`, for the
    /// cache's lifetime.
    async fn keep(&self, key: String, call: u32) {
        let now = now_ms();
        let lifetime = i64::try_from(self.cache.lifetime.as_millis()).unwrap_or(i64::MAX);
        let entry = CacheEntry {
            key,
            from: CallRef {
                run_id: self.run_id.clone(),
                call,
            },
            created_at: now,
            expires_at: now.saturating_add(lifetime),
        };
        let written = self
            .cache
            .store
            .off_runtime(move |store| store.remember_answer(&entry));
        if let Err(e) = written.await {
            tracing::warn!("the response cache could not keep an answer: {e}");
        }
    }
}
