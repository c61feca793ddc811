//! The OpenAI-compatible client: which provider serves which model, one
//! shared connection pool per provider, retries, typed failures, usage and
//! cost. Knows nothing about runs, plugins or MCP.

mod client;
mod types;
mod wire;

use std::collections::HashMap;

use indexmap::IndexMap;
use std::sync::Arc;
use std::time::Instant;

pub use types::*;

use crate::config::{ConfigError, Loaded};
use client::ProviderClient;

/// What chorus knows about a model it can call.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelInfo {
    pub id: String,
    pub provider: String,
    pub context_window: Option<u32>,
    pub input_price: Option<f64>,
    pub output_price: Option<f64>,
    pub tags: Vec<String>,
}

/// All providers and the model catalog, built once at startup and shared.
pub struct Llm {
    providers: HashMap<String, Arc<ProviderClient>>,
    /// In config order.
    catalog: IndexMap<String, ModelInfo>,
}

impl Llm {
    pub fn new(loaded: &Loaded) -> Result<Self, ConfigError> {
        let mut providers = HashMap::new();
        for (name, provider) in &loaded.config.providers {
            let client = ProviderClient::new(name, provider)
                .map_err(|(key, message)| loaded.error(key, message))?;
            providers.insert(name.clone(), Arc::new(client));
        }
        let catalog = loaded
            .config
            .models
            .iter()
            .map(|(id, m)| {
                let info = ModelInfo {
                    id: id.clone(),
                    provider: loaded.provider_of(m).to_owned(),
                    context_window: m.context_window,
                    input_price: m.input_price,
                    output_price: m.output_price,
                    tags: m.tags.clone(),
                };
                (id.clone(), info)
            })
            .collect();
        Ok(Self { providers, catalog })
    }

    pub fn catalog(&self) -> impl Iterator<Item = &ModelInfo> {
        self.catalog.values()
    }

    pub fn model(&self, id: &str) -> Option<&ModelInfo> {
        self.catalog.get(id)
    }

    /// Providers whose API-key variable is not set: `(provider, variable)`.
    pub fn missing_keys(&self) -> Vec<(&str, &str)> {
        let mut missing: Vec<_> = self
            .providers
            .values()
            .filter_map(|p| p.missing_key().map(|var| (p.name.as_str(), var)))
            .collect();
        missing.sort_unstable();
        missing
    }

    /// Runs one chat completion. Never fails: a failure is in the outcome.
    /// Cancel by dropping the future; in-flight connections close with it.
    pub async fn complete(&self, request: &ChatRequest) -> Completion {
        let started = Instant::now();
        let (outcome, attempts) = match self.catalog.get(&request.model) {
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
                let body = wire::request_body(request, provider.extra_body());
                let (outcome, attempts) = provider.send(&body, &request.model).await;
                (outcome.map(|reply| with_cost(reply, info)), attempts)
            }
        };
        Completion {
            id: None,
            label: request.label.clone(),
            model: request.model.clone(),
            latency_ms: u32::try_from(started.elapsed().as_millis()).unwrap_or(u32::MAX),
            attempts,
            outcome,
        }
    }
}

/// Fills in the cost from configured prices when the provider did not say.
fn with_cost(mut reply: Reply, model: &ModelInfo) -> Reply {
    if let Some(usage) = reply.usage.as_mut()
        && usage.cost.is_none()
        && let (Some(input), Some(output)) = (model.input_price, model.output_price)
    {
        usage.cost = Some(
            (f64::from(usage.prompt_tokens) * input + f64::from(usage.completion_tokens) * output)
                / 1_000_000.0,
        );
    }
    reply
}
