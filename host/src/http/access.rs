//! Who may use chorus over HTTP, decided before a request reaches MCP, in
//! this order:
//!
//! 1. the `Host` header names this server (a guard against DNS rebinding:
//!    a web page cannot point its own domain at 127.0.0.1 and talk to us);
//! 2. a browser's `Origin`, when there is one, is this server's own (the
//!    Host it named, which step 1 found to be one of ours) or an allowed
//!    origin (MCP's transport spec: a present, invalid Origin gets 403;
//!    requests without one — every non-browser client — pass);
//! 3. the bearer token, when the server has any (401 with
//!    `WWW-Authenticate: Bearer` otherwise): it names the client (see
//!    [`Clients`]), which is put in the request's extensions for MCP and
//!    the run viewer to hold to its grants.
//!
//! Each refusal says what was wrong and what to do about it: as a JSON-RPC
//! error to an MCP client (one that accepts `application/json`), so the
//! SDKs show the message rather than a bare status; as plain text to
//! anything else (curl, a browser).

use std::str::FromStr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::clients::Clients;
use crate::app::AUDIT;
use crate::client::Client;

/// The names a client may use to reach the server (the `Host` header).
#[derive(Debug, Clone)]
pub struct Hosts {
    any: bool,
    /// Lowercase host (IPv6 without brackets), and a port when the entry
    /// names one; an entry without a port matches any port.
    names: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// `entries` are host names or addresses, optionally with a port;
    /// `*` accepts any Host.
    pub fn new<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut hosts = Self {
            any: false,
            names: Vec::new(),
        };
        for entry in entries {
            let entry = entry.trim();
            if entry == "*" {
                hosts.any = true;
                continue;
            }
            let name = parse_host(entry).ok_or_else(|| {
                format!("`{entry}` is not a host name (expected e.g. `chorus.example.com` or `10.0.0.5:8080`)")
            })?;
            if !hosts.names.contains(&name) {
                hosts.names.push(name);
            }
        }
        Ok(hosts)
    }

    /// Whether every Host is accepted (`*`).
    pub fn any(&self) -> bool {
        self.any
    }

    /// Whether `host` is an IP address, with or without a port: a Host
    /// that no DNS rebinding makes a browser send.
    pub fn is_address(host: &str) -> bool {
        parse_host(host).is_some_and(|(name, _)| name.parse::<std::net::IpAddr>().is_ok())
    }

    pub fn allows(&self, host: &str) -> bool {
        self.any || self.names(host)
    }

    /// Whether `host` is one of the names given, not merely let in by `*`:
    /// only such a name vouches for a page at that origin being ours.
    fn names(&self, host: &str) -> bool {
        let Some((name, port)) = parse_host(host) else {
            return false;
        };
        self.names.iter().any(|(allowed, allowed_port)| {
            *allowed == name && allowed_port.is_none_or(|p| Some(p) == port)
        })
    }

    /// For the startup message.
    pub fn describe(&self) -> String {
        if self.any {
            return "any".into();
        }
        let names: Vec<String> = self
            .names
            .iter()
            .map(|(name, port)| match port {
                Some(port) if name.contains(':') => format!("[{name}]:{port}"),
                Some(port) => format!("{name}:{port}"),
                None => name.clone(),
            })
            .collect();
        names.join(", ")
    }
}

fn parse_host(text: &str) -> Option<(String, Option<u16>)> {
    let bare_v6 = text.contains("::") && !text.starts_with('[');
    let text = if bare_v6 {
        format!("[{text}]")
    } else {
        text.to_owned()
    };
    let authority = Authority::from_str(&text).ok()?;
    if authority.as_str().contains('@') {
        return None;
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    (!host.is_empty()).then_some((host, authority.port_u16()))
}

/// The browser origins allowed to call chorus, as browsers write them
/// (`https://app.example.com`, `http://localhost:6274`).
#[derive(Debug, Clone, Default)]
pub struct Origins {
    allowed: Vec<String>,
}

impl Origins {
    pub fn new<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut allowed = Vec::new();
        for entry in entries {
            let origin = canonical_origin(entry.trim()).ok_or_else(|| {
                format!("`{entry}` is not an origin (expected scheme://host[:port], e.g. `https://app.example.com` or `http://localhost:6274`, with no path)")
            })?;
            if !allowed.contains(&origin) {
                allowed.push(origin);
            }
        }
        Ok(Self { allowed })
    }

    pub fn allows(&self, origin: &str) -> bool {
        canonical_origin(origin).is_some_and(|origin| self.allowed.contains(&origin))
    }

    pub fn list(&self) -> &[String] {
        &self.allowed
    }
}

