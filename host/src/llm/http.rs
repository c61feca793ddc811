//! A provider's HTTP setup: the reqwest client (one pool per provider,
//! shared by every run), the fixed headers, the API key, and the redirect
//! rule — never follow a redirect to another origin, which would send the
//! prompt and the headers to a host nobody configured.

use std::fmt;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::redirect;
use url::Url;

use super::secret::{Scrubber, Secret};
use crate::config::Provider;

/// Redirects followed within one origin before giving up.
const MAX_REDIRECTS: usize = 5;

/// Where a provider's key stands.
pub enum Auth {
    /// The provider needs no key.
    None,
    Key {
        header: HeaderValue,
        scrubber: Scrubber,
        /// The environment variable it was read from.
        var: String,
    },
    /// A key is needed but not usable; calls fail with this problem.
    Problem(KeyProblem),
}

/// Why a provider's key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProblem {
    pub provider: String,
    pub var: String,
    /// `None`: the variable is not set (or empty).
    pub unusable: Option<String>,
}

impl fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (provider, var) = (&self.provider, &self.var);
        match &self.unusable {
            None => write!(
                f,
                "provider `{provider}` needs an API key in the environment variable {var}, which is not set; \
                 set it in the environment chorus runs in (for an MCP client, the server's `env` setting)"
            ),
            Some(why) => write!(
                f,
                "the environment variable {var} (the API key of provider `{provider}`) is set, but {why}"
            ),
        }
    }
}

impl Auth {
    /// Reads the key named by `config.api_key_env` (or, for the default
    /// name, one of the others `key_vars` lists) from the environment.
    pub fn from_env(name: &str, config: &Provider) -> Self {
        let Some(configured) = &config.api_key_env else {
            return Self::None;
        };
        let vars = super::key_vars::candidates(configured, &config.base_url);
        let problem = |var: &str, unusable: Option<String>| {
            Self::Problem(KeyProblem {
                provider: name.to_owned(),
                var: var.to_owned(),
                unusable,
            })
        };
        let (var, value) = match super::key_vars::first_set(&vars) {
            None => return problem(&vars.join(" or "), None),
            Some((var, Ok(value))) => (var, value),
            Some((var, Err(_))) => {
                return problem(var, Some("its value is not valid text (UTF-8)".to_owned()));
            }
        };
        let problem = |unusable: Option<String>| problem(var, unusable);
        let key = value.trim();
        if key.is_empty() {
            return problem(None);
        }
        if let Some(why) = unusable(key) {
            return problem(Some(why));
        }
        let secret = Secret::new(key.to_owned());
        match HeaderValue::try_from(format!("Bearer {}", secret.expose())) {
            Ok(mut header) => {
                header.set_sensitive(true);
                Self::Key {
                    header,
                    scrubber: secret.scrubber(),
                    var: var.to_owned(),
                }
            }
            Err(_) => problem(Some("it cannot be sent as an HTTP header value".to_owned())),
        }
    }

    pub fn scrubber(&self) -> Scrubber {
        match self {
            Self::Key { scrubber, .. } => scrubber.clone(),
            _ => Scrubber::none(),
        }
    }

    /// The environment variable the key was read from.
    pub fn var(&self) -> Option<&str> {
        match self {
            Self::Key { var, .. } => Some(var),
            _ => None,
        }
    }

    pub fn problem(&self) -> Option<&KeyProblem> {
        match self {
            Self::Problem(p) => Some(p),
            _ => None,
        }
    }

    /// Adds the Authorization header, if there is a key.
    pub fn apply(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Self::Key { header, .. } => request.header(AUTHORIZATION, header.clone()),
            _ => request,
        }
    }
}

