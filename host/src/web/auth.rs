//! Who may see the run viewer, decided before a page is made:
//!
//! 1. the Host and Origin rules of HTTP mode (`http::Access`): the
//!    `Host` header names this server; a browser's `Origin`, when sent, is
//!    this server itself or an allowed origin (a form posted from another
//!    site is refused);
//! 2. `Authorization: Bearer <token>` (scripts, tests), or a session cookie
//!    got by signing in once with a token posted by the sign-in form — any
//!    `[[http.clients]]` client's, or the server's CHORUS_TOKEN — or, from
//!    `chorus ui`, with the one-time token in the URL it prints (the only
//!    token a URL may carry: a link that signs a browser in as someone
//!    else, or a long-lived token in proxy logs, is refused). Sessions
//!    last `SESSION_LIFETIME`, each client holding at most
//!    `SESSIONS_PER_CLIENT` (signing in again forgets its own oldest, never
//!    another client's). A server without any token (loopback, no
//!    CHORUS_TOKEN) gives every visitor a session;
//! 3. a POST made with the cookie carries the session's CSRF token
//!    ([`Guard::check_csrf`], called by the handler that reads the form).
//!
//! Each request let in carries the [`Client`] it is made for (the token's
//! client, or the one a session was signed in as): the pages show it the
//! runs it may see (`app::visible`), as MCP does. Tokens and session ids
//! are compared as SHA-256 digests in constant time; only digests are kept.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

use crate::client::Client;
use crate::http::{Access, Token, plain};
use crate::text::hex;

/// The session cookie's name.
pub const COOKIE: &str = "chorus_session";
/// Its name over TLS: a `__Host-` cookie is `Secure`, for this host only
/// and for every path, so no sibling domain or plain-HTTP page can set it.
pub const SECURE_COOKIE: &str = "__Host-chorus_session";
/// Sessions one client keeps; signing in past this forgets its oldest.
const SESSIONS_PER_CLIENT: usize = 16;
/// How long a session lasts from its sign-in.
const SESSION_LIFETIME: std::time::Duration = std::time::Duration::from_secs(12 * 3600);
/// Paths anyone who passes the Host/Origin rules may fetch.
const OPEN_PATHS: [&str; 2] = ["/sign-in", "/assets/"];

/// Who made a request, once it is let in. With a `Bearer` or a
/// `Session`, the request's extensions also hold its `Arc<Client>`.
#[derive(Debug, Clone)]
pub enum Who {
    /// `Authorization: Bearer` with a client's token: no cookie, so no
    /// CSRF token is needed (another site cannot make a browser send it).
    Bearer,
    /// A browser session, by its id (hex).
    Session(String),
    /// A page anyone may fetch (sign-in, assets).
    Anyone,
}

pub struct Guard {
    access: Arc<Access>,
    /// `chorus ui`'s sign-in token, forgotten once used.
    one_time: Mutex<Option<Token>>,
    /// Whether a visitor must sign in; else each gets a session unasked.
    sign_in: bool,
    /// The sessions handed out, oldest first.
    sessions: Mutex<VecDeque<Session>>,
    /// Keys the CSRF tokens: sha256(key ‖ session id).
    csrf_key: [u8; 32],
}

/// One signed-in browser: its id's digest, whom it was signed in as, and
/// until when.
struct Session {
    digest: [u8; 32],
    client: Arc<Client>,
    expires: std::time::Instant,
}

/// A random 32 bytes from the system.
pub fn random() -> Result<[u8; 32], String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("the system gave no random bytes: {e}"))?;
    Ok(bytes)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

use crate::token::digest;

impl Guard {
    /// `one_time`: the token `chorus ui` prints in its URL.
    pub fn new(access: Arc<Access>, one_time: Option<&str>) -> Result<Self, String> {
        let one_time = one_time.map(Token::new).transpose()?;
        Ok(Self {
            sign_in: access.needs_token() || one_time.is_some(),
            access,
            one_time: Mutex::new(one_time),
            sessions: Mutex::new(VecDeque::new()),
            csrf_key: random()?,
        })
    }

