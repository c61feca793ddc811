//! What chorus answers to an MCP client that reads its `401` as the start
//! of an OAuth sign-in. MCP's authorization spec has clients look up, in
//! turn, the protected-resource metadata (RFC 9728), the authorization
//! server's metadata (RFC 8414, or OpenID's), and then register themselves
//! (RFC 7591) — and they show the person whatever the last answer says.
//! chorus takes a static bearer token and runs no authorization server, so:
//!
//! - the protected-resource metadata is a real document that names no
//!   authorization server and says the token goes in a header;
//! - authorization-server metadata and client registration are JSON 404s
//!   whose `error_description` says how to give the client the token, which
//!   is the sentence a client shows when its sign-in stops;
//! - the `WWW-Authenticate` challenge of a 401 carries the same sentence and
//!   where the metadata is.
//!
//! None of these needs the token, and none says more than the above; they
//! pass the same Host and Origin checks as everything else. A server
//! without a token refuses no one and answers none of them.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{any, get};
use serde::Serialize;

use super::MCP_PATH as PATH;
use super::access::{self, Access};
use super::challenge::{PROTECTED_RESOURCE, STATIC_TOKEN, origin};
use super::clients::Clients;

/// Where the person finds how to set each client up.
const DOCUMENTATION: &str = "https://github.com/chorus-mcp/chorus/blob/main/docs/clients.md";

const AUTHORIZATION_SERVER: &str = "/.well-known/oauth-authorization-server";
const OPENID: &str = "/.well-known/openid-configuration";

/// The discovery routes, behind the Host and Origin checks of `access`
/// but not its token; none when the server has no token (no client is
/// refused, and there would be nothing true to say).
pub fn routes(access: &Access) -> Router {
    if !access.needs_token() {
        return Router::new();
    }
    let open = Arc::new(Access {
        clients: Clients::none(),
        hosts: access.hosts.clone(),
        origins: access.origins.clone(),
        open: access.open.clone(),
    });
    let mut router = Router::new()
        // RFC 9728 §3.1: the well-known string goes before the resource's
        // path; some clients also try it after.
        .route(PROTECTED_RESOURCE, get(|r: Request| metadata(r, "")))
        .route(
            &format!("{PROTECTED_RESOURCE}{PATH}"),
            get(|r: Request| metadata(r, PATH)),
        )
        .route(
            &format!("{PATH}{PROTECTED_RESOURCE}"),
            get(|r: Request| metadata(r, PATH)),
        )
        .route("/register", any(no_registration));
    for not_here in [AUTHORIZATION_SERVER, OPENID] {
        for path in [
            not_here.to_owned(),
            format!("{not_here}{PATH}"),
            format!("{PATH}{not_here}"),
        ] {
            router = router.route(&path, any(no_authorization_server));
        }
    }
    router.layer(axum::middleware::from_fn_with_state(
        open,
        access::check_open,
    ))
}

/// RFC 9728's protected-resource metadata, with no `authorization_servers`:
/// no server issues tokens for chorus; its operator gives them out.
#[derive(Serialize)]
struct ResourceMetadata {
    resource: String,
    resource_name: &'static str,
    bearer_methods_supported: [&'static str; 1],
    resource_documentation: &'static str,
    /// For the person reading it (RFC 9728 §2 allows more members).
    authentication: &'static str,
}

async fn metadata(request: Request, path: &str) -> Response {
    let Some(origin) = origin(request.headers()) else {
        return access::plain(
            StatusCode::BAD_REQUEST,
            "chorus: the request has no Host header.\n".into(),
        );
    };
    json(
        StatusCode::OK,
        &ResourceMetadata {
            resource: format!("{origin}{path}"),
            resource_name: "chorus",
            bearer_methods_supported: ["header"],
            resource_documentation: DOCUMENTATION,
            authentication: STATIC_TOKEN,
        },
    )
}

/// An OAuth error response (RFC 6749 §5.2, RFC 7591 §3.2.2), the sentence
/// first: some clients print the body as it is.
#[derive(Serialize)]
struct OAuthError {
    error_description: String,
    error: &'static str,
    error_uri: &'static str,
}

async fn no_authorization_server() -> Response {
    json(
        StatusCode::NOT_FOUND,
        &OAuthError {
            error_description: format!(
                "{STATIC_TOKEN}; this server is no OAuth authorization server."
            ),
            error: "not_an_authorization_server",
            error_uri: DOCUMENTATION,
        },
    )
}

async fn no_registration() -> Response {
    json(
        StatusCode::NOT_FOUND,
        &OAuthError {
            error_description: format!("{STATIC_TOKEN}; there is no client registration."),
            error: "registration_not_supported",
            error_uri: DOCUMENTATION,
        },
    )
}

fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let body = serde_json::to_string(body).expect("plain structs serialize");
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;

    use super::super::challenge::challenge;
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn the_challenge_says_what_to_do_and_where_the_metadata_is() {
        let value = challenge(
            &headers(&[("host", "127.0.0.1:8080")]),
            "the \"token\" is\nmissing.",
            true,
        );
        let value = value.to_str().unwrap();
        assert!(value.starts_with("Bearer realm=\"chorus\", error=\"invalid_token\", error_description=\"the 'token' is missing. chorus takes a static bearer token"), "{value}");
        assert!(
            value.ends_with(
                "resource_metadata=\"http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp\""
            ),
            "{value}"
        );
        let proxied = challenge(
            &headers(&[
                ("host", "chorus.example.com"),
                ("x-forwarded-proto", "https"),
            ]),
            "missing.",
            false,
        );
        assert!(
            proxied
                .to_str()
                .unwrap()
                .contains("\"https://chorus.example.com/.well-known/"),
            "{proxied:?}"
        );
        assert!(
            !proxied.to_str().unwrap().contains("error="),
            "no credentials sent, no error code (RFC 6750 §3.1): {proxied:?}"
        );
        let hostless = challenge(&HeaderMap::new(), "wrong.", true);
        assert!(!hostless.to_str().unwrap().contains("resource_metadata"));
    }
}
