//! Credentials for a registry, read (never written) from where the
//! container tools keep them: `$CHORUS_REGISTRY_TOKEN` first (a password or
//! access token, for every registry; user `$CHORUS_REGISTRY_USER`, default
//! `chorus`), else the `auths` entry for the registry's host in
//! `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`,
//! `$XDG_CONFIG_HOME/containers/auth.json` (`~/.config/…`) or
//! `$DOCKER_CONFIG/config.json` (`~/.docker/config.json`) — the files
//! `podman login` and `docker login` write. Credential helpers
//! (`credsStore`, `credHelpers`) are not run: use the token variable.
//! Without any, requests are anonymous.

use std::path::PathBuf;

use base64::Engine as _;
use serde::Deserialize;

/// The environment variable holding a registry password or token.
pub const TOKEN_ENV: &str = "CHORUS_REGISTRY_TOKEN";
/// The user name sent with it.
pub const USER_ENV: &str = "CHORUS_REGISTRY_USER";
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

/// The credentials for `registry` (`HOST[:PORT]`), if any are configured.
pub fn credentials(registry: &str) -> Option<Credentials> {
    if let Some(secret) = std::env::var(TOKEN_ENV).ok().filter(|s| !s.is_empty()) {
        let user = std::env::var(USER_ENV)
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "chorus".to_owned());
        return Some(Credentials { user, secret });
    }
    auth_files()
        .into_iter()
        .find_map(|path| from_file(&path, registry))
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
}
