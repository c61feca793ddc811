//! `[store]`: where runs are kept (a SQLite file, or a PostgreSQL database
//! with `url`) and how much of them, with its defaults and its check.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::check::Invalid;

/// The run store: every run's history in one SQLite file, shared by every
/// chorus process that names it — or, with `url`, in a PostgreSQL database
/// that instances on several machines share.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Store {
    /// `false` writes nothing to disk: runs are kept in memory only, as
    /// `limits.max_runs_kept` and `limits.run_ttl` allow.
    pub enabled: bool,
    /// The SQLite file, relative to this file. Defaults to
    /// `$XDG_DATA_HOME/chorus/runs.sqlite3` (or `~/.local/share/chorus/…`).
    pub path: Option<PathBuf>,
    /// A PostgreSQL database instead of the file: `postgres://user@host:5432/db`
    /// (`$CHORUS_STORE_URL` overrides it). No password here: it is read from
    /// `$PGPASSWORD`, or the variable `password_env` names.
    pub url: Option<String>,
    /// The environment variable holding the database password (default:
    /// `PGPASSWORD`).
    pub password_env: Option<String>,
    /// Runs kept; the oldest are removed first.
    pub max_runs: u64,
    /// Runs older than this are removed. Default: no age limit.
    #[serde(with = "humantime_serde")]
    pub max_age: Option<Duration>,
    /// Bytes of run data kept (prompts, requests, answers); the oldest runs
    /// are removed first. The file itself is somewhat larger.
    pub max_bytes: u64,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            enabled: true,
            path: None,
            url: None,
            password_env: None,
            max_runs: 10_000,
            max_age: None,
            max_bytes: 1024 * 1024 * 1024,
        }
    }
}

impl Store {
    /// `Err((key, message))` for the first key that is wrong.
    pub(super) fn check(&self) -> Result<(), Invalid> {
        for (key, zero) in [
            ("store.max_runs", self.max_runs == 0),
            ("store.max_bytes", self.max_bytes == 0),
            ("store.max_age", self.max_age.is_some_and(|a| a.is_zero())),
            (
                "store.path",
                self.path.as_ref().is_some_and(|p| p.as_os_str().is_empty()),
            ),
        ] {
            if zero {
                return Err((
                    key.into(),
                    if key == "store.path" {
                        "must name a file (or leave it out for the default)".into()
                    } else {
                        "must be greater than zero".into()
                    },
                ));
            }
        }
        if let Some(url) = &self.url {
            store_url(url).map_err(|message| ("store.url".to_owned(), message))?;
        }
        if let Some(name) = &self.password_env
            && (name.is_empty() || name.contains('='))
        {
            return Err((
                "store.password_env".into(),
                "must name an environment variable (PGPASSWORD, say)".into(),
            ));
        }
        Ok(())
    }
}

/// A `[store] url` as the file may give it: a PostgreSQL URL, without a
/// password (that stays in the environment).
fn store_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text)
        .map_err(|e| format!("is not a URL ({e}): write postgres://user@host:5432/database"))?;
    if !matches!(url.scheme(), "postgres" | "postgresql") {
        return Err(format!(
            "the run store's URL must start with postgres:// (it starts with {}://); \
             for a SQLite file use [store] path",
            url.scheme()
        ));
    }
    if url.password().is_some() {
        return Err(
            "holds a password: keep it out of the config file, in $PGPASSWORD or the \
             variable [store] password_env names"
                .into(),
        );
    }
    Ok(())
}
