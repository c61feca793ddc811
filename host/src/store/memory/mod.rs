//! The in-memory fallback for `[store] enabled = false` (or a store that
//! cannot be opened): the runs of this process only, bounded in count
//! (`limits.max_runs_kept`) and age (`limits.run_ttl`), gone when it exits.
//! Experiments' assignments, tallies and decisions are in `experiments.rs`.

mod experiments;

use super::experiments::{Decisions, Judgement};
use super::feedback::{Feedback, Feedbacks, Given, Rated};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::backend::Backend;
use super::recorder::Sink;
use super::responses::CacheEntry;
use super::retention::{Pruned, Retention};
use super::row::PROMPT_LINE;
use super::spend::{Ask, Verdict};
use super::{CallLookup, Cursor, Exchange, Lookup, Page, Query, StoreError};
use crate::record::{CallRef, RunStatus, RunSummary, StoredRun, first_line};

pub struct Memory {
    max: usize,
    ttl: Duration,
    kept: Mutex<Kept>,
    /// What this process's runs hold against their clients' budgets.
    pub ledger: super::spend::Ledger,
    /// What was decided in each experiment: outlives the runs.
    decisions: Mutex<std::collections::BTreeMap<String, Decisions>>,
    /// Shadow judgements, by (experiment, run id), while their run is kept.
    judgements: Mutex<std::collections::BTreeMap<(String, String), Judgement>>,
}

#[derive(Default)]
struct Kept {
    next_seq: i64,
    /// Oldest first: (seq, kept since, run).
    runs: VecDeque<(i64, Instant, Arc<StoredRun>)>,
    /// By (run seq, metric, client): removed with the run.
    feedback: std::collections::BTreeMap<(i64, String, String), Feedback>,
}

impl Kept {
    /// The oldest run goes, and its feedback with it.
    fn drop_oldest(&mut self) {
        if let Some((seq, _, _)) = self.runs.pop_front() {
            self.feedback.retain(|(of, _, _), _| *of > seq);
        }
    }
}

impl Memory {
    pub fn new(max: usize, ttl: Duration) -> Self {
        Self {
            max,
            ttl,
            kept: Mutex::new(Kept::default()),
            ledger: Default::default(),
            decisions: Mutex::default(),
            judgements: Mutex::default(),
        }
    }

