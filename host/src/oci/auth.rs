//! Credentials for a registry, read (never written) from where the
//! container tools keep them: `$CHORUS_REGISTRY_TOKEN` first (a password or
//! access token; user `$CHORUS_REGISTRY_USER`, default `chorus`) for the
//! registries `$CHORUS_REGISTRY_HOST` names, else the `auths` entry for the
//! registry's host in
//! `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`,
//! `$XDG_CONFIG_HOME/containers/auth.json` (`~/.config/…`) or
//! `$DOCKER_CONFIG/config.json` (`~/.docker/config.json`) — the files
//! `podman login` and `docker login` write. Credential helpers
//! (`credsStore`, `credHelpers`) are not run: use the token variable.
//! Without any, requests are anonymous.
//!
//! A token is bound to the registry it is for: one variable used for every
//! registry would hand a team's private-registry password to any community
//! registry a plugin is pulled from. So `$CHORUS_REGISTRY_TOKEN` without
//! `$CHORUS_REGISTRY_HOST` is sent nowhere, and the lookup says why it was
//! withheld, for the error a refusal then gets.

use std::path::PathBuf;

use base64::Engine as _;
use serde::Deserialize;

/// The environment variable holding a registry password or token.
pub const TOKEN_ENV: &str = "CHORUS_REGISTRY_TOKEN";
/// The user name sent with it.
pub const USER_ENV: &str = "CHORUS_REGISTRY_USER";
/// The registries (`HOST[:PORT]`, comma-separated) the token is for.
pub const HOST_ENV: &str = "CHORUS_REGISTRY_HOST";
/// The largest credentials file read.
const MAX_AUTH_FILE_BYTES: u64 = 1 << 20;

/// A user and password (or token), sent with HTTP Basic auth or exchanged
/// for a bearer token. Its Debug hides the secret.
#[derive(Clone)]
pub struct Credentials {
    pub user: String,
    pub secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <hidden>)", self.user)
    }
}

#[derive(Deserialize)]
struct AuthFile {
    #[serde(default)]
    auths: std::collections::BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
}

/// What is configured for one registry: its credentials, if any, and why
/// the token variable was not used for it, if it is set for another.
#[derive(Debug, Default)]
pub struct Lookup {
    pub credentials: Option<Credentials>,
    /// E.g. "$CHORUS_REGISTRY_TOKEN is for registry a:5000; not sent to b".
    pub withheld: Option<String>,
}

/// The credentials for `registry` (`HOST[:PORT]`), if any are configured.
pub fn credentials(registry: &str) -> Lookup {
    credentials_with(registry, |name| std::env::var(name).ok(), auth_files())
}

/// [`credentials`] from the variables `env` gives and the auth files
/// `files` (tests give their own, leaving the process's environment alone).
fn credentials_with(
    registry: &str,
    env: impl Fn(&str) -> Option<String>,
    files: Vec<PathBuf>,
) -> Lookup {
    let set = |name: &str| env(name).filter(|s| !s.trim().is_empty());
    let mut withheld = None;
    if let Some(secret) = set(TOKEN_ENV) {
        let hosts = set(HOST_ENV).unwrap_or_default();
        let hosts: Vec<&str> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .collect();
        if hosts.iter().any(|h| h.eq_ignore_ascii_case(registry)) {
            let user = set(USER_ENV).unwrap_or_else(|| "chorus".to_owned());
            return Lookup {
                credentials: Some(Credentials { user, secret }),
                withheld: None,
            };
        }
        withheld = Some(if hosts.is_empty() {
            format!(
                "${TOKEN_ENV} names no registry, so it is not sent to {registry}: \
                 set ${HOST_ENV}={registry} if it is this registry's"
            )
        } else {
            format!(
                "${TOKEN_ENV} is for registry {}; not sent to {registry}",
                hosts.join(", ")
            )
        });
    }
    match files.iter().find_map(|path| from_file(path, registry)) {
        Some(credentials) => Lookup {
            credentials: Some(credentials),
            withheld: None,
        },
        None => Lookup {
            credentials: None,
            withheld,
        },
    }
}

