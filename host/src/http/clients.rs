//! Token -> client: the clients of `[[http.clients]]` (their tokens read
//! from the environment, or given as SHA-256 digests), or the one
//! `CHORUS_TOKEN` (an admin with no limits), or nobody (loopback without a
//! token: the local user). Only digests are kept; a token is compared
//! against every client's in constant time, so neither the time nor an
//! error says which client came close.

use std::sync::Arc;

use crate::client::Client;
use crate::config::{HttpClient, sha256_hex};

/// The name of the client that `CHORUS_TOKEN` stands for (reserved: no
/// `[[http.clients]]` entry may take it).
pub const SHARED_TOKEN_CLIENT: &str = crate::client::SHARED_TOKEN;

/// Who may use the server, by token.
#[derive(Debug)]
pub struct Clients {
    known: Vec<([u8; 32], Arc<Client>)>,
}

impl Clients {
    /// `entries` from `[[http.clients]]`, `shared` from `CHORUS_TOKEN`;
    /// `env` reads a variable (the process's environment, or a test's).
    pub fn new(
        entries: &[HttpClient],
        shared: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut known: Vec<([u8; 32], Arc<Client>)> = Vec::new();
        if let Some(secret) = shared {
            let token = Token::new(secret)?;
            let client = Client {
                name: SHARED_TOKEN_CLIENT.into(),
                admin: true,
                pipelines: None,
                limits: Default::default(),
            };
            known.push((token.digest(), Arc::new(client)));
        }
        for entry in entries {
            let digest = match (&entry.token_env, &entry.token_sha256) {
                (Some(var), _) => {
                    let secret = env(var).ok_or_else(|| {
                        format!(
                            "http.clients `{}`: token_env = \"{var}\", but {var} is not set: export it with the client's token (e.g. `export {var}=$(openssl rand -hex 32)`)",
                            entry.name
                        )
                    })?;
                    Token::new(&secret)
                        .map_err(|e| {
                            format!(
                                "http.clients `{}`: {}",
                                entry.name,
                                e.replace("CHORUS_TOKEN", var)
                            )
                        })?
                        .digest()
                }
                (None, Some(hex)) => sha256_hex(hex)
                    .map_err(|e| format!("http.clients `{}`: token_sha256 {e}", entry.name))?,
                (None, None) => {
                    return Err(format!(
                        "http.clients `{}` has no token (token_env or token_sha256)",
                        entry.name
                    ));
                }
            };
            if let Some((_, other)) = known.iter().find(|(d, _)| *d == digest) {
                return Err(format!(
                    "http.clients `{}` has the same token as `{}`: each client needs its own token",
                    entry.name, other.name
                ));
            }
            known.push((digest, Arc::new(Client::of(entry))));
        }
        Ok(Self { known })
    }

    /// No clients: no token is asked for.
    pub fn none() -> Self {
        Self { known: Vec::new() }
    }

    /// Whether any token is needed at all.
    pub fn any(&self) -> bool {
        !self.known.is_empty()
    }

    /// The client whose token `given` is. Every client's digest is
    /// compared, whichever matches.
    pub fn find(&self, given: &str) -> Option<Arc<Client>> {
        crate::token::find(&self.known, given).cloned()
    }

    /// For the startup message: how many, and their names.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.known.iter().map(|(_, c)| c.name.as_str()).collect();
        names.join(", ")
    }
}

/// The server's bearer token. Only its digest is kept, so the secret is in
/// no struct, log or error; comparing digests also hides its length.
pub struct Token {
    digest: [u8; 32],
}

impl Token {
    pub fn new(secret: &str) -> Result<Self, String> {
        if secret.trim().is_empty() {
            return Err("CHORUS_TOKEN is set but empty: set it to a long random secret (e.g. `openssl rand -hex 32`), or unset it".into());
        }
        if secret.trim() != secret {
            return Err("CHORUS_TOKEN starts or ends with whitespace; clients would have to send it too — remove it".into());
        }
        Ok(Self {
            digest: crate::token::digest(secret),
        })
    }

    pub(super) fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// Whether `given` is the token, in time independent of where they differ.
    pub fn matches(&self, given: &str) -> bool {
        crate::token::matches(&self.digest, given)
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, env: Option<&str>, sha: Option<&str>) -> HttpClient {
        HttpClient {
            name: name.into(),
            token_env: env.map(Into::into),
            token_sha256: sha.map(Into::into),
            pipelines: Some(vec!["ask".into()]),
            max_usd_per_day: None,
            max_usd_per_month: None,
            max_runs_per_minute: None,
            max_concurrent_runs: None,
            admin: false,
        }
    }

    fn env(var: &str) -> Option<String> {
        match var {
            "CHORUS_TOKEN_ALICE" => Some("alice-secret".into()),
            "CHORUS_TOKEN_EMPTY" => Some(String::new()),
            "CHORUS_TOKEN_SAME" => Some("shared-secret".into()),
            _ => None,
        }
    }

    #[test]
    fn each_token_finds_its_own_client() {
        let bob_sha = crate::text::hex(&crate::token::digest("bob-secret"));
        let clients = Clients::new(
            &[
                entry("alice", Some("CHORUS_TOKEN_ALICE"), None),
                entry("bob", None, Some(&bob_sha.to_uppercase())),
            ],
            Some("shared-secret"),
            env,
        )
        .unwrap();
        assert!(clients.any());
        assert_eq!(clients.find("alice-secret").unwrap().name, "alice");
        assert_eq!(clients.find("bob-secret").unwrap().name, "bob");
        let shared = clients.find("shared-secret").unwrap();
        assert!(shared.admin && shared.name == SHARED_TOKEN_CLIENT);
        for wrong in ["", "alice-secre", "bob-secret ", &bob_sha, "ALICE-SECRET"] {
            assert!(clients.find(wrong).is_none(), "{wrong:?}");
        }
        assert!(!format!("{clients:?}").contains("secret"));
        assert!(!Clients::new(&[], None, env).unwrap().any());
    }

    #[test]
    fn missing_empty_and_shared_tokens_are_refused_by_name() {
        let error = Clients::new(
            &[entry("carol", Some("CHORUS_TOKEN_CAROL"), None)],
            None,
            env,
        )
        .unwrap_err();
        assert!(
            error.contains("carol") && error.contains("CHORUS_TOKEN_CAROL is not set"),
            "{error}"
        );
        let error =
            Clients::new(&[entry("e", Some("CHORUS_TOKEN_EMPTY"), None)], None, env).unwrap_err();
        assert!(
            error.contains("CHORUS_TOKEN_EMPTY is set but empty"),
            "{error}"
        );
        let error = Clients::new(
            &[entry("dup", Some("CHORUS_TOKEN_SAME"), None)],
            Some("shared-secret"),
            env,
        )
        .unwrap_err();
        assert!(
            error.contains("same token") && !error.contains("shared-secret"),
            "{error}"
        );
        let error = Clients::new(&[entry("x", None, Some("zz"))], None, env).unwrap_err();
        assert!(error.contains("64 hex digits"), "{error}");
    }
}