    /// The client `given` (posted by the sign-in form) signs a browser in
    /// as: the client whose token it is (who then sees the runs it may
    /// see), or — for the one-time token, which it uses up — the person at
    /// this machine.
    pub fn signs_in(&self, given: &str) -> Option<Arc<Client>> {
        if let Some(client) = self.access.clients.find(given) {
            return Some(client);
        }
        self.signs_in_by_link(given)
    }

    /// The client a token in a URL (`GET /sign-in?token=`) signs a browser
    /// in as: the one-time token of `chorus ui` only.
    pub fn signs_in_by_link(&self, given: &str) -> Option<Arc<Client>> {
        let mut one_time = lock(&self.one_time);
        if one_time.as_ref().is_some_and(|t| t.matches(given)) {
            *one_time = None;
            return Some(self.access.open.clone());
        }
        None
    }

    /// A new session for `client`; its id goes in the cookie.
    pub fn new_session(&self, client: Arc<Client>) -> Result<String, String> {
        let id = hex(&random()?);
        let now = std::time::Instant::now();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.expires > now);
        let own = sessions
            .iter()
            .filter(|s| s.client.name == client.name)
            .count();
        if own >= SESSIONS_PER_CLIENT
            && let Some(oldest) = sessions.iter().position(|s| s.client.name == client.name)
        {
            sessions.remove(oldest);
        }
        sessions.push_back(Session {
            digest: digest(&id),
            client,
            expires: now + SESSION_LIFETIME,
        });
        Ok(id)
    }

    /// The client session `id` was signed in as, if it is one of ours.
    fn session(&self, id: &str) -> Option<Arc<Client>> {
        let given = digest(id);
        let now = std::time::Instant::now();
        // Every entry is compared, so the time says nothing of which matched.
        let mut found = None;
        for session in lock(&self.sessions).iter() {
            if crate::token::same_digest(&session.digest, &given) && session.expires > now {
                found = Some(session.client.clone());
            }
        }
        found
    }

    /// The CSRF token a page's forms carry for `who`; empty for a bearer.
    pub fn csrf(&self, who: &Who) -> String {
        match who {
            Who::Session(id) => {
                let mut hasher = Sha256::new();
                hasher.update(self.csrf_key);
                hasher.update(id.as_bytes());
                hex(&hasher.finalize())
            }
            Who::Bearer | Who::Anyone => String::new(),
        }
    }

    /// Whether a POST by `who` may go ahead with the form's `given` token.
    pub fn check_csrf(&self, who: &Who, given: &str) -> bool {
        match who {
            Who::Bearer => true,
            Who::Session(_) => {
                let expected = self.csrf(who);
                crate::token::same(&expected, given)
            }
            Who::Anyone => false,
        }
    }

    /// The `Set-Cookie` value for session `id`.
    pub fn cookie(id: &str, secure: bool) -> HeaderValue {
        let (name, secure) = if secure {
            (SECURE_COOKIE, "; Secure")
        } else {
            (COOKIE, "")
        };
        let age = SESSION_LIFETIME.as_secs();
        HeaderValue::from_str(&format!(
            "{name}={id}; Path=/; Max-Age={age}; HttpOnly; SameSite=Strict{secure}"
        ))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// Whether the browser reached us over TLS (directly, or through a proxy
/// that says so): the cookie is then marked `Secure`.
pub fn behind_tls(headers: &HeaderMap) -> bool {
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("https://"));
    forwarded || origin
}

fn cookie_session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SECURE_COOKIE || *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
}

use crate::token::bearer;

