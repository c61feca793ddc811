//! The OpenAI-compatible client: which provider serves which model, one
//! shared connection pool per provider, streaming, honest timeouts,
//! retries, typed failures, the providers' model catalogs, usage and cost,
//! and keeping API keys out of everything. Knows nothing about runs,
//! plugins or MCP.

mod catalog;
mod client;
mod estimate;
mod fetch;
mod http;
pub mod key_vars;
pub mod limits;
mod model;
mod queue;
mod search;
mod secret;
mod sse;
mod stream;
#[cfg(test)]
mod tests;
mod timeouts;
pub mod tools;
mod types;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use indexmap::IndexMap;
use serde_json::{Map, Value};

pub use catalog::{Catalog, Listed, Origin, Unavailable, closest, show_age, show_price};
pub use client::{CallHooks, OnQueued, OnTokens};
use estimate::with_cost;
pub use estimate::{UNBOUNDED_ANSWER_TOKENS, estimate_prompt_tokens, estimate_tokens};
pub use http::KeyProblem;
pub use model::{ModelInfo, PriceSource};
pub use queue::{Priority, next_run_seq};
pub use search::{Citation, Plan as SearchPlan, WebSearch};
pub use secret::{MIN_RUN, REDACTED, Scrubber, Secret};
pub use types::*;

use crate::config::{ConfigError, Loaded, Model};
use catalog::Catalogs;
use client::ProviderClient;

/// A catalog's state for one provider, for `chorus check`/`chorus models`.
pub struct CatalogStatus {
    pub provider: String,
    pub result: Result<Arc<Catalog>, Unavailable>,
}

/// All providers and the models, built once at startup and shared.
/// A time past any run: how long "no catalog to load" stays true.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

pub struct Llm {
    providers: HashMap<String, Arc<ProviderClient>>,
    /// `[models]` as configured, in config order.
    configured: IndexMap<String, Model>,
    /// Each model's `params`, as JSON.
    params: HashMap<String, Map<String, Value>>,
    catalogs: Catalogs,
    /// Per provider: whether to fetch its catalog, and its disk expiry.
    catalog_policy: HashMap<String, Option<Duration>>,
    /// The configured models completed by the catalogs loaded so far.
    models: RwLock<Arc<IndexMap<String, Arc<ModelInfo>>>>,
    provider_of: HashMap<String, String>,
    /// Until when every catalog merged into `models` is kept in memory: a
    /// run before then has nothing to load (`catalogs_fresh`).
    fresh_until: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// URL attachments, fetched for providers that cannot (`fetch`).
    urls: fetch::Urls,
}

impl Llm {
    pub fn new(loaded: &Loaded) -> Result<Self, ConfigError> {
        Self::reusing(loaded, None, &[])
    }

    /// Like `new`, but a provider named in `unchanged` keeps `previous`'s
    /// client — its connection pool, warm connections and concurrency
    /// permits — instead of getting a new one (a reload that did not
    /// touch it).
    pub fn reusing(
        loaded: &Loaded,
        previous: Option<&Llm>,
        unchanged: &[&str],
    ) -> Result<Self, ConfigError> {
        let mut providers = HashMap::new();
        let mut catalog_policy = HashMap::new();
        let roots = loaded
            .config
            .tls
            .roots(&loaded.base_dir)
            .map_err(|(key, message)| loaded.error(key, message))?;
        for (name, provider) in &loaded.config.providers {
            let kept = previous
                .filter(|_| unchanged.contains(&name.as_str()))
                .and_then(|p| p.providers.get(name).cloned());
            let client = match kept {
                Some(client) => client,
                None => Arc::new(
                    ProviderClient::new(name, provider, &roots)
                        .map_err(|(key, message)| loaded.error(key, message))?,
                ),
            };
            providers.insert(name.clone(), client);
            catalog_policy.insert(
                name.clone(),
                provider.catalog.then(|| catalog::ttl(provider)),
            );
        }
        let urls = fetch::Urls::new(loaded, &roots)?;
        let configured = loaded.config.models.clone();
        let provider_of: HashMap<String, String> = configured
            .iter()
            .map(|(id, m)| (id.clone(), loaded.provider_of(m).to_owned()))
            .collect();
        let params = configured
            .iter()
            .map(|(id, m)| {
                let json = serde_json::to_value(&m.params)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                (id.clone(), json)
            })
            .collect();
        let llm = Self {
            catalogs: Catalogs::new(loaded.cache_dir(), providers.keys().cloned()),
            providers,
            configured,
            params,
            catalog_policy,
            models: RwLock::new(Arc::default()),
            provider_of,
            fresh_until: std::sync::Mutex::new(None),
            urls,
        };
        llm.merge();
        Ok(llm)
    }

