//! The one gate: every run of every entry point (MCP, the viewer, the
//! CLI, eval) is admitted here before anything is fetched, measured or
//! asked of a model — the client's grant, its runs per minute, its runs in
//! progress, its budgets against the run's cost ceiling — and settled here
//! when it ends, with what it spent. A refusal says what was refused and
//! why, in the same words at every door, and goes to the audit log.

use std::sync::Arc;

use super::{AUDIT, Chorus};
use crate::budget::Pass;
use crate::client::{Client, Refusal, Refused};
use crate::pipeline::{Question, RunError};

impl Chorus {
    /// The one gate every run of every entry point passes before anything
    /// is fetched, measured or asked of a model: `client`'s grant of
    /// `name` (a pipeline; a single model's or a re-synthesis's run is
    /// held to the limits alone), its runs per minute, its runs in
    /// progress, and its budgets against `worst` (the run's cost
    /// ceiling). Refused: why, said in the audit log.
    pub(super) async fn admit(
        &self,
        client: &Arc<Client>,
        name: &str,
        worst: Option<f64>,
    ) -> Result<Pass, RunError> {
        let is_pipeline = self.runner().loaded.config.pipelines.contains_key(name);
        if is_pipeline && let Some(why) = client.refusal_to_run(name) {
            return Err(self.refused(client, name, Refusal::new(Refused::NotGranted, why)));
        }
        if let Err(over) = self.gate.per_minute_for_run(client).await {
            let kind = Refused::PerMinute {
                retry_after_s: over.retry_after_s(),
            };
            return Err(self.refused(client, name, Refusal::new(kind, over.to_string())));
        }
        let admitted = if !client.limits.has_budget() && !self.gate.asks_shared(client) {
            // Nothing to read from the store: decided here and now.
            self.gate.admit(client, &self.store, worst)
        } else {
            let (gate, store, who) = (self.gate.clone(), self.store.clone(), client.clone());
            tokio::task::spawn_blocking(move || gate.admit(&who, &store, worst))
                .await
                .map_err(|e| Refusal::new(Refused::Unavailable, e.to_string()))
                .and_then(|admitted| admitted)
        };
        admitted.map_err(|why| self.refused(client, name, why))
    }

    /// The gate's answer to a request whose body is not read yet (the
    /// OpenAI endpoint's, which may be megabytes): whether `client` is past
    /// its runs per minute or at its runs in progress now, looked at
    /// without counting a run or taking a slot (a body that turns out
    /// malformed costs its client nothing). What this refuses is never
    /// read, so a client past its limits cannot make the server read,
    /// hold or parse its bodies; the run itself is admitted as any other,
    /// once the body names its pipeline and ceiling.
    pub fn admit_unread(&self, client: &Arc<Client>) -> Result<(), RunError> {
        if let Some(over) = self.gate.per_minute_full(client) {
            let kind = Refused::PerMinute {
                retry_after_s: over.retry_after_s(),
            };
            return Err(self.refused(client, "-", Refusal::new(kind, over.to_string())));
        }
        match self.gate.running_full(client) {
            Some(why) => Err(self.refused(client, "-", why)),
            None => Ok(()),
        }
    }

    /// `question` ready for its run, once admitted: its URLs fetched (when
    /// the provider does not fetch them) and its images' pixels and PDFs'
    /// pages measured, so the record lists them as the plugins see them.
    pub(super) async fn prepared(&self, question: Question) -> Result<Question, RunError> {
        let question = self.runner().fetched(question).await?;
        Ok(Question {
            attachments: crate::attach::shape::measured(question.attachments).await,
            ..question
        })
    }

    /// A run refused before it started, said in the audit log.
    fn refused(&self, client: &Client, pipeline: &str, why: Refusal) -> RunError {
        tracing::info!(target: AUDIT, client = %client.name, pipeline, reason = %why, "refused a run");
        RunError::Refused(why)
    }
}

/// Gives back `pass` for a run that ended before any model was asked
/// (`error`), its reservation settled at nothing.
pub(super) fn unspent(pass: Pass, error: RunError) -> RunError {
    settle(pass, Some(0.0));
    error
}

/// Settles `pass` with what its run cost (`None`: unknown, so the worst
/// case stays spent).
pub(super) fn settle(pass: Pass, cost: Option<f64>) {
    if pass.settles_in_store() {
        tokio::task::spawn_blocking(move || pass.settle(cost));
    } else {
        // Nothing to write: no blocking thread woken for every run.
        pass.settle(cost);
    }
}
