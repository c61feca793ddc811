//! Shadow judging of a synthesizer (`[experiments.NAME]` with `shadow`):
//! after a run of the watched pipeline has answered its caller, a share of
//! such runs is merged again by the candidate synthesizer from the same
//! panel answers (no panel model is asked again), and the judge model
//! compares the two merges in both orders (`experiment::shadow`). The
//! caller's answer and latency are untouched: this happens in a task of
//! its own, at most [`IN_FLIGHT`] at once (past that a run is not
//! shadowed), spending the experiment's own daily budget, never a
//! client's. The judgement is kept with the run.
//!
//! Judged are runs that answered a plain question: not a follow-up, not
//! one with attachments, not a tool call — the candidate would merge
//! without what the pipeline's synthesizer saw, and lose for it.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::Chorus;
use crate::config::Shadow;
use crate::experiment::shadow::{judge_prompt, outcome, pick_of};
use crate::llm::{ChatRequest, Message, Role, Sampling};
use crate::pipeline::{Merger, Runner};
use crate::record::{AnswerKind, CallRecord, RunRecord};
use crate::store::experiments::Judgement;
use crate::store::{Lookup, Store, now_ms};

/// Shadow judgements in flight at once, per process.
pub const IN_FLIGHT: usize = 4;

/// The judgements in flight.
pub struct Shadows {
    permits: Arc<Semaphore>,
}

impl Default for Shadows {
    fn default() -> Self {
        Self {
            permits: Arc::new(Semaphore::new(IN_FLIGHT)),
        }
    }
}

impl Chorus {
    /// Starts the shadow judgements `record` is drawn for, if any.
    pub(super) fn shadow(&self, record: &Arc<RunRecord>) {
        if !shadowable(record) {
            return;
        }
        let runner = self.runner();
        for (name, experiment) in &runner.loaded.config.experiments {
            let Some(shadow) = &experiment.shadow else {
                continue;
            };
            if experiment.pipeline.as_deref() != Some(record.pipeline.as_str())
                || rand::random::<f64>() >= shadow.share
            {
                continue;
            }
            let Ok(permit) = self.shadows.permits.clone().try_acquire_owned() else {
                self.metrics.shadow_skipped(name, "busy");
                continue;
            };
            let job = Job {
                name: name.clone(),
                shadow: shadow.clone(),
                record: record.clone(),
                runner: runner.clone(),
                store: self.store.clone(),
                metrics: self.metrics.clone(),
            };
            tokio::spawn(async move {
                job.run().await;
                drop(permit);
            });
        }
    }
}

/// A run that answered a plain question, by its panel and a merge.
fn shadowable(record: &RunRecord) -> bool {
    record.follow_up_of.is_none()
        && record.resynthesis_of.is_none()
        && record.attachments.is_empty()
        && !matches!(record.kind, AnswerKind::None | AnswerKind::ToolCall)
        && record
            .calls
            .iter()
            .any(|c| c.stage == "fan-out" && c.status == "ok")
}

/// One run to judge, with what judging it needs.
struct Job {
    name: String,
    shadow: Shadow,
    record: Arc<RunRecord>,
    runner: Arc<Runner>,
    store: Store,
    metrics: Arc<crate::metrics::Metrics>,
}

impl Job {
    async fn run(self) {
        match self.judge().await {
            Ok(Some(judgement)) => {
                self.metrics.shadow_judged(
                    &self.name,
                    judgement.outcome.as_str(),
                    judgement.candidate_cost_usd.unwrap_or(0.0) + judgement.judge_cost_usd,
                );
                let kept = self
                    .store
                    .off_runtime(move |store| store.keep_judgement(&judgement))
                    .await;
                if let Err(e) = kept {
                    tracing::warn!(experiment = %self.name, "a shadow judgement was not kept: {e}");
                }
            }
            Ok(None) => {}
            Err(why) => {
                self.metrics.shadow_skipped(&self.name, "failed");
                tracing::warn!(
                    experiment = %self.name,
                    run = %self.record.run_id,
                    "the run was not judged in the shadow: {why}"
                );
            }
        }
    }

