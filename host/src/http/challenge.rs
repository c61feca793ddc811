//! The `WWW-Authenticate` challenge of a 401, and the sentence it shares
//! with the discovery documents: chorus takes a static bearer token, not an
//! OAuth sign-in. Used by `access` (which refuses) and `discovery` (which
//! answers the lookups a client makes after a 401).

use axum::http::{HeaderMap, HeaderValue, header};

use super::MCP_PATH as PATH;

/// What every refusal of a sign-in says: the sentence clients show.
pub const STATIC_TOKEN: &str = "chorus takes a static bearer token, not an OAuth sign-in: \
     ask the server's operator for the token and set this client to send the header \
     `Authorization: Bearer <token>` (chorus's docs/clients.md shows how for each client); \
     if it sends one already, that token is wrong or revoked";

/// Where a client finds the protected-resource metadata (RFC 9728).
pub const PROTECTED_RESOURCE: &str = "/.well-known/oauth-protected-resource";

/// The `WWW-Authenticate` value of a 401: `description` says what was
/// wrong; where the metadata is, when the request says which host it is for.
pub fn challenge(headers: &HeaderMap, description: &str, token_sent: bool) -> HeaderValue {
    let description = format!("{description} {STATIC_TOKEN}")
        .replace(['"', '\\'], "'")
        .replace(|c: char| c.is_control(), " ");
    // RFC 6750 §3.1: a request that sent no credentials gets no error
    // code; what to do is still said, for the person reading it.
    let error = if token_sent {
        "error=\"invalid_token\", "
    } else {
        ""
    };
    let mut value = format!("Bearer realm=\"chorus\", {error}error_description=\"{description}\"");
    if let Some(origin) = origin(headers) {
        value.push_str(&format!(
            ", resource_metadata=\"{origin}{PROTECTED_RESOURCE}{PATH}\""
        ));
    }
    HeaderValue::from_str(&value)
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"chorus\""))
}

/// `scheme://host[:port]` as the client reached chorus: the Host header
/// (already checked by `access`), and https when a proxy in front says so.
pub fn origin(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
    let scheme = if https { "https" } else { "http" };
    Some(format!("{scheme}://{host}"))
}
