//! `[[http.clients]]`: the people (or programs) a shared `chorus serve
//! --http` knows, each with a token of its own, the pipelines it may run,
//! its budgets and rate limits, and whether it may read everyone's runs.
//! Here: the schema and the checks that need no environment. Tokens are
//! read (from `token_env`) when the server starts, in `http::clients`.

use serde::Deserialize;

use super::{Config, Invalid};

/// The name runs made with `CHORUS_TOKEN` are recorded under.
pub const SHARED_TOKEN: &str = "admin";
/// The name of the person at this machine's runs, or its prefix
/// (`local:alice`): a `:` no `[[http.clients]]` name may hold.
pub const LOCAL: &str = "local";

/// Whose runs `name` would read if a `[[http.clients]]` entry took it:
/// the names chorus records its own callers under.
pub fn reserved(name: &str) -> Option<&'static str> {
    match name {
        SHARED_TOKEN => Some("the holder of CHORUS_TOKEN"),
        LOCAL => Some("the person at the server's machine (stdio, the CLI)"),
        _ => None,
    }
}

/// One `[[http.clients]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpClient {
    /// Shown in the audit log, recorded on each run, used by
    /// `chorus runs --client`.
    pub name: String,
    /// The environment variable holding this client's token.
    pub token_env: Option<String>,
    /// Or the token's SHA-256, in hex, so the config holds no secret.
    pub token_sha256: Option<String>,
    /// The pipelines this client may run (its tools); default: all.
    pub pipelines: Option<Vec<String>>,
    /// USD this client may spend per UTC day.
    pub max_usd_per_day: Option<f64>,
    /// USD this client may spend per UTC calendar month.
    pub max_usd_per_month: Option<f64>,
    /// Runs this client may start per minute (more gets HTTP 429).
    pub max_runs_per_minute: Option<u32>,
    /// Runs of this client in progress at once.
    pub max_concurrent_runs: Option<u32>,
    /// May read everyone's runs, not only its own.
    #[serde(default)]
    pub admin: bool,
}

/// A name people type (`chorus runs --client NAME`) and read in logs.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// The 32 bytes a `token_sha256` names, or why it names none.
pub fn sha256_hex(text: &str) -> Result<[u8; 32], String> {
    let text = text.trim();
    if text.len() != 64 {
        return Err(format!(
            "must be 64 hex digits (the SHA-256 of the token, e.g. from `printf %s \"$TOKEN\" | sha256sum`), got {} characters",
            text.len()
        ));
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| {
            "must be 64 hex digits (0-9, a-f): the SHA-256 of the token, e.g. from `printf %s \"$TOKEN\" | sha256sum`"
                .to_owned()
        })?;
    }
    Ok(digest)
}

