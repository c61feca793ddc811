//! A provider's model list, fetched: `GET {base_url}/models` with the
//! provider's headers and key, bounded in size and time, failures typed
//! and scrubbed like a chat call's.

use std::time::Duration;

use super::{ERROR_BODY_LIMIT, ProviderClient};
use crate::llm::timeouts::{Limits, Watch};
use crate::llm::types::{Failure, FailureKind};
use crate::llm::wire;

/// The largest model list accepted (OpenRouter's is a few MB).
const CATALOG_LIMIT: usize = 32 << 20;
/// A model list must arrive within this (and the provider's own limits).
const CATALOG_TIMEOUT: Duration = Duration::from_secs(30);

impl ProviderClient {
    /// `GET {base_url}/models`: the raw body, or why not (and whether the
    /// host could not even be connected to). Bounded in size and time; the
    /// key is sent when there is one (some servers need it).
    pub async fn fetch_models(&self) -> Result<Vec<u8>, (Failure, bool)> {
        let limits = Limits {
            request: self.limits.request.min(CATALOG_TIMEOUT),
            first_token: self.limits.request.min(CATALOG_TIMEOUT),
            ..self.limits.clone()
        };
        let mut watch = Watch::start(&limits);
        let request = self.auth.apply(
            self.http
                .get(self.models_url.clone())
                .headers(self.headers.clone()),
        );
        let scrub = |mut f: Failure| {
            f.message = self.scrubber.scrub_owned(f.message);
            f
        };
        let response = watch
            .bound(request.send())
            .await
            .map_err(|f| (f, false))?
            .map_err(|e| (scrub(self.transport_error(&e).failure), e.is_connect()))?;
        let status = response.status();
        if status.is_redirection() {
            return Err((self.redirect_failure(&response), false));
        }
        let ok = status.is_success();
        let limit = if ok { CATALOG_LIMIT } else { ERROR_BODY_LIMIT };
        let body = self
            .read_all(response, limit, &mut watch, !ok)
            .await
            .map_err(|e| (scrub(e.failure), false))?;
        if !ok {
            let text = String::from_utf8_lossy(&body);
            let message = wire::error_message(&text, &self.scrubber);
            let failure =
                Failure::new(FailureKind::HttpStatus, message).with_status(status.as_u16());
            return Err((failure, false));
        }
        Ok(body)
    }
}
