//! Feedback on runs: a value of a metric the configuration declares
//! (`config::Metric`), given by a client on a run it may see, with an
//! optional comment and when it was given. A client's second rating of
//! the same run and metric replaces its first; several clients' ratings
//! stand side by side. Feedback is kept with its run (removed with it),
//! in every backend through the one trait `Feedbacks`, each backend's
//! part in a file of its own (`sqlite/feedback.rs`, `postgres/feedback.rs`,
//! `memory.rs`).

use serde::Serialize;

use super::StoreError;

/// The longest comment kept; a longer one is refused, not cut.
pub const MAX_COMMENT_BYTES: usize = 4096;

/// One rating of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Feedback {
    pub run_id: String,
    pub metric: String,
    /// As the metric keeps it: a boolean as 1 or 0.
    pub value: f64,
    /// Who gave it (the client's name; `local` on this machine).
    pub client: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// When, in unix ms.
    pub at: i64,
}

/// What giving feedback did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Given {
    /// The client's first rating of this run on this metric.
    New,
    /// It replaced the client's earlier value.
    Replaced { was: f64 },
    /// No kept run has this id.
    UnknownRun,
}

/// A kept run rated on a metric: what `chorus eval --from-runs` builds a
/// question of.
#[derive(Debug, Clone, PartialEq)]
pub struct Rated {
    pub run_id: String,
    pub prompt: String,
    pub answer: String,
    /// The mean of its ratings on the metric (several clients' count once).
    pub mean: f64,
}

/// Where feedback is kept: every backend.
pub(super) trait Feedbacks {
    /// Keeps `feedback` on its run (by full id).
    fn give(&self, feedback: &Feedback) -> Result<Given, StoreError>;

    /// The feedback on the run `run_id` (a full id), oldest first.
    fn feedback_of(&self, run_id: &str) -> Result<Vec<Feedback>, StoreError>;

    /// The latest `most` runs started since `since` (unix ms) that answered
    /// and are rated on `metric`, newest first.
    fn rated(&self, metric: &str, since: i64, most: usize) -> Result<Vec<Rated>, StoreError>;
}