    /// The models plugins may use, in config order, with what the catalogs
    /// add. A snapshot: cheap to take, never changes under the holder.
    pub fn models(&self) -> Arc<IndexMap<String, Arc<ModelInfo>>> {
        self.models
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The models as a list (see `models`).
    pub fn catalog(&self) -> Vec<ModelInfo> {
        self.models()
            .values()
            .map(|m| ModelInfo::clone(m))
            .collect()
    }

    /// What is known of `id`: shared, not copied (it is looked up several
    /// times for every call a run makes).
    pub fn model(&self, id: &str) -> Option<Arc<ModelInfo>> {
        self.models().get(id).cloned()
    }

    /// The `params` configured for `model`.
    pub fn params(&self, model: &str) -> Option<&Map<String, Value>> {
        self.params.get(model)
    }

    /// The `max_tokens` a request will be sent with (the model's params
    /// win over the plugin's sampling), if any.
    pub fn max_tokens(&self, request: &ChatRequest) -> Option<u32> {
        match self.params.get(&request.model) {
            Some(params) => wire::max_tokens(request, params),
            None => request.sampling.max_tokens,
        }
    }

    /// What a call to `model` does about web search, given the run's
    /// switch (`asked`) and the model's own `web_search`.
    pub fn search_plan(&self, model: &str, asked: Option<&WebSearch>) -> SearchPlan {
        let Some(provider_name) = self.provider_of.get(model) else {
            return SearchPlan::Off;
        };
        let Some(provider) = self.providers.get(provider_name) else {
            return SearchPlan::Off;
        };
        search::plan(
            self.configured.get(model),
            provider_name,
            provider.search(),
            asked,
        )
    }

    /// Counts every provider's limits in `shared` too, so that they hold
    /// across the instances that share it.
    pub fn share_limits(&self, shared: &Arc<dyn limits::Shared>) {
        for provider in self.providers.values() {
            provider.share_limits(shared.clone());
        }
    }

    /// Where a provider is, as `host:port` (for first-contact messages).
    pub fn host_of(&self, provider: &str) -> Option<String> {
        self.providers
            .get(provider)
            .map(|p| http::host_port(&p.base_url))
    }

    /// The names of the providers, sorted.
    pub fn providers(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.providers.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// The environment variable `provider`'s key was read from, when one
    /// was (see `key_vars`).
    pub fn key_var(&self, provider: &str) -> Option<&str> {
        self.providers.get(provider)?.key_var()
    }

    /// Providers whose key is needed but not usable (not set, or set to
    /// something that cannot be sent), sorted by provider.
    pub fn key_problems(&self) -> Vec<KeyProblem> {
        let mut problems: Vec<KeyProblem> = self
            .providers
            .values()
            .filter_map(|p| p.key_problem().cloned())
            .collect();
        problems.sort_unstable_by(|a, b| a.provider.cmp(&b.provider));
        problems
    }

    /// Providers whose API-key variable is not set: `(provider, variable)`.
    pub fn missing_keys(&self) -> Vec<(&str, &str)> {
        let mut missing: Vec<_> = self
            .providers
            .values()
            .filter_map(|p| {
                p.key_problem()
                    .filter(|k| k.unusable.is_none())
                    .map(|k| (p.name.as_str(), k.var.as_str()))
            })
            .collect();
        missing.sort_unstable();
        missing
    }

    /// Loads every provider's catalog that is not loaded yet (or all again,
    /// with `refresh`), then completes the models with what they say.
    /// Providers with `catalog = false` are skipped.
    pub async fn load_catalogs(&self, refresh: bool) -> Vec<CatalogStatus> {
        let loads = self.providers().into_iter().filter_map(|name| {
            let ttl = (*self.catalog_policy.get(name)?)?;
            let client = self.providers[name].clone();
            Some(async move {
                let result = self.catalogs.get(&client, ttl, refresh).await;
                CatalogStatus {
                    provider: name.to_owned(),
                    result,
                }
            })
        });
        let statuses = futures::future::join_all(loads).await;
        self.merge();
        let until = self
            .catalog_policy
            .iter()
            .filter(|(_, ttl)| ttl.is_some())
            .map(|(name, _)| self.catalogs.kept_until(name))
            .try_fold(None, |earliest: Option<tokio::time::Instant>, until| {
                until.map(|u| Some(earliest.map_or(u, |e| e.min(u))))
            });
        // No provider with a catalog: nothing ever needs loading.
        let until = until.map(|u| u.unwrap_or_else(|| tokio::time::Instant::now() + FOREVER));
        *self.fresh_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
        statuses
    }

    /// Whether every catalog is loaded and still kept in memory, with the
    /// model snapshot made from it: a run then has nothing to wait for,
    /// and skips `load_catalogs` (a task and a merge per run otherwise).
    pub fn catalogs_fresh(&self) -> bool {
        self.fresh_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|until| tokio::time::Instant::now() < until)
    }

    /// What is loaded for `provider`, without fetching.
    pub fn loaded_catalog(&self, provider: &str) -> Option<Result<Arc<Catalog>, Unavailable>> {
        self.catalogs.loaded(provider)
    }

    /// Rebuilds the model snapshot from the config and the loaded catalogs.
    fn merge(&self) {
        let merged: IndexMap<String, Arc<ModelInfo>> = self
            .configured
            .iter()
            .map(|(id, m)| {
                let provider = self.provider_of[id].clone();
                let catalog = self.catalogs.loaded(&provider).and_then(Result::ok);
                let listed = catalog.as_ref().and_then(|c| c.get(id));
                let config_prices = m.input_price.is_some() || m.output_price.is_some();
                let input_price = m.input_price.or(listed.and_then(|l| l.input_price));
                let output_price = m.output_price.or(listed.and_then(|l| l.output_price));
                let prices_source = match (config_prices, input_price.or(output_price)) {
                    (true, _) => Some(PriceSource::Config),
                    (false, Some(_)) => Some(PriceSource::Catalog),
                    (false, None) => None,
                };
                let info = ModelInfo {
                    id: id.clone(),
                    provider,
                    context_window: m.context_window.or(listed.and_then(|l| l.context_window)),
                    input_price,
                    output_price,
                    // Catalog prices go with catalog input prices only: a
                    // configured input price is not discounted by them.
                    cache_read_price: listed
                        .filter(|_| m.input_price.is_none())
                        .and_then(|l| l.cache_read_price),
                    cache_write_price: listed
                        .filter(|_| m.input_price.is_none())
                        .and_then(|l| l.cache_write_price),
                    tags: m.tags.clone(),
                    max_output_tokens: m
                        .max_output_tokens
                        .or(listed.and_then(|l| l.max_output_tokens)),
                    supported_parameters: m
                        .supported_parameters
                        .clone()
                        .or_else(|| listed.map(|l| l.supported_parameters.clone())),
                    input_modalities: m.input.clone().or_else(|| {
                        listed
                            .filter(|l| !l.input_modalities.is_empty())
                            .map(|l| l.input_modalities.clone())
                    }),
                    prices_source,
                    // An endpoint that lists no models at all (an empty
                    // `/models`) says nothing of any id: unknown, not absent.
                    listed: catalog
                        .as_ref()
                        .filter(|c| !c.models.is_empty())
                        .map(|_| listed.is_some()),
                };
                (id.clone(), Arc::new(info))
            })
            .collect();
        *self.models.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(merged);
    }

    /// Runs one chat completion, as a run of its own. Never fails: a
    /// failure is in the outcome. Cancel by dropping the future; in-flight
    /// connections close with it.
    pub async fn complete(&self, request: &ChatRequest) -> Completion {
        let hooks = CallHooks {
            priority: Priority::new_run(),
            on_tokens: &|_| {},
            on_text: None,
            on_queued: &|_| {},
            on_retry: &|_, _, _, _| {},
            attempts: &Attempts::default(),
            search: None,
        };
        self.complete_watched(request, &hooks).await
    }

    /// `complete`, waiting for the provider's permits by `hooks.priority`,
    /// telling `hooks.on_tokens` how many answer and reasoning tokens
    /// (estimated) have arrived, as they arrive (streaming providers only),
    /// `hooks.on_queued` when it waits for a permit, and keeping what the
    /// attempts did in `hooks.attempts` as they go. A reply's usage and cost
    /// include what failed attempts streamed (estimated).
    pub async fn complete_watched(
        &self,
        request: &ChatRequest,
        hooks: &CallHooks<'_>,
    ) -> Completion {
        let attempts = hooks.attempts;
        let started = Instant::now();
        let (outcome, attempts) = match self.model(&request.model) {
            None => (
                Err(Failure::new(
                    FailureKind::UnknownModel,
                    format!(
                        "`{}` is not in the [models] table of the configuration",
                        request.model
                    ),
                )),
                0,
            ),
            Some(info) => {
                let provider = &self.providers[&info.provider];
                let empty = Map::new();
                let params = self.params.get(&request.model).unwrap_or(&empty);
                let search = self.search_plan(&request.model, hooks.search);
                let searching = search::merged(provider.extra_body(), &search);
                let extra = searching.as_ref().unwrap_or(provider.extra_body());
                let worst_tokens = estimate_prompt_tokens(request).saturating_add(u64::from(
                    self.max_tokens(request)
                        .or(info.max_output_tokens)
                        .unwrap_or(UNBOUNDED_ANSWER_TOKENS),
                ));
                let takes_tools = info.takes_tools();
                let send = |format: FormatSent| {
                    let body = wire::request_body(
                        request,
                        extra,
                        params,
                        provider.streams(),
                        format,
                        takes_tools,
                    );
                    provider.send(Bytes::from(body), &request.model, worst_tokens, hooks)
                };
                let outcome = match wire::forced_format(params) {
                    Some(forced) => send(forced).await.map(|r| r.sent(forced)),
                    None => {
                        let format = info.format_for(request.response_format.as_ref());
                        match send(format).await {
                            Err(refused)
                                if format != FormatSent::None && refuses_format(&refused) =>
                            {
                                tracing::info!(
                                    model = %request.model,
                                    "the provider refused the response format ({refused}); asking again without it"
                                );
                                send(FormatSent::None).await
                            }
                            outcome => outcome.map(|r| r.sent(format)),
                        }
                    }
                };
                (
                    outcome.map(|reply| {
                        with_cost(reply, &info, request, attempts.lost(), search.usd())
                    }),
                    attempts.started(),
                )
            }
        };
        Completion {
            id: None,
            label: request.label.clone(),
            model: request.model.clone(),
            latency_ms: millis(started.elapsed()),
            attempts,
            queued_ms: hooks.attempts.queued_ms(),
            ttft_ms: outcome.as_ref().ok().and(hooks.attempts.ttft_ms()),
            outcome,
        }
    }
}

/// Whether a failure is a provider refusing the request as asked (400,
/// 422, or OpenRouter's 404 "no endpoints … can handle the requested
/// parameters"): worth one more try without the response format.
fn refuses_format(failure: &Failure) -> bool {
    failure.kind == FailureKind::HttpStatus && matches!(failure.status, Some(400 | 404 | 422))
}
