//! Feedback on runs, one gate for every door (the MCP tool `feedback`,
//! `POST /v1/feedback`, the viewer's form, `chorus runs feedback`): the
//! metric must be one the configuration declares, the value one it takes,
//! and the run one the client may see — another client's run is as
//! unknown as one that never was. What is kept says who gave it and when
//! (`store::feedback`), and the metrics count it.

use serde_json::Value;

use super::Chorus;
use crate::client::Client;
use crate::store::{Feedback, Given, Lookup, MAX_COMMENT_BYTES, StoreError, now_ms};

/// A rating as a door read it.
#[derive(Debug, Clone)]
pub struct Rating {
    /// A run id, a unique prefix of one, `last`, or an id an endpoint gave
    /// for it (`chatcmpl-…`, `resp_…`, `msg_…`).
    pub run: String,
    pub metric: String,
    pub value: Value,
    pub comment: Option<String>,
}

/// Why a rating was not kept.
#[derive(Debug, thiserror::Error)]
pub enum FeedbackError {
    /// The rating itself is wrong: a metric not declared, a value it does
    /// not take, a comment too long.
    #[error("{0}")]
    Invalid(String),
    /// No run the client may see has this id.
    #[error("no run `{0}` is kept that you may see (`runs` lists yours)")]
    UnknownRun(String),
    #[error("`{id}` starts several runs' ids ({}): give more of it", .matches.join(", "))]
    Ambiguous { id: String, matches: Vec<String> },
    /// Past `budget::MAX_RATINGS_PER_MINUTE`.
    #[error(
        "at most {} ratings a minute are taken from one client: try again in {} s",
        crate::budget::MAX_RATINGS_PER_MINUTE,
        .retry_after.as_secs() + 1
    )]
    TooMany { retry_after: std::time::Duration },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What was kept.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub feedback: Feedback,
    pub given: Given,
}

impl Recorded {
    /// In a sentence, for the one who gave it.
    pub fn said(&self) -> String {
        let f = &self.feedback;
        match self.given {
            Given::Replaced { was } => format!(
                "Recorded {} = {} on run {} (it replaces your earlier {was}).",
                f.metric,
                shown(f.value),
                f.run_id
            ),
            _ => format!(
                "Recorded {} = {} on run {}.",
                f.metric,
                shown(f.value),
                f.run_id
            ),
        }
    }
}

fn shown(value: f64) -> String {
    format!("{value}")
}

/// The run id an endpoint's own id stands for.
fn run_id_of(id: &str) -> &str {
    ["chatcmpl-", "resp_", "msg_"]
        .iter()
        .find_map(|prefix| id.strip_prefix(prefix))
        .unwrap_or(id)
        .trim()
}

impl Chorus {
    /// Keeps `rating` on its run, given by `client`; a second rating of
    /// the same run and metric by the same client replaces the first.
    pub async fn give_feedback(
        &self,
        client: &Client,
        rating: Rating,
    ) -> Result<Recorded, FeedbackError> {
        let runner = self.runner();
        let metrics = &runner.loaded.config.metrics;
        let Some(metric) = metrics.get(&rating.metric) else {
            return Err(FeedbackError::Invalid(if metrics.is_empty() {
                "this chorus takes no feedback: its configuration declares no metric (add one, e.g. [metrics.helpful] type = \"boolean\")".to_owned()
            } else {
                format!(
                    "no metric `{}`: this chorus takes {}",
                    rating.metric,
                    metrics
                        .keys()
                        .map(|m| format!("`{m}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }));
        };
        let value = metric
            .value_of(&rating.metric, &rating.value)
            .map_err(FeedbackError::Invalid)?;
        let comment = rating.comment.filter(|c| !c.trim().is_empty());
        if let Some(comment) = &comment
            && comment.len() > MAX_COMMENT_BYTES
        {
            return Err(FeedbackError::Invalid(format!(
                "the comment is {} bytes; at most {MAX_COMMENT_BYTES} are kept",
                comment.len()
            )));
        }
        self.gate
            .rating(client)
            .map_err(|retry_after| FeedbackError::TooMany { retry_after })?;
        let id = run_id_of(&rating.run);
        let run = match self.find_run_for(client, id, false).await? {
            Lookup::Found(run) => run,
            Lookup::Unknown => return Err(FeedbackError::UnknownRun(id.to_owned())),
            Lookup::Ambiguous(matches) => {
                return Err(FeedbackError::Ambiguous {
                    id: id.to_owned(),
                    matches,
                });
            }
        };
        let feedback = Feedback {
            run_id: run.run_id.clone(),
            metric: rating.metric,
            value,
            client: client.name.clone(),
            comment,
            at: now_ms(),
        };
        let kept = feedback.clone();
        let given = self
            .store
            .off_runtime(move |store| store.give_feedback(&kept))
            .await?;
        if given == Given::UnknownRun {
            // Found a moment ago, removed since (retention).
            return Err(FeedbackError::UnknownRun(run.run_id));
        }
        self.metrics
            .feedback_given(&feedback.metric, &run.pipeline, value);
        if let Some(assignment) = &run.experiment {
            self.metrics.experiment_feedback_given(
                (&assignment.experiment, &assignment.variant),
                &feedback.metric,
                value,
            );
            self.experiments.rated(&assignment.experiment);
        }
        tracing::info!(
            target: super::AUDIT,
            client = %client.name,
            run = %feedback.run_id,
            metric = %feedback.metric,
            value,
            "feedback given"
        );
        Ok(Recorded { feedback, given })
    }

    /// The feedback on a run the caller has found (a full id).
    pub async fn feedback_of(&self, run_id: &str) -> Result<Vec<Feedback>, StoreError> {
        let id = run_id.to_owned();
        self.store
            .off_runtime(move |store| store.feedback_of(&id))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::run_id_of;

    #[test]
    fn an_endpoints_id_names_its_run() {
        for id in [
            "chatcmpl-0196a",
            "resp_0196a",
            "msg_0196a",
            "0196a",
            " 0196a ",
        ] {
            assert_eq!(run_id_of(id), "0196a", "{id}");
        }
    }
}
