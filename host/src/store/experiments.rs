//! Experiments as the store keeps them: which variant served each run of an
//! experiment (written with the run's first row, removed with it), the
//! numbers each variant's runs add up to (runs, failures, cost, time, and
//! the ratings on one metric), and the decisions made on them (a winner, a
//! variant stopped by a guardrail), which outlive a restart and are shared
//! by every instance on one database. Every backend implements the one
//! trait `Experiments`, each in a file of its own.
//!
//! What the numbers mean — the choice of a variant, the stopping rule, the
//! guardrails — is `experiment`'s business; this module only counts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::record::Assignment;

/// What one variant's runs add up to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub variant: String,
    /// Runs that ended (answered or failed).
    pub runs: u64,
    /// Of them, those that failed or answered nothing.
    pub failed: u64,
    /// What they cost, in USD.
    pub cost_usd: f64,
    /// The 95th-percentile time of the latest `P95_RUNS` that answered,
    /// in ms.
    pub p95_ms: Option<u64>,
    /// Runs rated on the metric asked for.
    pub rated: u64,
    /// The sum, over rated runs, of each run's mean rating (several
    /// clients' ratings of one run count as one value, their mean).
    pub value_sum: f64,
}

/// One run of an experiment, for a series over time.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub variant: String,
    /// When it started, unix ms.
    pub at: i64,
    /// Its mean rating on the metric asked for, when rated.
    pub value: Option<f64>,
}

/// A variant declared better than every other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Declared {
    pub variant: String,
    /// The numbers it was declared on, in words.
    pub said: String,
    /// Unix ms.
    pub at: i64,
}

/// A variant stopped by a guardrail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    pub reason: String,
    /// Unix ms.
    pub at: i64,
}

/// What was decided in an experiment: kept until its variants change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Decisions {
    /// The variants, as configured, the decisions were made among.
    pub variants: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<Declared>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stopped: BTreeMap<String, Stopped>,
}

impl Decisions {
    /// `newer` on top of these: a winner, once declared, stays, as does a
    /// stop (the first reason is kept); decisions made among other
    /// variants (the configuration changed) are dropped for `newer`.
    pub fn merge(self, newer: &Decisions) -> Decisions {
        if self.variants != newer.variants {
            return newer.clone();
        }
        let mut stopped = self.stopped;
        for (variant, stop) in &newer.stopped {
            stopped
                .entry(variant.clone())
                .or_insert_with(|| stop.clone());
        }
        Decisions {
            variants: self.variants,
            winner: self.winner.or_else(|| newer.winner.clone()),
            stopped,
        }
    }
}

/// How a shadow judgement came out, for the candidate synthesizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The judge preferred the candidate's merge in both orders.
    Win,
    /// The pipeline's own merge, in both orders.
    Loss,
    /// A tie, or the two orders disagreed.
    Tie,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Win => "win",
            Self::Loss => "loss",
            Self::Tie => "tie",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Win, Self::Loss, Self::Tie]
            .into_iter()
            .find(|o| o.as_str() == text)
    }
}

/// One run of a shadow experiment's pipeline, merged again by the
/// candidate and judged.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub experiment: String,
    pub run_id: String,
    /// Unix ms.
    pub at: i64,
    pub outcome: Outcome,
    /// What the pipeline's own merge cost (in the run), the candidate's,
    /// and the judge's two calls.
    pub baseline_cost_usd: Option<f64>,
    pub candidate_cost_usd: Option<f64>,
    pub judge_cost_usd: f64,
    /// The candidate's answer, to read beside the run's.
    pub candidate_answer: String,
    /// What the judge said in each order, in words.
    pub said: String,
}

/// A run whose two merges a judge told apart, with both answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub run_id: String,
    pub experiment: String,
    pub prompt: String,
    /// The pipeline's own answer, and the candidate's.
    pub answer: String,
    pub candidate_answer: String,
    pub outcome: Outcome,
}