fn auth_files() -> Vec<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = var("HOME");
    let mut files = Vec::new();
    files.extend(var("REGISTRY_AUTH_FILE"));
    files.extend(var("XDG_RUNTIME_DIR").map(|d| d.join("containers/auth.json")));
    files.extend(
        var("XDG_CONFIG_HOME")
            .or_else(|| home.as_ref().map(|h| h.join(".config")))
            .map(|d| d.join("containers/auth.json")),
    );
    files.extend(
        var("DOCKER_CONFIG")
            .or_else(|| home.as_ref().map(|h| h.join(".docker")))
            .map(|d| d.join("config.json")),
    );
    files
}

/// The entry for `registry` in the auth file at `path`; a missing or
/// unreadable file is skipped (logged), as the container tools do.
fn from_file(path: &std::path::Path, registry: &str) -> Option<Credentials> {
    let bytes = crate::config::read_regular_file(path, MAX_AUTH_FILE_BYTES).ok()?;
    let file: AuthFile = match serde_json::from_slice(&bytes) {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(
                "ignoring {}: it is not a credentials file ({e})",
                path.display()
            );
            return None;
        }
    };
    let entry = file.auths.iter().find_map(|(key, entry)| {
        // Keys are `host[:port]`, or URLs (`https://index.docker.io/v1/`).
        let host = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default();
        host.eq_ignore_ascii_case(registry).then_some(entry)
    })?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(entry.auth.as_deref()?.trim())
        .ok()?;
    let (user, secret) = String::from_utf8(decoded)
        .ok()?
        .split_once(':')
        .map(|(u, s)| (u.to_owned(), s.to_owned()))?;
    tracing::debug!(
        "registry credentials for {registry} from {}",
        path.display()
    );
    Some(Credentials { user, secret })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_auth_file_entry_is_found_by_host_and_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        std::fs::write(
            &path,
            format!(
                r#"{{"auths": {{"https://registry.example:5000/v1/": {{"auth": "{auth}"}}}}}}"#
            ),
        )
        .unwrap();
        let found = from_file(&path, "registry.example:5000").unwrap();
        assert_eq!(
            (found.user.as_str(), found.secret.as_str()),
            ("alice", "s3cret")
        );
        assert!(!format!("{found:?}").contains("s3cret"));
        assert!(from_file(&path, "other.example").is_none());
    }

    /// The environment a test gives: only `vars`.
    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_token_is_used_only_for_the_registries_it_names() {
        let named = env(&[
            (TOKEN_ENV, "team-secret"),
            (HOST_ENV, "registry.team.example, mirror.team.example:5000"),
        ]);
        for registry in ["registry.team.example", "MIRROR.team.example:5000"] {
            let found = credentials_with(registry, &named, Vec::new());
            let credentials = found.credentials.expect(registry);
            assert_eq!(
                (credentials.user.as_str(), credentials.secret.as_str()),
                ("chorus", "team-secret")
            );
        }

        let other = credentials_with("community.example", &named, Vec::new());
        assert!(other.credentials.is_none());
        assert_eq!(
            other.withheld.as_deref(),
            Some(
                "$CHORUS_REGISTRY_TOKEN is for registry registry.team.example, \
                 mirror.team.example:5000; not sent to community.example"
            )
        );

        let unnamed = credentials_with(
            "registry.team.example",
            env(&[(TOKEN_ENV, "team-secret")]),
            Vec::new(),
        );
        assert!(unnamed.credentials.is_none());
        assert!(
            unnamed
                .withheld
                .as_deref()
                .is_some_and(|w| w.contains("$CHORUS_REGISTRY_HOST=registry.team.example")),
            "{unnamed:?}"
        );

        // The registry's own entry in an auth file still applies.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("bob:community");
        std::fs::write(
            &path,
            format!(r#"{{"auths": {{"community.example": {{"auth": "{auth}"}}}}}}"#),
        )
        .unwrap();
        let in_file = credentials_with("community.example", &named, vec![path]);
        assert_eq!(in_file.credentials.unwrap().user, "bob");
        assert!(in_file.withheld.is_none());
    }
}