/// `scheme://host[:port]` with the default port left out and the host in
/// lowercase, as a browser sends it; `None` for anything else (`null`, a
/// path, a scheme that has no network origin).
fn canonical_origin(text: &str) -> Option<String> {
    let url = url::Url::parse(text).ok()?;
    let bare = matches!(url.path(), "" | "/") && url.query().is_none() && url.fragment().is_none();
    let plain = url.username().is_empty() && url.password().is_none();
    if !bare || !plain || !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    match url.origin() {
        url::Origin::Tuple(..) => Some(url.origin().ascii_serialization()),
        url::Origin::Opaque(_) => None,
    }
}

/// Whether `origin` is the server as the browser reached it: its authority
/// is the request's `host` (a default port left out on both sides, as
/// browsers write them). `https` too: a TLS proxy in front of chorus keeps
/// the Host, and the page is still the server's own.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some(origin) = canonical_origin(origin) else {
        return false;
    };
    let Ok(url) = url::Url::parse(&origin) else {
        return false;
    };
    let (Some(name), Some((host_name, host_port))) = (url.host_str(), parse_host(host)) else {
        return false;
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case(&host_name) && url.port() == host_port
}

/// Everything [`check`] needs.
#[derive(Debug)]
pub struct Access {
    pub clients: Clients,
    pub hosts: Hosts,
    pub origins: Origins,
    /// Who a request is when the server has no token (loopback only).
    pub open: Arc<Client>,
}

/// The middleware: refuses what [`Access`] does not allow, passes the rest
/// with its [`Client`] in the request's extensions, and marks the response
/// [`Proven`](super::listen::Proven): its connection carried a request
/// that passed the checks.
pub async fn check(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    match access.let_in(request) {
        Err(refusal) => *refusal,
        Ok(request) => {
            let mut response = next.run(request).await;
            response.extensions_mut().insert(super::listen::Proven);
            response
        }
    }
}

/// [`check`] for open paths (discovery documents): the same refusals, but
/// a request let in proves nothing of its connection.
pub async fn check_open(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    match access.let_in(request) {
        Err(refusal) => *refusal,
        Ok(request) => next.run(request).await,
    }
}

impl Access {
    /// `request` with its client, or the response refusing it. Decided
    /// before anything is awaited: a borrowed request would make the
    /// middleware's future not Send (a body is not Sync).
    fn let_in(&self, mut request: Request) -> Result<Request, Box<Response>> {
        let client = self.client(&request)?;
        request.extensions_mut().insert(client);
        Ok(request)
    }

    /// Whether a browser at `origin` may call the server reached as `host`
    /// (a Host already allowed): its own origin, or one allowed by
    /// `--allow-origin`. A page at the server's own origin cannot be a DNS
    /// rebinding attack — the rebound name would have failed the Host check
    /// — unless every Host is let in (`--allow-host '*'`), where only
    /// the names given still vouch for it.
    pub fn allows_origin(&self, origin: &str, host: &str) -> bool {
        self.origins.allows(origin) || (self.hosts.names(host) && same_origin(origin, host))
    }

    /// Whether the server takes tokens at all.
    pub fn needs_token(&self) -> bool {
        self.clients.any()
    }