/// Why a key cannot go in a header, without ever quoting it.
fn unusable(key: &str) -> Option<String> {
    // `get`, not `[..7]`: byte 7 may fall inside a character (a typographic
    // quote), and a panic here would print the key it exists to explain.
    if key.len() > 7
        && key
            .get(..7)
            .is_some_and(|head| head.eq_ignore_ascii_case("bearer "))
    {
        return Some(
            "it starts with `Bearer `, which chorus adds itself: set the variable to the key alone"
                .to_owned(),
        );
    }
    let (at, c) = key
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_graphic())?;
    let what = if c.is_control() {
        "a control character (a stray newline or escape?)"
    } else if c.is_whitespace() {
        "a space"
    } else {
        "a non-ASCII character (a typographic quote from copying?)"
    };
    Some(format!(
        "it cannot be sent as an HTTP header: character {} of {} is {what}",
        at + 1,
        key.chars().count()
    ))
}

/// The headers every request carries: the configured ones and the content type.
pub fn headers(config: &Provider) -> Result<HeaderMap, (String, String)> {
    let mut headers = HeaderMap::new();
    for (header, value) in &config.headers {
        let key = format!("headers.{header}");
        let name =
            HeaderName::try_from(header.as_str()).map_err(|e| (key.clone(), e.to_string()))?;
        let value = HeaderValue::try_from(value.as_str()).map_err(|e| (key, e.to_string()))?;
        headers.insert(name, value);
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(headers)
}

/// The HTTP client: connect timeout, pool, the same-origin redirect rule,
/// and `roots` trusted besides the built-in ones (`[tls] ca_files`).
pub fn client(
    config: &Provider,
    roots: &[reqwest::Certificate],
) -> reqwest::Result<reqwest::Client> {
    trusting(reqwest::Client::builder(), roots)
        .connect_timeout(config.connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_keepalive(Duration::from_secs(30))
        .redirect(same_origin_redirects())
        .user_agent(concat!("chorus/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// `builder`, trusting `roots` besides the built-in ones.
pub fn trusting(
    mut builder: reqwest::ClientBuilder,
    roots: &[reqwest::Certificate],
) -> reqwest::ClientBuilder {
    for root in roots {
        builder = builder.add_root_certificate(root.clone());
    }
    builder
}

/// Follow redirects within the first URL's origin (scheme, host, port),
/// at most `MAX_REDIRECTS`; any other comes back as the 3xx response,
/// for the caller to refuse naming its target.
pub fn same_origin_redirects() -> redirect::Policy {
    redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| origin(first) == origin(attempt.url()));
        if same_origin && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Scheme, host and port: what "another origin" means.
pub fn origin(url: &Url) -> (String, Option<String>, Option<u16>) {
    (
        url.scheme().to_owned(),
        url.host_str().map(str::to_owned),
        url.port_or_known_default(),
    )
}

/// `host:port` of a URL, for messages (never the path or query, which
/// could carry credentials).
pub fn host_port(url: &Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => "(no host)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_keys_say_why_without_quoting_the_key() {
        assert!(unusable("sk-abc123").is_none());
        let why = unusable("sk-abc\n123").unwrap();
        assert!(
            why.contains("character 7 of 10 is a control character"),
            "{why}"
        );
        assert!(!why.contains("sk-abc"));
        assert!(unusable("Bearer sk-abc").unwrap().contains("Bearer"));
        assert!(unusable("sk-“abc”").unwrap().contains("non-ASCII"));
        assert!(unusable("sk abc").unwrap().contains("a space"));
    }

    #[test]
    fn a_multibyte_character_across_byte_7_is_explained_not_a_panic() {
        // `“` takes bytes 6..9: byte 7 is inside it.
        let key = "sk-or-“quoted”";
        assert!(!key.is_char_boundary(7));
        let why = unusable(key).unwrap();
        assert!(why.contains("character 7 of 14 is a non-ASCII"), "{why}");
        assert!(!why.contains("quoted"), "{why}");
        // And a real `Bearer ` prefix behind a multi-byte tail still says so.
        assert!(unusable("Bearer “x”").unwrap().contains("Bearer"));
    }
}
