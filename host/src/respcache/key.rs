//! What makes two requests identical for the response cache, and which
//! requests may be cached at all. The key is a SHA-256 over whose answers
//! they are (a client's: one client never gets another's answer, nor
//! learns that it was asked) and everything
//! that changes a model's answer: the provider's identity (name, base URL,
//! the body fields and headers it adds), the model and its configured parameters, the
//! exact messages, the attachments' bytes (by their hashes), the sampling
//! parameters, the response format and the web search. It never sees an
//! API key; the provider's configured headers go in only hashed.

use sha2::{Digest, Sha256};

use crate::llm::{ChatRequest, Sampling, WebSearch};

/// Bumped when what goes into a key changes, so old entries stop matching.
const VERSION: &[u8] = b"chorus-response-cache/2";

/// Who answers a request, beyond the model id: what the key takes of the
/// configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// Whose cache: the client the run is made for.
    pub scope: String,
    pub provider: String,
    pub base_url: String,
    /// The provider's `extra_body` and `headers` and the model's `params`
    /// and search settings, as written: they change the request sent.
    pub settings: String,
}

/// Whether a request's answer may be reused: deterministic sampling
/// (temperature 0, or a fixed seed), or sampled ones when `sampled` (the
/// pipeline's `cache_sampled`, or `chorus eval --cached`).
pub fn qualifies(sampling: &Sampling, sampled: bool) -> bool {
    sampled || sampling.seed.is_some() || sampling.temperature == Some(0.0)
}

/// The request's key: hex SHA-256.
pub fn key(identity: &Identity, request: &ChatRequest, search: Option<&WebSearch>) -> String {
    let mut hash = Hasher(Sha256::new());
    hash.field(VERSION);
    hash.field(identity.scope.as_bytes());
    hash.field(identity.provider.as_bytes());
    hash.field(identity.base_url.as_bytes());
    hash.field(identity.settings.as_bytes());
    hash.field(request.model.as_bytes());
    hash.count(request.messages.len());
    for message in &request.messages {
        hash.field(format!("{:?}", message.role).as_bytes());
        hash.field(message.content.as_bytes());
    }
    hash.count(request.attachments.len());
    for attachment in request.attachments.iter() {
        hash.field(format!("{:?}", attachment.kind).as_bytes());
        hash.field(attachment.mime.as_bytes());
        hash.field(attachment.name.as_bytes());
        hash.field(attachment.sha256.as_bytes());
    }
    // Where a plugin placed them (none: with the last user message, as
    // every key before placements was made, so those keys still match).
    if !request.placed.is_empty() {
        hash.field(b"placed");
        for placed in &request.placed {
            hash.field(format!("{}:{}:{}", placed.message, placed.at, placed.id).as_bytes());
        }
    }
    let Sampling {
        temperature,
        top_p,
        max_tokens,
        seed,
    } = request.sampling;
    hash.field(format!("{:?}", temperature.map(f32::to_bits)).as_bytes());
    hash.field(format!("{:?}", top_p.map(f32::to_bits)).as_bytes());
    hash.field(format!("{max_tokens:?}").as_bytes());
    hash.field(format!("{seed:?}").as_bytes());
    let format = serde_json::to_string(&request.response_format).unwrap_or_default();
    hash.field(format.as_bytes());
    hash.field(format!("{search:?}").as_bytes());
    crate::text::hex(&hash.0.finalize())
}

/// Each field length-prefixed, so no two different sequences of fields
/// hash the same bytes.
struct Hasher(Sha256);

impl Hasher {
    fn field(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.update(bytes);
    }

    fn count(&mut self, n: usize) {
        self.0.update((n as u64).to_le_bytes());
    }
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