    /// The request's client, or the response refusing it.
    fn client(&self, request: &Request) -> Result<Arc<Client>, Box<Response>> {
        if let Some(refusal) = self.refusal(request) {
            return Err(Box::new(refusal));
        }
        if !self.clients.any() {
            return Ok(self.open.clone());
        }
        // `refusal` found the token; found again, as what it names.
        bearer(request.headers())
            .and_then(|given| self.clients.find(given))
            .ok_or_else(|| {
                Box::new(plain(
                    StatusCode::UNAUTHORIZED,
                    "chorus: unknown token\n".into(),
                ))
            })
    }

    fn refusal(&self, request: &Request) -> Option<Response> {
        let headers = request.headers();
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| request.uri().authority().map(|a| a.to_string()));
        let host = match host {
            Some(host) if self.hosts.allows(&host) => host,
            Some(host) => {
                tracing::info!(target: AUDIT, %host, "refused a request for a host name not allowed");
                let bare = parse_host(&host).map_or(host.clone(), |(name, _)| name);
                return Some(refuse(
                    headers,
                    StatusCode::FORBIDDEN,
                    format!(
                        "chorus: Host `{host}` is not one of this server's names ({}); this guards against DNS rebinding. \
                         If clients reach chorus by this name, start it with `--allow-host {bare}`.\n",
                        self.hosts.describe()
                    ),
                ));
            }
            None => {
                return Some(refuse(
                    headers,
                    StatusCode::BAD_REQUEST,
                    "chorus: the request has no Host header.\n".into(),
                ));
            }
        };
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            if !self.allows_origin(&origin, &host) {
                tracing::info!(target: AUDIT, %origin, "refused a browser request from an origin not allowed");
                return Some(refuse(
                    headers,
                    StatusCode::FORBIDDEN,
                    format!(
                        "chorus: requests from the web origin `{origin}` are not allowed. \
                         To let a browser app call chorus, start it with `--allow-origin {origin}`.\n"
                    ),
                ));
            }
        }
        if !self.clients.any() {
            return None;
        }
        match bearer(headers) {
            Some(given) if self.clients.find(given).is_some() => None,
            Some(_) => {
                tracing::info!(target: AUDIT, client = "-", reason = "unknown or revoked token", "refused a request with a wrong bearer token");
                Some(unauthorized(
                    headers,
                    super::challenge::challenge(
                        headers,
                        "The bearer token sent is wrong or revoked.",
                        true,
                    ),
                    "chorus: the bearer token is wrong or revoked: send `Authorization: Bearer <token>` with the token the server's operator gave you (CHORUS_TOKEN, or your own from [[http.clients]]).\n",
                ))
            }
            None => Some({
                tracing::info!(target: AUDIT, client = "-", reason = "no token", "refused a request without a bearer token");
                unauthorized(
                    headers,
                    super::challenge::challenge(headers, "No bearer token was sent.", false),
                    "chorus: this server needs a bearer token: send `Authorization: Bearer <token>` with the token the server was started with (its CHORUS_TOKEN).\n",
                )
            }),
        }
    }
}

pub use crate::token::bearer;

fn unauthorized(headers: &HeaderMap, challenge: HeaderValue, message: &'static str) -> Response {
    let mut response = refuse(headers, StatusCode::UNAUTHORIZED, message.into());
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, challenge);
    response
}

/// JSON-RPC's range for errors a server defines; chorus's HTTP refusals
/// use this one, with the HTTP status in `data`.
const REFUSED: i64 = -32000;

/// A refusal in the form the client reads: a JSON-RPC error (with a null
/// id: the request was not read) when it accepts `application/json`, as
/// every MCP client's POST does; plain text otherwise.
pub fn refuse(headers: &HeaderMap, status: StatusCode, message: String) -> Response {
    let json = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|kind| {
            let kind = kind.split(';').next().unwrap_or_default().trim();
            kind.eq_ignore_ascii_case("application/json")
        });
    if !json {
        return plain(status, message);
    }
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": REFUSED,
            "message": message.trim_end(),
            "data": {"http_status": status.as_u16()},
        },
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub fn plain(status: StatusCode, message: String) -> Response {
    let mut response = Response::new(Body::from(message));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests;
