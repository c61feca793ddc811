//! Which database a PostgreSQL store is in: its URL, and the password read
//! from the environment (`$PGPASSWORD`, or the variable `[store]
//! password_env` names). The URL is shown without any password; the
//! password is never shown, logged or written anywhere.

use std::time::Duration;

use crate::store::StoreError;

/// How long connecting waits before the database counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct Target {
    pub config: tokio_postgres::Config,
    /// The URL as messages show it: no password.
    pub shown: String,
}

impl Target {
    /// `url` (postgres://…), its password from `password_env` when named,
    /// else `$PGPASSWORD`, else from the URL itself (given on the command
    /// line or in `$CHORUS_STORE_URL`; the config file may not hold one).
    pub fn new(url: &str, password_env: Option<&str>) -> Result<Self, StoreError> {
        let shown = redact(url);
        let invalid = |message: String| StoreError::Database {
            at: shown.clone(),
            message,
        };
        let parsed = url::Url::parse(url).map_err(|e| {
            invalid(format!(
                "not a URL ({e}): write postgres://user@host:5432/db"
            ))
        })?;
        if !matches!(parsed.scheme(), "postgres" | "postgresql") {
            return Err(invalid(
                "a run store URL starts with postgres:// (a SQLite file: [store] path)".into(),
            ));
        }
        // chorus speaks to PostgreSQL in plain TCP (or over a Unix
        // socket): a URL that asks for TLS is refused rather than quietly
        // sent in the clear.
        let asks_tls = parsed.query_pairs().any(|(key, value)| {
            key == "sslmode" && matches!(&*value, "require" | "verify-ca" | "verify-full")
        });
        if asks_tls {
            return Err(invalid(
                "asks for TLS (sslmode=require or verify-*), and chorus connects to PostgreSQL without TLS: \
                 reach the database over a Unix socket or a private network with sslmode=disable, \
                 or put a TLS-terminating proxy (PgBouncer, stunnel) beside chorus"
                    .into(),
            ));
        }
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| invalid(format!("not a PostgreSQL URL: {e}")))?;
        let variable = password_env.unwrap_or("PGPASSWORD");
        match std::env::var(variable) {
            Ok(password) if !password.is_empty() => {
                config.password(password);
            }
            _ if password_env.is_some() => {
                return Err(invalid(format!(
                    "[store] password_env names ${variable}, which is not set"
                )));
            }
            _ => {}
        }
        if let Some(host) = remote_host(&config) {
            tracing::warn!(store = %shown, "the run store at {host} is reached without TLS: prompts and answers cross the network in the clear; keep it on a private network or a Unix socket");
        }
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .application_name("chorus");
        Ok(Self { config, shown })
    }
}

/// The first host of `config` that is neither a Unix socket nor loopback.
fn remote_host(config: &tokio_postgres::Config) -> Option<String> {
    config.get_hosts().iter().find_map(|host| match host {
        tokio_postgres::config::Host::Tcp(name) => {
            let loopback = name == "localhost"
                || name
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            (!loopback).then(|| name.clone())
        }
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(_) => None,
    })
}

/// `url` without its password (in its userinfo or its query), for messages.
pub fn redact(url: &str) -> String {
    if url::Url::parse(url).is_err() {
        return url
            .split_once("://")
            .map_or("<the [store] url>".to_owned(), |(scheme, _)| {
                format!("{scheme}://…")
            });
    }
    crate::text::redact_url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            redact("postgres://chorus:s3cret@db:5432/runs"),
            "postgres://chorus:***@db:5432/runs"
        );
        assert_eq!(
            redact("postgres://chorus@db/runs"),
            "postgres://chorus@db/runs"
        );
        assert!(!redact("postgres://u:s3cret@[bad").contains("s3cret"));
        for tls in ["require", "verify-ca", "verify-full"] {
            let refused = Target::new(&format!("postgres://u@db/runs?sslmode={tls}"), None)
                .err()
                .unwrap()
                .to_string();
            assert!(refused.contains("without TLS"), "{tls}: {refused}");
        }
        assert!(Target::new("postgres://u@127.0.0.1/runs?sslmode=disable", None).is_ok());
        assert!(!redact("postgres://u@db/runs?password=s3cret").contains("s3cret"));
        let target = Target::new("postgres://u:s3cret@db:5432/runs", None).unwrap();
        assert!(!target.shown.contains("s3cret"));
        let error = Target::new("mysql://u:s3cret@db/runs", None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            !error.contains("s3cret") && error.contains("postgres://"),
            "{error}"
        );
    }
}
