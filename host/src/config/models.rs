//! `[models."ID"]`: the models the plugins may use and what chorus knows
//! about each (provider, prices, context, inputs, fallbacks, search), with
//! the check of a model on its own. Which provider and which fallbacks it
//! names are checked across sections, in `validate.rs` and `fallbacks.rs`.

use serde::Deserialize;

use super::check::{Invalid, MAX_PRICE, search_results};
use super::providers::{RESERVED_BODY_FIELDS, stream_hint};

/// The input kinds a model may list.
pub const MODALITIES: [&str; 4] = ["text", "image", "file", "audio"];

/// A model the plugins may use, and what chorus knows about it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Which provider serves it; may be left out when there is one provider.
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub context_window: Option<u32>,
    /// USD per million prompt tokens.
    #[serde(default)]
    pub input_price: Option<f64>,
    /// USD per million completion tokens.
    #[serde(default)]
    pub output_price: Option<f64>,
    /// The most tokens one reply may have (the catalog's figure otherwise);
    /// bounds a call's worst-case cost when the request sets no max_tokens.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Request parameters the model accepts, when its provider's catalog
    /// does not say (or says wrong): e.g. `["structured_outputs"]` lets
    /// plugins ask it for JSON of a schema. Wins over the catalog.
    #[serde(default)]
    pub supported_parameters: Option<Vec<String>>,
    /// What the model takes as input (`text`, `image`, `file`, `audio`),
    /// when its provider's catalog does not say (or says wrong). Wins over
    /// the catalog.
    #[serde(default)]
    pub input: Option<Vec<String>>,
    /// JSON fields merged into every request body for this model, over the
    /// provider's `extra_body` and the plugins' sampling: e.g. OpenRouter's
    /// `reasoning = { effort = "high" }`, `max_tokens`, `provider = { … }`.
    #[serde(default)]
    pub params: toml::Table,
    /// Models (of [models]) tried in order, once each, when this one fails
    /// for good — not found or retired, the account out of credit, the
    /// provider down after its retries — so its seat is still filled.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Every call to this model searches the web.
    #[serde(default)]
    pub web_search: bool,
    /// Most search results a call to this model reads (providers that
    /// take a number). Wins over the pipeline's.
    #[serde(default)]
    pub web_search_max_results: Option<u32>,
    /// `"low"`, `"medium"` or `"high"`. Wins over the pipeline's.
    #[serde(default)]
    pub web_search_context: Option<super::search::SearchContext>,
}

impl Model {
    /// `Err((key, message))` for the first key of model `id` that is wrong
    /// on its own.
    pub(super) fn check(&self, id: &str) -> Result<(), Invalid> {
        search_results(
            &format!("models.\"{id}\".web_search_max_results"),
            self.web_search_max_results,
        )?;
        for (k, price) in [
            ("input_price", self.input_price),
            ("output_price", self.output_price),
        ] {
            if price.is_some_and(|p| !p.is_finite() || !(0.0..=MAX_PRICE).contains(&p)) {
                return Err((
                    format!("models.\"{id}\".{k}"),
                    format!("must be a price in USD per million tokens, from 0 to {MAX_PRICE}"),
                ));
            }
        }
        if self.max_output_tokens == Some(0) {
            return Err((
                format!("models.\"{id}\".max_output_tokens"),
                "must be at least 1".into(),
            ));
        }
        for field in RESERVED_BODY_FIELDS {
            if self.params.contains_key(field) {
                let provider = self.provider.as_deref().unwrap_or("NAME");
                return Err((
                    format!("models.\"{id}\".params.{field}"),
                    format!("`{field}` is set by chorus{}", stream_hint(field, provider)),
                ));
            }
        }
        for kind in self.input.iter().flatten() {
            if !MODALITIES.contains(&kind.as_str()) {
                return Err((
                    format!("models.\"{id}\".input"),
                    format!("unknown input `{kind}`: use {}", MODALITIES.join(", ")),
                ));
            }
        }
        Ok(())
    }
}
