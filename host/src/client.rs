//! Who makes a request: a client named in `[[http.clients]]` (over HTTP),
//! or the local user (stdio, the CLI, a server with the one
//! `CHORUS_TOKEN`). A leaf like `record`: `mcp` and `web` find the client,
//! `app` records it on each run and holds it to its grants and budgets.

use std::sync::Arc;

use crate::config::HttpClient;
pub use crate::config::{LOCAL, SHARED_TOKEN, reserved};

/// A client and what it may do.
#[derive(Debug, Clone, PartialEq)]
pub struct Client {
    /// Recorded on its runs; in the audit log.
    pub name: String,
    /// May read every run, not only its own.
    pub admin: bool,
    /// The pipelines it may run; `None`: all.
    pub pipelines: Option<Vec<String>>,
    pub limits: Limits,
}

/// What bounds one client's runs; `None`: no bound.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    pub usd_per_day: Option<f64>,
    pub usd_per_month: Option<f64>,
    pub runs_per_minute: Option<u32>,
    pub concurrent_runs: Option<u32>,
}

impl Limits {
    pub fn has_budget(&self) -> bool {
        self.usd_per_day.is_some() || self.usd_per_month.is_some()
    }
}

/// Which grant or limit of a client refused a run: one message for every
/// door, and a kind a door that answers each its own way (an HTTP status,
/// OpenAI's error codes) reads instead of the words.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub kind: Refused,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The pipeline is not among the client's grants.
    NotGranted,
    /// Past `max_runs_per_minute`: one more fits in `retry_after_s`.
    PerMinute { retry_after_s: u64 },
    /// Past `max_concurrent_runs`.
    Concurrent,
    /// The run's worst case does not fit the client's budget (or has no
    /// ceiling to be held to one).
    Budget,
    /// The limits could not be read (the store): nothing is started.
    Unavailable,
}

impl Refusal {
    pub fn new(kind: Refused, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Client {
    /// The person at this machine: stdio, the CLI, and a server with no
    /// token (on loopback). May do everything. Recorded as `local:USER`
    /// (or `local`), names no `[[http.clients]]` entry can take.
    pub fn local() -> Arc<Self> {
        let name = ["USER", "LOGNAME", "USERNAME"]
            .iter()
            .filter_map(|var| std::env::var(var).ok())
            .map(|name| name.trim().to_owned())
            .find(|name| !name.is_empty() && name.len() <= 64)
            .map_or_else(|| LOCAL.to_owned(), |user| format!("{LOCAL}:{user}"));
        Arc::new(Self {
            name,
            admin: true,
            pipelines: None,
            limits: Limits::default(),
        })
    }

    /// The client an `[[http.clients]]` entry describes.
    pub fn of(entry: &HttpClient) -> Self {
        Self {
            name: entry.name.clone(),
            admin: entry.admin,
            pipelines: entry.pipelines.clone(),
            limits: Limits {
                usd_per_day: entry.max_usd_per_day,
                usd_per_month: entry.max_usd_per_month,
                runs_per_minute: entry.max_runs_per_minute,
                concurrent_runs: entry.max_concurrent_runs,
            },
        }
    }

    /// Whether it may run `pipeline` (see its tool in `tools/list`).
    pub fn may_run(&self, pipeline: &str) -> bool {
        self.pipelines
            .as_ref()
            .is_none_or(|granted| granted.iter().any(|p| p == pipeline))
    }

    /// Why it may not run `pipeline`, in the one message every door
    /// gives; `None` when it may.
    pub fn refusal_to_run(&self, pipeline: &str) -> Option<String> {
        if self.may_run(pipeline) {
            return None;
        }
        let granted = self.pipelines.as_deref().unwrap_or_default().join(", ");
        Some(format!(
            "client `{}` may not run pipeline `{pipeline}`: it is not among its pipelines ({}); ask the server's operator to grant it",
            self.name,
            if granted.is_empty() { "none" } else { &granted }
        ))
    }

    /// Whether it may read a run made by `owner` (`None`: a run recorded
    /// before runs named their client, which only an admin sees).
    pub fn may_see(&self, owner: Option<&str>) -> bool {
        self.admin || owner == Some(self.name.as_str())
    }

    /// The client whose runs a listing is limited to: `None` for an admin.
    pub fn only_own(&self) -> Option<&str> {
        (!self.admin).then_some(self.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, pipelines: Option<&[&str]>, admin: bool) -> HttpClient {
        HttpClient {
            name: name.into(),
            token_env: Some("T".into()),
            token_sha256: None,
            pipelines: pipelines.map(|p| p.iter().map(|s| (*s).to_owned()).collect()),
            max_usd_per_day: Some(1.0),
            max_usd_per_month: None,
            max_runs_per_minute: Some(3),
            max_concurrent_runs: None,
            admin,
        }
    }

    #[test]
    fn grants_and_visibility_follow_the_entry() {
        let bob = Client::of(&entry("bob", Some(&["cheap"]), false));
        assert!(bob.may_run("cheap") && !bob.may_run("ask"));
        assert!(bob.may_see(Some("bob")));
        assert!(!bob.may_see(Some("alice")) && !bob.may_see(None));
        assert_eq!(bob.only_own(), Some("bob"));
        assert!(bob.limits.has_budget());
        assert_eq!(bob.limits.runs_per_minute, Some(3));
        let root = Client::of(&entry("root", None, true));
        assert!(root.may_run("anything") && root.may_see(Some("bob")) && root.may_see(None));
        assert_eq!(root.only_own(), None);
        let local = Client::local();
        assert!(local.admin && !local.name.is_empty() && !local.limits.has_budget());
        // Whatever the user is called, no `[[http.clients]]` name can be
        // the local user's: a client named like them reads nothing of theirs.
        assert!(local.name == LOCAL || local.name.starts_with("local:"));
        assert!(reserved(SHARED_TOKEN).is_some() && reserved(LOCAL).is_some());
        assert!(reserved("alice").is_none());
    }
}
