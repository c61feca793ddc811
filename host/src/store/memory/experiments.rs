//! `store::experiments` in this process's memory: assignments ride on the
//! runs kept (`StoredRun::experiment`), tallies are counted over them, and
//! decisions and shadow judgements are kept beside them (judgements only
//! while their run is).

use std::sync::Arc;

use super::{InMemory, Memory};
use crate::record::{RunStatus, StoredRun};
use crate::store::StoreError;
use crate::store::experiments::{
    Decisions, Experiments, Judged, Judgement, Outcome, P95_RUNS, Point, ShadowTally, Tally, p95_of,
};

impl Memory {
    /// The runs of `experiment`, oldest first, each with its mean rating
    /// on `metric`.
    fn of_experiment(
        &self,
        experiment: &str,
        metric: Option<&str>,
    ) -> Vec<(Arc<StoredRun>, Option<f64>)> {
        let kept = self.lock();
        kept.runs
            .iter()
            .filter(|(_, _, run)| {
                run.experiment
                    .as_ref()
                    .is_some_and(|a| a.experiment == experiment)
            })
            .map(|(seq, _, run)| {
                let values: Vec<f64> = kept
                    .feedback
                    .iter()
                    .filter(|((of, m, _), _)| of == seq && Some(m.as_str()) == metric)
                    .map(|(_, f)| f.value)
                    .collect();
                let mean =
                    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
                (run.clone(), mean)
            })
            .collect()
    }
}

impl Experiments for InMemory {
    fn assignment_of(&self, run_id: &str) -> Result<Option<crate::record::Assignment>, StoreError> {
        Ok(self.runs.get(run_id).and_then(|run| run.experiment.clone()))
    }

    fn variant_of_conversation(
        &self,
        experiment: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .runs
            .of_experiment(experiment, None)
            .iter()
            .rev()
            .filter_map(|(run, _)| run.experiment.as_ref())
            .find(|a| a.conversation.as_deref() == Some(key))
            .map(|a| a.variant.clone()))
    }

    fn tallies(&self, experiment: &str, metric: Option<&str>) -> Result<Vec<Tally>, StoreError> {
        let mut tallies: std::collections::BTreeMap<String, (Tally, Vec<u64>)> = Default::default();
        for (run, value) in self.runs.of_experiment(experiment, metric) {
            let Some(assignment) = &run.experiment else {
                continue;
            };
            let (tally, times) = tallies
                .entry(assignment.variant.clone())
                .or_insert_with(|| {
                    (
                        Tally {
                            variant: assignment.variant.clone(),
                            ..Tally::default()
                        },
                        Vec::new(),
                    )
                });
            let ended = matches!(run.status, RunStatus::Done | RunStatus::Failed);
            if ended {
                tally.runs += 1;
                tally.cost_usd += run.usage.cost_usd.unwrap_or(0.0);
                let answered_nothing = run.kind == Some(crate::record::AnswerKind::None);
                if run.status == RunStatus::Failed || answered_nothing {
                    tally.failed += 1;
                }
            }
            if run.status == RunStatus::Done
                && let Some(ms) = run.elapsed_ms
            {
                times.push(ms);
            }
            if let Some(value) = value {
                tally.rated += 1;
                tally.value_sum += value;
            }
        }
        Ok(tallies
            .into_values()
            .map(|(mut tally, times)| {
                let latest = times.len().saturating_sub(P95_RUNS);
                let times = times[latest..]
                    .iter()
                    .map(|ms| i64::try_from(*ms).unwrap_or(i64::MAX))
                    .collect();
                tally.p95_ms = p95_of(times);
                tally
            })
            .collect())
    }

    fn timeline(
        &self,
        experiment: &str,
        metric: Option<&str>,
        most: usize,
    ) -> Result<Vec<Point>, StoreError> {
        let runs = self.runs.of_experiment(experiment, metric);
        let skip = runs.len().saturating_sub(most);
        Ok(runs
            .into_iter()
            .skip(skip)
            .filter_map(|(run, value)| {
                Some(Point {
                    variant: run.experiment.as_ref()?.variant.clone(),
                    at: run.started_at,
                    value,
                })
            })
            .collect())
    }

    fn decisions(&self, experiment: &str) -> Result<Option<Decisions>, StoreError> {
        let decisions = self
            .runs
            .decisions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Ok(decisions.get(experiment).cloned())
    }

    fn decide(&self, experiment: &str, newer: &Decisions) -> Result<Decisions, StoreError> {
        let mut decisions = self
            .runs
            .decisions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let merged = match decisions.remove(experiment) {
            Some(kept) => kept.merge(newer),
            None => newer.clone(),
        };
        decisions.insert(experiment.to_owned(), merged.clone());
        Ok(merged)
    }

    fn judged(&self, judgement: &Judgement) -> Result<bool, StoreError> {
        if self.runs.get(&judgement.run_id).is_none() {
            return Ok(false);
        }
        let mut judgements = self
            .runs
            .judgements
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        judgements.insert(
            (judgement.experiment.clone(), judgement.run_id.clone()),
            judgement.clone(),
        );
        Ok(true)
    }

    fn decisive_judgements(&self, since: i64, most: usize) -> Result<Vec<Judged>, StoreError> {
        let judgements = self
            .runs
            .judgements
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut decisive: Vec<&Judgement> = judgements
            .values()
            .filter(|j| j.at >= since && j.outcome != Outcome::Tie)
            .collect();
        decisive.sort_by_key(|j| std::cmp::Reverse(j.at));
        Ok(decisive
            .into_iter()
            .filter_map(|j| {
                let run = self.runs.get(&j.run_id)?;
                Some(Judged {
                    run_id: j.run_id.clone(),
                    experiment: j.experiment.clone(),
                    prompt: run.prompt.clone(),
                    answer: run.answer.clone()?,
                    candidate_answer: j.candidate_answer.clone(),
                    outcome: j.outcome,
                })
            })
            .take(most)
            .collect())
    }

    fn shadow_tally(&self, experiment: &str, since: i64) -> Result<ShadowTally, StoreError> {
        let mut judgements = self
            .runs
            .judgements
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Those of runs no longer kept go with them.
        judgements.retain(|(_, run), _| self.runs.get(run).is_some());
        let mut tally = ShadowTally::default();
        for judgement in judgements.values().filter(|j| j.experiment == experiment) {
            match judgement.outcome {
                Outcome::Win => tally.wins += 1,
                Outcome::Loss => tally.losses += 1,
                Outcome::Tie => tally.ties += 1,
            }
            tally.baseline_cost_usd += judgement.baseline_cost_usd.unwrap_or(0.0);
            tally.candidate_cost_usd += judgement.candidate_cost_usd.unwrap_or(0.0);
            tally.judge_cost_usd += judgement.judge_cost_usd;
            if judgement.at >= since {
                tally.spent_since_usd +=
                    judgement.candidate_cost_usd.unwrap_or(0.0) + judgement.judge_cost_usd;
            }
        }
        Ok(tally)
    }
}