/// The checks on `[[http.clients]]` (the pipelines each names among them): `(key, message)` on the first failure.
pub(super) fn check(config: &Config) -> Result<(), Invalid> {
    let clients = &config.http.clients;
    let mut names: Vec<&str> = Vec::new();
    let mut digests: Vec<([u8; 32], &str)> = Vec::new();
    let mut envs: Vec<(&str, &str)> = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let key = |field: &str| format!("http.clients[{i}].{field}");
        if !valid_name(&client.name) {
            return Err((
                key("name"),
                format!(
                    "`{}` is not a client name: use 1-64 letters, digits, `-`, `_`, `.` or `@` (e.g. `alice`)",
                    client.name
                ),
            ));
        }
        if let Some(whose) = reserved(&client.name) {
            return Err((
                key("name"),
                format!(
                    "`{}` is reserved: it names {whose}, whose runs a client by that name could read; choose another name",
                    client.name
                ),
            ));
        }
        if names.contains(&client.name.as_str()) {
            return Err((
                key("name"),
                format!(
                    "two clients are named `{}`: each needs its own name",
                    client.name
                ),
            ));
        }
        names.push(&client.name);
        match (&client.token_env, &client.token_sha256) {
            (Some(_), Some(_)) => {
                return Err((
                    key("token_sha256"),
                    "give one of token_env and token_sha256, not both".into(),
                ));
            }
            (None, None) => {
                return Err((
                    key("token_env"),
                    format!(
                        "client `{}` has no token: set token_env = \"CHORUS_TOKEN_{}\" (a variable holding it) or token_sha256 (its SHA-256 in hex)",
                        client.name,
                        client
                            .name
                            .to_ascii_uppercase()
                            .replace(['-', '.', '@'], "_")
                    ),
                ));
            }
            (Some(env), None) => {
                if env.is_empty() || env.contains('=') || env.contains('\0') {
                    return Err((
                        key("token_env"),
                        "must name an environment variable (CHORUS_TOKEN_ALICE, say)".into(),
                    ));
                }
                if let Some((_, other)) = envs.iter().find(|(e, _)| e == env) {
                    return Err((
                        key("token_env"),
                        format!(
                            "`{env}` is also the token of client `{other}`: each client needs its own token"
                        ),
                    ));
                }
                envs.push((env, &client.name));
            }
            (None, Some(hex)) => {
                let digest = sha256_hex(hex).map_err(|m| (key("token_sha256"), m))?;
                if let Some((_, other)) = digests.iter().find(|(d, _)| *d == digest) {
                    return Err((
                        key("token_sha256"),
                        format!(
                            "the same token as client `{other}`: each client needs its own token"
                        ),
                    ));
                }
                digests.push((digest, &client.name));
            }
        }
        if let Some(pipelines) = &client.pipelines {
            for name in pipelines {
                if !config.pipelines.contains_key(name) {
                    let known: Vec<&str> = config.pipelines.keys().map(String::as_str).collect();
                    return Err((
                        key("pipelines"),
                        format!(
                            "no pipeline named `{name}` (pipelines: {})",
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        for (field, usd) in [
            ("max_usd_per_day", client.max_usd_per_day),
            ("max_usd_per_month", client.max_usd_per_month),
        ] {
            if let Some(usd) = usd {
                if !(usd.is_finite() && (0.0..=1_000_000.0).contains(&usd)) {
                    return Err((
                        key(field),
                        format!("must be an amount in USD from 0 to 1000000, got {usd}"),
                    ));
                }
                if config.limits.max_cost_usd.is_none() {
                    return Err((
                        key(field),
                        "a budget needs each run's worst case bounded: set limits.max_cost_usd too (what one run may spend at most)".into(),
                    ));
                }
            }
        }
        for (field, count) in [
            ("max_runs_per_minute", client.max_runs_per_minute),
            ("max_concurrent_runs", client.max_concurrent_runs),
        ] {
            if count == Some(0) {
                return Err((
                    key(field),
                    "must be at least 1 (leave it out for no limit)".into(),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::{ConfigError, Loaded};

    /// The config tests' minimal configuration, with a ceiling per run
    /// (which a budget needs).
    fn base() -> String {
        format!(
            "[limits]\nmax_cost_usd = 0.5\n{}",
            super::super::tests::MINIMAL
        )
    }

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn parse(clients: &str) -> Result<Loaded, ConfigError> {
        Loaded::parse(
            &format!("{}\n{clients}", base()),
            "test.toml",
            PathBuf::from("."),
        )
    }

    fn error(clients: &str) -> ConfigError {
        parse(clients).expect_err(clients)
    }

    #[test]
    fn clients_are_read_with_their_grants_and_limits() {
        let loaded = parse(&format!(
            r#"
[[http.clients]]
name = "alice"
token_env = "CHORUS_TOKEN_ALICE"
pipelines = ["ask"]
max_usd_per_day = 5.0
max_usd_per_month = 60
max_runs_per_minute = 10
max_concurrent_runs = 3

[[http.clients]]
name = "ops"
token_sha256 = "{SHA}"
admin = true
"#
        ))
        .unwrap();
        let clients = &loaded.config.http.clients;
        assert_eq!(clients.len(), 2);
        assert_eq!(
            clients[0].pipelines.as_deref(),
            Some(&["ask".to_owned()][..])
        );
        assert_eq!(clients[0].max_usd_per_month, Some(60.0));
        assert_eq!(clients[0].max_concurrent_runs, Some(3));
        assert!(!clients[0].admin && clients[1].admin);
        assert!(clients[1].pipelines.is_none());
        assert!(parse("").unwrap().config.http.clients.is_empty());
    }

    #[test]
    fn mistakes_are_named_with_their_key() {
        let client = |more: &str| format!("[[http.clients]]\nname = \"a\"\n{more}\n");
        for (clients, key, says) in [
            (
                client("token_env = \"T\"\nplan = 1"),
                "http.clients[0].plan",
                "unknown field",
            ),
            (client(""), "http.clients[0].token_env", "has no token"),
            (
                client(&format!("token_env = \"T\"\ntoken_sha256 = \"{SHA}\"")),
                "http.clients[0].token_sha256",
                "not both",
            ),
            (
                client("token_sha256 = \"abc\""),
                "http.clients[0].token_sha256",
                "64 hex digits",
            ),
            (
                client(&format!("token_sha256 = \"{}\"", "zz".repeat(32))),
                "http.clients[0].token_sha256",
                "64 hex digits",
            ),
            (
                format!(
                    "{}{}",
                    client("token_env = \"T1\""),
                    client("token_env = \"T2\"")
                ),
                "http.clients[1].name",
                "two clients are named `a`",
            ),
            (
                "[[http.clients]]\nname = \"admin\"\ntoken_env = \"T\"\n".to_owned(),
                "http.clients[0].name",
                "`admin` is reserved: it names the holder of CHORUS_TOKEN",
            ),
            (
                "[[http.clients]]\nname = \"local\"\ntoken_env = \"T\"\n".to_owned(),
                "http.clients[0].name",
                "`local` is reserved",
            ),
            (
                format!(
                    "{}[[http.clients]]\nname = \"b\"\ntoken_env = \"T\"\n",
                    client("token_env = \"T\"")
                ),
                "http.clients[1].token_env",
                "each client needs its own token",
            ),
            (
                format!(
                    "{}[[http.clients]]\nname = \"b\"\ntoken_sha256 = \"{}\"\n",
                    client(&format!("token_sha256 = \"{SHA}\"")),
                    SHA.to_uppercase()
                ),
                "http.clients[1].token_sha256",
                "same token as client `a`",
            ),
            (
                client("token_env = \"T\"\npipelines = [\"nope\"]"),
                "http.clients[0].pipelines",
                "no pipeline named `nope`",
            ),
            (
                client("token_env = \"T\"\nmax_usd_per_day = -1"),
                "http.clients[0].max_usd_per_day",
                "amount in USD",
            ),
            (
                client("token_env = \"T\"\nmax_runs_per_minute = 0"),
                "http.clients[0].max_runs_per_minute",
                "at least 1",
            ),
            (
                "[[http.clients]]\nname = \"a b\"\ntoken_env = \"T\"\n".to_owned(),
                "http.clients[0].name",
                "not a client name",
            ),
        ] {
            let error = error(&clients);
            assert_eq!(error.key, key, "{error}");
            assert!(error.message.contains(says), "{error}");
        }
    }

    #[test]
    fn a_budget_needs_a_ceiling_per_run() {
        let text = format!(
            "{}\n[[http.clients]]\nname = \"a\"\ntoken_env = \"T\"\nmax_usd_per_day = 1\n",
            base().replace("max_cost_usd = 0.5", "")
        );
        let error = Loaded::parse(&text, "test.toml", PathBuf::from(".")).unwrap_err();
        assert!(error.message.contains("limits.max_cost_usd"), "{error}");
    }
}