    /// The judgement, or `None` when today's budget is spent.
    async fn judge(&self) -> Result<Option<Judgement>, String> {
        let (name, since) = (
            self.name.clone(),
            crate::budget::period::day_start(now_ms()),
        );
        let tally = self
            .store
            .off_runtime(move |store| store.shadow_tally(&name, since))
            .await
            .map_err(|e| format!("its budget could not be read: {e}"))?;
        if tally.spent_since_usd >= self.shadow.budget_usd_per_day {
            self.metrics.shadow_skipped(&self.name, "budget");
            return Ok(None);
        }
        let id = self.record.run_id.clone();
        let source = match self
            .store
            .off_runtime(move |store| store.find(&id, false))
            .await
            .map_err(|e| e.to_string())?
        {
            Lookup::Found(run) => run,
            _ => return Err("the run is no longer kept".into()),
        };
        let merger = Merger::Synthesizer(self.shadow.synthesizer.clone());
        let candidate = self
            .runner
            .resynthesize(
                &source,
                &merger,
                None,
                Default::default(),
                crate::events::ignore(),
            )
            .await
            .map_err(|e| format!("the candidate `{}` failed: {e}", self.shadow.synthesizer))?;
        let question = source.prompt.as_str();
        let (baseline, challenger) = (self.record.answer.as_str(), candidate.answer.as_str());
        let (first, second) = tokio::join!(
            self.ask_judge(judge_prompt(question, baseline, challenger)),
            self.ask_judge(judge_prompt(question, challenger, baseline)),
        );
        let (first, first_cost) = first?;
        let (second, second_cost) = second?;
        let outcome = outcome(pick_of(&first), pick_of(&second));
        Ok(Some(Judgement {
            experiment: self.name.clone(),
            run_id: self.record.run_id.clone(),
            at: now_ms(),
            outcome,
            baseline_cost_usd: self.baseline_cost(),
            candidate_cost_usd: new_cost(&candidate.calls),
            judge_cost_usd: first_cost + second_cost,
            candidate_answer: candidate.answer.clone(),
            said: format!(
                "the pipeline's merge as A: {}; the candidate's as A: {}",
                crate::record::first_line(&first, 200),
                crate::record::first_line(&second, 200)
            ),
        }))
    }

    /// The judge's reply and what it cost.
    async fn ask_judge(&self, prompt: String) -> Result<(String, f64), String> {
        let mut request = ChatRequest::plain(
            "shadow judge",
            &self.shadow.judge,
            vec![Message {
                role: Role::User,
                content: prompt,
            }],
        );
        request.sampling = Sampling {
            temperature: Some(0.0),
            ..Sampling::default()
        };
        let completion = self.runner.llm.complete(&request).await;
        match completion.outcome {
            Ok(reply) => Ok((
                reply.content.to_string(),
                reply.usage.and_then(|u| u.cost).unwrap_or(0.0),
            )),
            Err(failure) => Err(format!(
                "the judge `{}` failed: {failure}",
                self.shadow.judge
            )),
        }
    }

    /// What the pipeline's own synthesizer spent in the run.
    fn baseline_cost(&self) -> Option<f64> {
        let synthesizer = self
            .runner
            .loaded
            .config
            .pipelines
            .get(&self.record.pipeline)
            .map(|p| p.synthesizer.clone())?;
        let merging: Vec<CallRecord> = self
            .record
            .calls
            .iter()
            .filter(|c| c.stage == synthesizer)
            .cloned()
            .collect();
        new_cost(&merging)
    }
}

/// What `calls` spent anew: not the answers reused from the source run.
fn new_cost(calls: &[CallRecord]) -> Option<f64> {
    let new: Vec<CallRecord> = calls
        .iter()
        .filter(|c| c.reused_from.is_none())
        .cloned()
        .collect();
    crate::record::Totals::of(&new).cost_usd
}