/// The middleware: refuses what the rules above do not allow; passes the
/// rest on with a [`Who`] in its extensions.
pub async fn check(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let decision = guard.decide(&request);
    match decision {
        Err(refusal) => *refusal,
        Ok((who, client, new_cookie)) => {
            request.extensions_mut().insert(who);
            // An open path (`Who::Anyone`) proves nothing of its connection.
            let proven = client.is_some();
            if let Some(client) = client {
                request.extensions_mut().insert(client);
            }
            let mut response = next.run(request).await;
            if let Some(cookie) = new_cookie {
                response.headers_mut().append(header::SET_COOKIE, cookie);
            }
            if proven {
                response.extensions_mut().insert(crate::http::Proven);
            }
            response
        }
    }
}

/// Who is let in, the client the request is for (none on an open path),
/// and the cookie of a session made for it unasked.
type Decision = (Who, Option<Arc<Client>>, Option<HeaderValue>);

impl Guard {
    fn decide(&self, request: &Request) -> Result<Decision, Box<Response>> {
        let headers = request.headers();
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !self.access.hosts.allows(host) {
            tracing::info!(%host, "the run viewer refused a request for a host name not allowed");
            return Err(Box::new(plain(
                StatusCode::FORBIDDEN,
                format!(
                    "chorus: Host `{host}` is not one of this server's names ({}); this guards against DNS rebinding. \
                     If you reach chorus by this name, start it with `--allow-host NAME`.\n",
                    self.access.hosts.describe()
                ),
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            if !self.access.allows_origin(&origin, host) {
                tracing::info!(%origin, "the run viewer refused a request from another web origin");
                return Err(Box::new(plain(
                    StatusCode::FORBIDDEN,
                    format!(
                        "chorus: requests from the web origin `{origin}` are not allowed; open the viewer at this server's own address.\n"
                    ),
                )));
            }
        }
        let path = request.uri().path();
        if OPEN_PATHS
            .iter()
            .any(|open| path == *open || (open.ends_with('/') && path.starts_with(open)))
        {
            return Ok((Who::Anyone, None, None));
        }
        if let Some(given) = bearer(headers) {
            return match self.access.clients.find(given) {
                Some(client) => Ok((Who::Bearer, Some(client), None)),
                None => {
                    tracing::info!("the run viewer refused a wrong bearer token");
                    let mut response = plain(
                        StatusCode::UNAUTHORIZED,
                        "chorus: the bearer token is wrong: send `Authorization: Bearer <token>` with your client's token (or the server's CHORUS_TOKEN).\n".into(),
                    );
                    response.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        HeaderValue::from_static(
                            "Bearer realm=\"chorus\", error=\"invalid_token\"",
                        ),
                    );
                    Err(Box::new(response))
                }
            };
        }
        if let Some(id) = cookie_session(headers)
            && let Some(client) = self.session(&id)
        {
            return Ok((Who::Session(id), Some(client), None));
        }
        if !self.sign_in {
            let client = self.access.open.clone();
            let id = self.new_session(client.clone()).map_err(|e| {
                Box::new(plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("chorus: {e}\n"),
                ))
            })?;
            let cookie = Self::cookie(&id, behind_tls(headers));
            return Ok((Who::Session(id), Some(client), Some(cookie)));
        }
        if request.method() == Method::GET {
            return Err(Box::new(Redirect::to("/sign-in").into_response()));
        }
        Err(Box::new(plain(
            StatusCode::UNAUTHORIZED,
            "chorus: sign in first (open /sign-in), or send `Authorization: Bearer <token>`.\n"
                .into(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{Clients, Hosts, Origins};

    fn guard(token: Option<&str>, one_time: Option<&str>) -> Guard {
        let bob = crate::config::HttpClient {
            name: "bob".into(),
            token_env: Some("BOB".into()),
            token_sha256: None,
            pipelines: None,
            max_usd_per_day: None,
            max_usd_per_month: None,
            max_runs_per_minute: None,
            max_concurrent_runs: None,
            admin: false,
        };
        let env = |var: &str| (var == "BOB").then(|| "bob-token".to_owned());
        let access = Access {
            clients: Clients::new(&[bob], token, env).unwrap(),
            hosts: Hosts::new(["127.0.0.1"]).unwrap(),
            origins: Origins::default(),
            open: crate::client::Client::local(),
        };
        Guard::new(Arc::new(access), one_time).unwrap()
    }

    #[test]
    fn the_one_time_token_signs_in_once_and_a_clients_token_always() {
        let guard = guard(Some("server-token"), Some("once"));
        assert!(guard.signs_in("wrong").is_none());
        let local = guard.signs_in("once").unwrap();
        assert!(
            local.admin,
            "the one-time token is the person at this machine"
        );
        assert!(guard.signs_in("once").is_none(), "used up");
        assert!(guard.signs_in("server-token").unwrap().admin);
        assert!(guard.signs_in("server-token").is_some());
        let bob = guard.signs_in("bob-token").unwrap();
        assert_eq!((bob.name.as_str(), bob.admin), ("bob", false));
    }

    #[test]
    fn a_link_signs_in_with_the_one_time_token_only() {
        let guard = guard(Some("server-token"), Some("once"));
        assert!(guard.signs_in_by_link("server-token").is_none());
        assert!(guard.signs_in_by_link("bob-token").is_none());
        assert!(guard.signs_in_by_link("once").is_some());
        assert!(guard.signs_in_by_link("once").is_none(), "used up");
    }

    #[test]
    fn one_client_signing_in_again_and_again_forgets_only_its_own_sessions() {
        let guard = guard(Some("server-token"), None);
        let admin = guard.signs_in("server-token").unwrap();
        let kept = guard.new_session(admin).unwrap();
        let bob = guard.signs_in("bob-token").unwrap();
        let first_of_bob = guard.new_session(bob.clone()).unwrap();
        for _ in 0..1000 {
            guard.new_session(bob.clone()).unwrap();
        }
        assert!(
            guard.session(&kept).is_some(),
            "another client's session stays"
        );
        assert!(guard.session(&first_of_bob).is_none(), "bob's oldest went");
        assert!(lock(&guard.sessions).len() <= SESSIONS_PER_CLIENT + 1);
    }

    #[test]
    fn a_session_remembers_whom_it_was_signed_in_as() {
        let guard = guard(Some("server-token"), None);
        let bob = guard
            .new_session(guard.signs_in("bob-token").unwrap())
            .unwrap();
        let admin = guard
            .new_session(guard.signs_in("server-token").unwrap())
            .unwrap();
        assert_eq!(guard.session(&bob).unwrap().name, "bob");
        assert!(guard.session(&admin).unwrap().admin);
        assert!(guard.session("not-a-session").is_none());
    }

    #[test]
    fn csrf_tokens_belong_to_their_session() {
        let guard = guard(None, Some("once"));
        let local = crate::client::Client::local();
        let a = Who::Session(guard.new_session(local.clone()).unwrap());
        let b = Who::Session(guard.new_session(local).unwrap());
        let token = guard.csrf(&a);
        assert!(guard.check_csrf(&a, &token));
        assert!(!guard.check_csrf(&b, &token));
        assert!(!guard.check_csrf(&a, ""));
        assert!(!guard.check_csrf(&Who::Anyone, &token));
        assert!(guard.check_csrf(&Who::Bearer, ""));
    }

    #[test]
    fn the_session_cookie_is_http_only_and_strict() {
        let cookie = Guard::cookie("abc", true);
        let text = cookie.to_str().unwrap();
        assert!(
            text.starts_with("__Host-chorus_session=abc; Path=/;"),
            "{text}"
        );
        assert!(
            text.contains("HttpOnly")
                && text.contains("SameSite=Strict")
                && text.contains("Secure")
        );
        assert!(
            !Guard::cookie("abc", false)
                .to_str()
                .unwrap()
                .contains("Secure")
        );
    }
}
