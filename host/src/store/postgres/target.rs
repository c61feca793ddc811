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
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .application_name("chorus");
        Ok(Self { config, shown })
    }
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(parsed) => parsed.to_string(),
        // Not a URL: show its scheme at most, never what could be a secret.
        Err(_) => url
            .split_once("://")
            .map_or("<the [store] url>".to_owned(), |(scheme, _)| {
                format!("{scheme}://…")
            }),
    }
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
