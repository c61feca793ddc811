//! What chorus knows about one model it can call — the configuration's
//! word completed by the provider's catalog — and what follows from it:
//! the response format it takes, the inputs it reads, what tokens cost.

use serde::Serialize;

use super::{FormatSent, ResponseFormat};

/// What chorus knows about a model it can call: the configuration's word,
/// completed by the provider's catalog where the configuration is silent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInfo {
    pub id: String,
    pub provider: String,
    pub context_window: Option<u32>,
    /// USD per million prompt tokens.
    pub input_price: Option<f64>,
    /// USD per million completion tokens.
    pub output_price: Option<f64>,
    /// USD per million prompt tokens read from the provider's prompt
    /// cache, from the catalog (`pricing.input_cache_read`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_price: Option<f64>,
    /// USD per million prompt tokens written to the prompt cache, from the
    /// catalog (`pricing.input_cache_write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_price: Option<f64>,
    pub tags: Vec<String>,
    /// The most tokens one reply may have, when known.
    pub max_output_tokens: Option<u32>,
    /// Request parameters the provider says the model accepts (`None`:
    /// not known).
    pub supported_parameters: Option<Vec<String>>,
    /// What the model takes as input (`text`, `image`, `file`, `audio`):
    /// `[models] input`, else the catalog's; `None`: nobody says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_modalities: Option<Vec<String>>,
    /// Where the prices come from, when there are any.
    pub prices_source: Option<PriceSource>,
    /// Whether the provider's catalog lists the model (`None`: no catalog).
    pub listed: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PriceSource {
    Config,
    Catalog,
}

impl ModelInfo {
    /// How much of `asked` this model takes, by its supported parameters:
    /// a schema where it has `structured_outputs`, JSON mode where it has
    /// `response_format` (or structured outputs), nothing where it has
    /// neither or nobody says.
    pub fn format_for(&self, asked: Option<&ResponseFormat>) -> FormatSent {
        let Some(asked) = asked else {
            return FormatSent::None;
        };
        let accepts = |name: &str| {
            self.supported_parameters
                .as_deref()
                .is_some_and(|params| params.iter().any(|p| p == name))
        };
        match asked {
            ResponseFormat::JsonSchema(_) if accepts("structured_outputs") => {
                FormatSent::JsonSchema
            }
            _ if accepts("response_format") || accepts("structured_outputs") => {
                FormatSent::JsonObject
            }
            _ => FormatSent::None,
        }
    }

    /// Whether the model takes OpenAI's `tools` (its supported parameters
    /// say `tools`); one that does not is sent a caller's tool exchange
    /// in words, and answers in text.
    pub fn takes_tools(&self) -> bool {
        self.supported_parameters
            .as_deref()
            .is_some_and(|params| params.iter().any(|p| p == "tools"))
    }

    /// Whether the model takes `kind` as it is: text always; the rest when
    /// its input modalities list it.
    pub fn takes(&self, kind: crate::attach::Kind) -> bool {
        kind == crate::attach::Kind::Text
            || self
                .input_modalities
                .as_deref()
                .is_some_and(|m| m.iter().any(|k| k == kind.modality()))
    }

    /// USD for these token counts, when both prices are known.
    pub fn cost(&self, prompt_tokens: u64, completion_tokens: u64) -> Option<f64> {
        self.cost_cached(prompt_tokens, 0, 0, completion_tokens)
    }

    /// USD for these token counts, of whose prompt tokens `cached` were
    /// read from the provider's prompt cache and `written` written to it:
    /// those at the cache prices (the input price where there is none),
    /// when the input and output prices are known.
    pub fn cost_cached(
        &self,
        prompt_tokens: u64,
        cached: u64,
        written: u64,
        completion_tokens: u64,
    ) -> Option<f64> {
        let (input, output) = (self.input_price?, self.output_price?);
        let cached = cached.min(prompt_tokens);
        let written = written.min(prompt_tokens - cached);
        let plain = prompt_tokens - cached - written;
        let usd = plain as f64 * input
            + cached as f64 * self.cache_read_price.unwrap_or(input)
            + written as f64 * self.cache_write_price.unwrap_or(input)
            + completion_tokens as f64 * output;
        Some(usd / 1_000_000.0)
    }
}