/// What a shadow experiment's judgements add up to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShadowTally {
    pub wins: u64,
    pub losses: u64,
    pub ties: u64,
    /// Sums over the judgements whose cost is known.
    pub baseline_cost_usd: f64,
    pub candidate_cost_usd: f64,
    pub judge_cost_usd: f64,
    /// What the candidate and the judge spent since the time asked for.
    pub spent_since_usd: f64,
}

impl ShadowTally {
    pub fn judged(&self) -> u64 {
        self.wins + self.losses + self.ties
    }
}

/// Where experiments are kept: every backend.
pub(super) trait Experiments {
    /// The experiment and variant the run `run_id` (a full id) served.
    fn assignment_of(&self, run_id: &str) -> Result<Option<Assignment>, StoreError>;

    /// The variant the latest run of `experiment` in the conversation
    /// `key` was served by.
    fn variant_of_conversation(
        &self,
        experiment: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Each variant's numbers, its ratings on `metric` (none: no rating
    /// counted), for the variants that have runs.
    fn tallies(&self, experiment: &str, metric: Option<&str>) -> Result<Vec<Tally>, StoreError>;

    /// The experiment's latest `most` runs, oldest first.
    fn timeline(
        &self,
        experiment: &str,
        metric: Option<&str>,
        most: usize,
    ) -> Result<Vec<Point>, StoreError>;

    /// What was decided in `experiment`, if anything.
    fn decisions(&self, experiment: &str) -> Result<Option<Decisions>, StoreError>;

    /// Records `decisions` on top of those kept (`Decisions::merge`, in one
    /// transaction, so instances that decide at once agree) and answers
    /// what is kept now.
    fn decide(&self, experiment: &str, decisions: &Decisions) -> Result<Decisions, StoreError>;

    /// Keeps a shadow judgement with its run; `false` when no kept run has
    /// its id (removed meanwhile).
    fn judged(&self, judgement: &Judgement) -> Result<bool, StoreError>;

    /// A shadow experiment's judgements, and what it spent since `since`
    /// (unix ms).
    fn shadow_tally(&self, experiment: &str, since: i64) -> Result<ShadowTally, StoreError>;

    /// The latest `most` judgements made since `since` (unix ms) that were
    /// not a tie, newest first.
    fn decisive_judgements(&self, since: i64, most: usize) -> Result<Vec<Judged>, StoreError>;
}

/// The answered runs of a variant its p95 time is taken over: its latest.
pub const P95_RUNS: usize = 1000;

/// The 95th percentile of `times` (in ms).
pub(super) fn p95_of(mut times: Vec<i64>) -> Option<u64> {
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    let n = times.len();
    let at = (n * 95).div_ceil(100).saturating_sub(1);
    u64::try_from(times[at]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_merge_keeps_the_first_winner_and_every_stop() {
        let variants = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let kept = Decisions {
            variants: variants.clone(),
            winner: None,
            stopped: BTreeMap::from([(
                "c".to_owned(),
                Stopped {
                    reason: "cost".into(),
                    at: 1,
                },
            )]),
        };
        let newer = Decisions {
            variants: variants.clone(),
            winner: Some(Declared {
                variant: "a".into(),
                said: "".into(),
                at: 2,
            }),
            stopped: BTreeMap::from([(
                "c".to_owned(),
                Stopped {
                    reason: "later".into(),
                    at: 3,
                },
            )]),
        };
        let merged = kept.clone().merge(&newer);
        assert_eq!(merged.winner.unwrap().variant, "a");
        assert_eq!(merged.stopped["c"].reason, "cost");
        let changed = Decisions {
            variants: vec!["a".into(), "b".into()],
            ..Decisions::default()
        };
        assert_eq!(kept.merge(&changed), changed);
    }

    #[test]
    fn the_95th_percentile() {
        assert_eq!(p95_of(vec![7]), Some(7));
        assert_eq!(p95_of((1..=20).rev().collect()), Some(19));
        assert_eq!(p95_of((1..=100).collect()), Some(95));
        assert_eq!(p95_of(Vec::new()), None);
    }
}
