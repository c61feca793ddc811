//! A provider's `GET /models` body, read leniently: OpenRouter's shape,
//! OpenAI's, vLLM's (`max_model_len`) and LiteLLM's (`max_input_tokens`,
//! `max_output_tokens`), every field optional and of whatever type.

use serde::Deserialize;

use super::Listed;
use crate::llm::wire::lenient::{Number, Strings, Text};

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireModel<'a> {
    #[serde(borrow)]
    id: Text<'a>,
    #[serde(borrow)]
    name: Text<'a>,
    context_length: Number,
    context_window: Number,
    /// vLLM's name for the context window.
    max_model_len: Number,
    /// LiteLLM's names (its proxy's `/models` carries them from each
    /// model's `model_info`): the prompt's limit and the answer's.
    max_input_tokens: Number,
    max_output_tokens: Number,
    pricing: Option<WirePricing>,
    top_provider: Option<WireTop>,
    supported_parameters: Strings,
    architecture: Option<WireArchitecture>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireArchitecture {
    input_modalities: Strings,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WirePricing {
    prompt: Number,
    completion: Number,
    input_cache_read: Number,
    input_cache_write: Number,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireTop {
    context_length: Number,
    max_completion_tokens: Number,
}

#[derive(Deserialize)]
struct WireList<'a> {
    #[serde(borrow)]
    data: Vec<WireModel<'a>>,
}

/// Parses `{"data": [...]}` (or a bare list). Entries without an id are
/// skipped; prices per token become prices per million.
pub fn parse(body: &[u8]) -> Result<Vec<Listed>, String> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let models: Vec<WireModel> = match first {
        Some(b'[') => serde_json::from_slice(body).map_err(|e| e.to_string())?,
        _ => {
            serde_json::from_slice::<WireList>(body)
                .map_err(|e| format!("expected {{\"data\": [...]}} ({e})"))?
                .data
        }
    };
    Ok(models
        .into_iter()
        .filter_map(|m| {
            let id = m.id.into_string().filter(|id| !id.is_empty())?;
            let top = m.top_provider.unwrap_or_default();
            let pricing = m.pricing.unwrap_or_default();
            Some(Listed {
                id,
                name: m.name.into_string(),
                context_window: m
                    .context_length
                    .count()
                    .or(m.context_window.count())
                    .or(m.max_model_len.count())
                    .or(top.context_length.count())
                    .or(m.max_input_tokens.count())
                    .filter(|&n| n > 0),
                max_output_tokens: top
                    .max_completion_tokens
                    .count()
                    .or(m.max_output_tokens.count())
                    .filter(|&n| n > 0),
                input_price: per_million(pricing.prompt),
                output_price: per_million(pricing.completion),
                cache_read_price: per_million(pricing.input_cache_read),
                cache_write_price: per_million(pricing.input_cache_write),
                supported_parameters: m.supported_parameters.0,
                input_modalities: m.architecture.unwrap_or_default().input_modalities.0,
            })
        })
        .collect())
}

/// USD per token → USD per million tokens, without float noise.
fn per_million(per_token: Number) -> Option<f64> {
    per_token.0.map(|p| (p * 1e15).round() / 1e9)
}
