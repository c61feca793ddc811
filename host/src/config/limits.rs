//! `[limits]`: the bounds that hold for every run (prompt and attachment
//! sizes, time, calls, money, runs kept and at once), their defaults and
//! their check.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::check::{
    Invalid, MAX_CONCURRENCY, MAX_TIMEOUT, MAX_TTL, count, duration, duration_or_zero,
};

const MAX_PROMPT_BYTES: usize = 64 << 20;
const MAX_CALLS_PER_RUN: u32 = 10_000;
const MAX_RUNS_KEPT: usize = 100_000;
const MAX_USD: f64 = 1_000_000.0;
/// The smallest bound on an HTTP request body.
const MIN_REQUEST_BYTES: usize = 4 << 20;

/// Bounds that hold for every run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest prompt accepted, in bytes.
    pub max_prompt_bytes: usize,
    /// Wall-clock limit of one run, all stages included.
    #[serde(with = "humantime_serde")]
    pub run_timeout: Duration,
    /// Chat completions one run may make, fan-out and plugin calls together.
    pub max_calls_per_run: u32,
    /// Finished runs kept in memory (oldest dropped first).
    pub max_runs_kept: usize,
    /// How long a finished run stays readable.
    #[serde(with = "humantime_serde")]
    pub run_ttl: Duration,
    /// How long an MCP task lives: a run still working after this is
    /// stopped and failed, and a finished task stays readable (`tasks/get`)
    /// for this long again. Must exceed the longest `run_timeout` by 30 s.
    #[serde(with = "humantime_serde")]
    pub task_ttl: Duration,
    /// The most one run may spend, in USD; none means no ceiling. A call
    /// whose worst case would cross it is not started. A call's
    /// `max_cost_usd` option may lower it.
    pub max_cost_usd: Option<f64>,
    /// Runs at once; more wait for a free slot (with progress), within their
    /// own deadline. Also sizes the plugins' instance pool, so it caps the
    /// plugins' memory at this many times their largest `max_memory_mib`.
    pub max_concurrent_runs: u32,
    /// Largest attachment accepted, in bytes.
    pub max_attachment_bytes: usize,
    /// Attachments one run may carry.
    pub max_attachments: usize,
    /// All of one run's attachments together, in bytes.
    pub max_attachments_bytes: usize,
    /// Directories an MCP client on stdio may attach files from, besides
    /// the roots it shares (`chorus serve --allow-dir` adds to them).
    pub attachment_dirs: Vec<PathBuf>,
    /// Let chorus fetch a URL attachment (for a provider with `fetch_urls
    /// = false`) from a host inside a network: loopback, private,
    /// link-local or unique-local addresses. Off: a shared server must not
    /// be made to reach the services beside it.
    pub fetch_private_urls: bool,
}

impl Limits {
    /// What one run may attach.
    pub fn attachments(&self) -> crate::attach::Limits {
        crate::attach::Limits {
            max_attachments: self.max_attachments,
            max_attachment_bytes: self.max_attachment_bytes,
            max_attachments_bytes: self.max_attachments_bytes,
        }
    }

    /// The most one HTTP request body may hold, at every door (`/mcp` and
    /// the OpenAI endpoint alike): a prompt escaped as JSON, at least
    /// 4 MiB. Attachments sent inline count against it (each is held to
    /// its own limits too); larger files go by URL.
    pub fn max_request_bytes(&self) -> usize {
        self.max_prompt_bytes
            .saturating_mul(4)
            .max(MIN_REQUEST_BYTES)
    }

    /// `Err((key, message))` for the first key out of its bounds.
    pub(super) fn check(&self) -> Result<(), Invalid> {
        count(
            "limits.max_prompt_bytes",
            self.max_prompt_bytes,
            1,
            MAX_PROMPT_BYTES,
        )?;
        duration("limits.run_timeout", self.run_timeout, MAX_TIMEOUT)?;
        count(
            "limits.max_calls_per_run",
            self.max_calls_per_run as usize,
            1,
            MAX_CALLS_PER_RUN as usize,
        )?;
        count("limits.max_runs_kept", self.max_runs_kept, 1, MAX_RUNS_KEPT)?;
        duration_or_zero("limits.run_ttl", self.run_ttl, MAX_TTL)?;
        duration("limits.task_ttl", self.task_ttl, MAX_TTL)?;
        if let Some(usd) = self.max_cost_usd
            && !(usd.is_finite() && usd > 0.0 && usd <= MAX_USD)
        {
            return Err((
                "limits.max_cost_usd".into(),
                format!("must be an amount in USD above 0 and at most {MAX_USD}, got {usd}"),
            ));
        }
        // Each run reserves a slot of the plugins' instance pool.
        count(
            "limits.max_concurrent_runs",
            self.max_concurrent_runs as usize,
            1,
            MAX_CONCURRENCY,
        )?;
        self.check_attachments()
    }

    /// The attachment keys, checked at load so a typo is an error then,
    /// not a refusal in the middle of a run.
    fn check_attachments(&self) -> Result<(), Invalid> {
        let bounds = [
            (
                "limits.max_attachment_bytes",
                self.max_attachment_bytes,
                1 << 30,
            ),
            ("limits.max_attachments", self.max_attachments, 100),
            (
                "limits.max_attachments_bytes",
                self.max_attachments_bytes,
                1 << 30,
            ),
        ];
        for (key, value, max) in bounds {
            if value == 0 || value > max {
                return Err((
                    key.into(),
                    format!("must be between 1 and {max}, got {value}"),
                ));
            }
        }
        for dir in &self.attachment_dirs {
            if !dir.is_absolute() {
                return Err((
                    "limits.attachment_dirs".into(),
                    format!("`{}` must be an absolute path", dir.display()),
                ));
            }
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_prompt_bytes: 256 * 1024,
            run_timeout: Duration::from_secs(600),
            max_calls_per_run: 64,
            max_runs_kept: 100,
            run_ttl: Duration::from_secs(3600),
            task_ttl: Duration::from_secs(3600),
            max_cost_usd: None,
            max_concurrent_runs: 64,
            max_attachment_bytes: 20 << 20,
            max_attachments: 10,
            max_attachments_bytes: 50 << 20,
            attachment_dirs: Vec::new(),
            fetch_private_urls: false,
        }
    }
}