    pub fn insert(&self, run: StoredRun) {
        let mut kept = self.lock();
        kept.next_seq += 1;
        let seq = kept.next_seq;
        kept.runs.push_back((seq, Instant::now(), Arc::new(run)));
        while kept.runs.len() > self.max {
            kept.drop_oldest();
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<StoredRun>> {
        self.lock()
            .runs
            .iter()
            .find(|(_, _, r)| r.run_id == id)
            .map(|(_, _, r)| r.clone())
    }

    /// A full id, a unique prefix of one, or `last`.
    pub fn resolve(&self, text: &str) -> Lookup<String> {
        let kept = self.lock();
        if text == "last" {
            return kept
                .runs
                .back()
                .map_or(Lookup::Unknown, |(_, _, r)| Lookup::Found(r.run_id.clone()));
        }
        if let Some((_, _, run)) = kept.runs.iter().find(|(_, _, r)| r.run_id == text) {
            return Lookup::Found(run.run_id.clone());
        }
        let mut matches: Vec<String> = kept
            .runs
            .iter()
            .filter(|(_, _, r)| !text.is_empty() && r.run_id.starts_with(text))
            .map(|(_, _, r)| r.run_id.clone())
            .collect();
        match matches.len() {
            0 => Lookup::Unknown,
            1 => Lookup::Found(matches.remove(0)),
            _ => Lookup::Ambiguous(matches),
        }
    }

    pub fn list(&self, query: &Query) -> Page {
        let kept = self.lock();
        let limit = query.limit.clamp(1, 10_000);
        let text = query.text.as_ref().map(|t| t.to_lowercase());
        let mut matching = kept.runs.iter().rev().filter(|(seq, _, run)| {
            query.before.is_none_or(|Cursor(before)| *seq < before)
                && query.pipeline.as_ref().is_none_or(|p| &run.pipeline == p)
                && query.since.is_none_or(|since| run.started_at >= since)
                && query
                    .client
                    .as_ref()
                    .is_none_or(|c| run.client.as_ref() == Some(c))
                && text.as_ref().is_none_or(|t| {
                    run.prompt.to_lowercase().contains(t)
                        || run
                            .answer
                            .as_ref()
                            .is_some_and(|a| a.to_lowercase().contains(t))
                })
        });
        let mut runs = Vec::new();
        let mut last = None;
        for (seq, _, run) in matching.by_ref().take(limit) {
            runs.push(summary(run));
            last = Some(*seq);
        }
        let next = matching.next().and(last.map(Cursor));
        Page { runs, next }
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        while kept
            .runs
            .front()
            .is_some_and(|(_, at, _)| at.elapsed() > self.ttl)
        {
            kept.drop_oldest();
        }
        kept
    }

    /// Keeps `feedback` with its run, if the run is kept.
    pub fn give(&self, feedback: &Feedback) -> Given {
        let mut kept = self.lock();
        let Some(seq) = kept
            .runs
            .iter()
            .find(|(_, _, r)| r.run_id == feedback.run_id)
            .map(|(seq, _, _)| *seq)
        else {
            return Given::UnknownRun;
        };
        let key = (seq, feedback.metric.clone(), feedback.client.clone());
        match kept.feedback.insert(key, feedback.clone()) {
            Some(was) => Given::Replaced { was: was.value },
            None => Given::New,
        }
    }

    /// The feedback on the run `run_id`, oldest first.
    pub fn feedback_of(&self, run_id: &str) -> Vec<Feedback> {
        let kept = self.lock();
        let mut given: Vec<Feedback> = kept
            .feedback
            .values()
            .filter(|f| f.run_id == run_id)
            .cloned()
            .collect();
        given.sort_by_key(|f| f.at);
        given
    }
}

fn summary(run: &StoredRun) -> RunSummary {
    RunSummary {
        run_id: run.run_id.clone(),
        pipeline: run.pipeline.clone(),
        status: run.status,
        kind: run.kind,
        started_at: run.started_at,
        elapsed_ms: run.elapsed_ms,
        cost_usd: run.usage.cost_usd,
        prompt: first_line(&run.prompt, PROMPT_LINE),
        summary: run.summary.clone(),
        follow_up_of: run.follow_up_of.clone(),
        resynthesis_of: run.resynthesis_of.clone(),
        client: run.client.clone(),
    }
}

/// This process's memory as a store backend: runs kept as `Memory` bounds
/// them, no bytes of attachments, no response-cache index, no tasks.
pub struct InMemory {
    pub runs: Arc<Memory>,
    /// Why runs are in memory only.
    pub why: &'static str,
}

impl Feedbacks for InMemory {
    fn give(&self, feedback: &Feedback) -> Result<Given, StoreError> {
        Ok(self.runs.give(feedback))
    }

    fn feedback_of(&self, run_id: &str) -> Result<Vec<Feedback>, StoreError> {
        Ok(self.runs.feedback_of(run_id))
    }

    fn rated(&self, metric: &str, since: i64, most: usize) -> Result<Vec<Rated>, StoreError> {
        let kept = self.runs.lock();
        Ok(kept
            .runs
            .iter()
            .rev()
            .filter(|(_, _, run)| run.started_at >= since && run.status == RunStatus::Done)
            .filter_map(|(seq, _, run)| {
                let values: Vec<f64> = kept
                    .feedback
                    .iter()
                    .filter(|((of, m, _), _)| of == seq && m == metric)
                    .map(|(_, f)| f.value)
                    .collect();
                Some(Rated {
                    run_id: run.run_id.clone(),
                    prompt: run.prompt.clone(),
                    answer: run.answer.clone()?,
                    mean: (!values.is_empty())
                        .then(|| values.iter().sum::<f64>() / values.len() as f64)?,
                })
            })
            .take(most)
            .collect())
    }
}

impl Backend for InMemory {
    fn describe(&self) -> String {
        format!("this process's memory ({})", self.why)
    }

    fn describe_for_clients(&self) -> String {
        self.describe()
    }

    fn sink(&self) -> Sink {
        Sink::Memory(self.runs.clone())
    }

    fn resolve(&self, id: &str) -> Result<Lookup<String>, StoreError> {
        Ok(self.runs.resolve(id))
    }

    fn run(&self, id: &str, _with_requests: bool) -> Result<Option<StoredRun>, StoreError> {
        Ok(self.runs.get(id).map(|run| StoredRun::clone(&run)))
    }

    fn call(
        &self,
        run_id: &str,
        call_id: u32,
        _with_request: bool,
    ) -> Result<CallLookup, StoreError> {
        Ok(match self.runs.get(run_id) {
            None => CallLookup::UnknownRun,
            Some(run) => CallLookup::in_run(&run, call_id),
        })
    }

    fn exchange(&self, id: &str) -> Result<Option<Exchange>, StoreError> {
        Ok(self.runs.get(id).map(|run| Exchange {
            prompt: run.prompt.clone(),
            answer: run.answer.clone(),
            follow_up_of: run.follow_up_of.clone(),
        }))
    }

    fn call_starts(&self, _id: &str) -> Result<Vec<(u32, i64)>, StoreError> {
        Ok(Vec::new())
    }

    fn attachment_rows(
        &self,
        _id: &str,
        _with_bytes: bool,
    ) -> Result<Option<Vec<super::attachments::Row>>, StoreError> {
        Ok(None)
    }

    fn list(&self, query: &Query) -> Result<Page, StoreError> {
        Ok(self.runs.list(query))
    }

    fn reserve(&self, ask: &Ask) -> Result<Verdict, StoreError> {
        Ok(self.runs.ledger.reserve(ask))
    }

    fn settle(&self, id: &str, cost_usd: f64) -> Result<(), StoreError> {
        self.runs.ledger.settle(id, cost_usd);
        Ok(())
    }

    fn keeps_answers(&self) -> bool {
        false
    }

    fn cache_entry(&self, _key: &str, _now: i64) -> Result<Option<CallRef>, StoreError> {
        Ok(None)
    }

    fn remember_answer(&self, _entry: &CacheEntry) -> Result<(), StoreError> {
        Ok(())
    }

    fn prune_at(&self, _retention: &Retention, _now: i64) -> Result<Pruned, StoreError> {
        Err(StoreError::Disabled)
    }

    fn flush(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(std::future::ready(Ok(())))
    }

    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
