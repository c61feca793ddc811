//! Which variant serves a run of an experiment, and where each experiment
//! stands. A run of a pipeline named by `[experiments.NAME]` is served by
//! one of its variants: the one its conversation had (a follow-up of a
//! kept run, or an OpenAI client's earlier messages, known by the client
//! and the conversation's first question) while that variant still
//! serves, else one drawn by the shares the experiment's `Verdict` gives.
//!
//! The numbers come from the store, so a restart continues an experiment
//! and instances on one database share it. They are read again at most
//! once a second per experiment (four times a second after a rating or a
//! run of it ended here), never per run; decisions (a winner, a variant
//! stopped) are written to the store when they are made, merged with any
//! another instance made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use sha2::{Digest, Sha256};

use super::Chorus;
use crate::client::Client;
use crate::config::Experiment;
use crate::experiment::Verdict;
use crate::pipeline::follow_up::Conversation;
use crate::record::Assignment;
use crate::store::experiments::Point;
use crate::store::{Store, StoreError, now_ms};

/// How long an experiment's standing is used before it is read again.
const FRESH: Duration = Duration::from_secs(1);
/// How soon it is read again after a rating or a run of it ended here:
/// reading costs a pass over the experiment's kept runs, so at most four
/// times a second.
const FRESH_AFTER_NEWS: Duration = Duration::from_millis(250);
/// The runs a timeline reaches back.
pub const TIMELINE_RUNS: usize = 5000;

/// Each experiment's standing as last read, shared by this process's runs.
#[derive(Default)]
pub struct Live {
    standing: Mutex<HashMap<String, Cached>>,
    /// One reading of the store at a time; the others use the last.
    reading: tokio::sync::Mutex<()>,
}

struct Cached {
    at: Instant,
    news: bool,
    /// The experiment as configured when it was read: a reload that
    /// changes it makes the reading stale at once (its variants may be
    /// gone).
    of: Experiment,
    verdict: Arc<Verdict>,
}

impl Live {
    /// A run of `experiment` was rated here: read its numbers again soon.
    pub fn rated(&self, experiment: &str) {
        self.news(experiment);
    }

    /// A run of `experiment` ended here.
    pub fn ended(&self, experiment: &str) {
        self.news(experiment);
    }

    fn news(&self, experiment: &str) {
        let mut standing = self.standing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cached) = standing.get_mut(experiment) {
            cached.news = true;
        }
    }

    fn fresh(&self, experiment: &str, of: &Experiment) -> Option<Arc<Verdict>> {
        let standing = self.standing.lock().unwrap_or_else(|e| e.into_inner());
        let cached = standing.get(experiment).filter(|c| &c.of == of)?;
        let within = if cached.news { FRESH_AFTER_NEWS } else { FRESH };
        (cached.at.elapsed() < within).then(|| cached.verdict.clone())
    }

    fn last(&self, experiment: &str, of: &Experiment) -> Option<Arc<Verdict>> {
        let standing = self.standing.lock().unwrap_or_else(|e| e.into_inner());
        standing
            .get(experiment)
            .filter(|c| &c.of == of)
            .map(|c| c.verdict.clone())
    }

    fn keep(&self, experiment: &str, of: &Experiment, verdict: Arc<Verdict>) {
        let mut standing = self.standing.lock().unwrap_or_else(|e| e.into_inner());
        standing.insert(
            experiment.to_owned(),
            Cached {
                at: Instant::now(),
                news: false,
                of: of.clone(),
                verdict,
            },
        );
    }
}

/// An experiment as `chorus experiments` and the viewer show it.
pub enum Shown {
    /// Variants sharing a pipeline name's traffic.
    Variants {
        verdict: Arc<Verdict>,
        /// Its latest runs, oldest first, with their ratings.
        timeline: Vec<Point>,
    },
    /// A synthesizer judged in the shadow of a pipeline's runs.
    Shadow(Box<crate::experiment::shadow::Standing>),
}

impl Chorus {
    /// The variant that serves this run of `asked`, when `asked` is an
    /// experiment: the conversation's, while it serves, else one drawn by
    /// the experiment's shares. A store that cannot be read costs the
    /// conversation its variant, never the run (said in the log).
    pub(super) async fn assign(
        &self,
        client: &Client,
        asked: &str,
        conversation: Option<&Conversation>,
        question: &str,
    ) -> Option<Assignment> {
        let experiment = self
            .runner()
            .loaded
            .config
            .experiments
            .get(asked)
            .filter(|e| e.splits_traffic())?
            .clone();
        let verdict = self.standing(asked, &experiment, false).await;
        let (kept, key) = self
            .conversation_variant(client, asked, conversation, question)
            .await;
        let variant = match kept {
            Some(variant) if verdict.serves(&variant) => variant,
            _ => verdict.choose(rand::rng().random::<f64>()).to_owned(),
        };
        self.metrics.experiment_run(asked, &variant);
        Some(Assignment {
            experiment: asked.to_owned(),
            variant,
            conversation: Some(key),
        })
    }

    /// The variant this conversation of `asked` was served by, if any, and
    /// the key that names the conversation.
    async fn conversation_variant(
        &self,
        client: &Client,
        asked: &str,
        conversation: Option<&Conversation>,
        question: &str,
    ) -> (Option<String>, String) {
        let opening = conversation.and_then(Conversation::opening);
        let key = conversation_key(&client.name, asked, opening.unwrap_or(question));
        let fresh = opening.is_none();
        let earlier = conversation.and_then(|c| c.of.clone());
        if fresh && earlier.is_none() {
            // A fresh question: nothing to look up.
            return (None, key);
        }
        let (experiment, found_key) = (asked.to_owned(), key.clone());
        let found = self
            .store
            .off_runtime(move |store| {
                // A kept run followed up: its own variant and key.
                if let Some(of) = earlier
                    && let Some(assignment) = store.assignment_of(&of)?
                    && assignment.experiment == experiment
                {
                    return Ok((Some(assignment.variant), assignment.conversation));
                }
                // Turns the caller sent: the conversation's last run. A
                // fresh question is drawn afresh, whatever was asked
                // before in the same words.
                if fresh {
                    return Ok((None, None));
                }
                Ok((
                    store.variant_of_conversation(&experiment, &found_key)?,
                    None,
                ))
            })
            .await;
        match found {
            Ok((variant, earlier_key)) => (variant, earlier_key.unwrap_or(key)),
            Err(e) => {
                tracing::warn!(
                    experiment = asked,
                    "the run store could not say which variant served this conversation: it is drawn afresh ({e})"
                );
                (None, key)
            }
        }
    }

    /// Where `name` stands: the last reading while fresh (`now`: always
    /// read again), else read from the store, with any new decision kept.
    async fn standing(&self, name: &str, experiment: &Experiment, now: bool) -> Arc<Verdict> {
        if !now && let Some(verdict) = self.experiments.fresh(name, experiment) {
            return verdict;
        }
        let _reading = match self.experiments.reading.try_lock() {
            Ok(guard) => guard,
            // Another run is reading: use the last reading while it does.
            Err(_) if !now && let Some(verdict) = self.experiments.last(name, experiment) => {
                return verdict;
            }
            Err(_) => self.experiments.reading.lock().await,
        };
        if !now && let Some(verdict) = self.experiments.fresh(name, experiment) {
            return verdict;
        }
        let metric = experiment
            .metric
            .as_ref()
            .and_then(|m| self.runner().loaded.config.metrics.get(m).cloned());
        let (name_owned, experiment_owned) = (name.to_owned(), experiment.clone());
        let read = self
            .store
            .off_runtime(move |store| read(store, &name_owned, &experiment_owned, metric))
            .await;
        let verdict = match read {
            Ok(verdict) => Arc::new(verdict),
            Err(e) => {
                tracing::warn!(
                    experiment = name,
                    "the run store could not be read for the experiment's numbers: its runs are shared by the starting weights until it can ({e})"
                );
                Arc::new(Verdict::of(name, experiment, None, &[], None, now_ms()))
            }
        };
        self.experiments.keep(name, experiment, verdict.clone());
        verdict
    }

    /// Where the experiment `name` stands now, read from the store, with
    /// its latest runs; `None` when no experiment has that name.
    pub async fn experiment(&self, name: &str) -> Option<Result<Shown, StoreError>> {
        let runner = self.runner();
        let experiment = runner.loaded.config.experiments.get(name)?;
        if let Some(shadow) = &experiment.shadow {
            let (name_owned, since) = (name.to_owned(), crate::budget::period::day_start(now_ms()));
            let tally = self
                .store
                .off_runtime(move |store| store.shadow_tally(&name_owned, since))
                .await;
            return Some(tally.map(|tally| {
                Shown::Shadow(Box::new(crate::experiment::shadow::Standing::of(
                    name, experiment, shadow, &tally,
                )))
            }));
        }
        let verdict = self.standing(name, experiment, true).await;
        let (name_owned, metric) = (name.to_owned(), experiment.metric.clone());
        let timeline = self
            .store
            .off_runtime(move |store| {
                store.experiment_timeline(&name_owned, metric.as_deref(), TIMELINE_RUNS)
            })
            .await;
        Some(timeline.map(|timeline| Shown::Variants { verdict, timeline }))
    }

    /// The names of the configured experiments.
    pub fn experiment_names(&self) -> Vec<String> {
        self.runner()
            .loaded
            .config
            .experiments
            .keys()
            .cloned()
            .collect()
    }
}

/// The experiment's verdict on the store's numbers, its new decisions kept
/// (merged with what another instance decided meanwhile).
fn read(
    store: &Store,
    name: &str,
    experiment: &Experiment,
    metric: Option<crate::config::Metric>,
) -> Result<Verdict, StoreError> {
    let tallies = store.experiment_tallies(name, experiment.metric.as_deref())?;
    let kept = store.experiment_decisions(name)?;
    let now = now_ms();
    let verdict = Verdict::of(
        name,
        experiment,
        metric.as_ref(),
        &tallies,
        kept.clone(),
        now,
    );
    if kept.as_ref() == Some(&verdict.decisions) {
        return Ok(verdict);
    }
    let decided = store.decide_experiment(name, &verdict.decisions)?;
    log_decisions(name, kept.as_ref(), &decided);
    if decided == verdict.decisions {
        return Ok(verdict);
    }
    Ok(Verdict::of(
        name,
        experiment,
        metric.as_ref(),
        &tallies,
        Some(decided),
        now,
    ))
}

/// A winner declared or a variant stopped is said in the log, once.
fn log_decisions(
    name: &str,
    before: Option<&crate::store::experiments::Decisions>,
    now: &crate::store::experiments::Decisions,
) {
    let was_declared = before.and_then(|b| b.winner.as_ref());
    if let Some(winner) = &now.winner
        && was_declared.is_none()
    {
        tracing::info!(experiment = name, winner = %winner.variant, "{}", winner.said);
    }
    for (variant, stop) in &now.stopped {
        if before.is_none_or(|b| !b.stopped.contains_key(variant)) {
            tracing::warn!(experiment = name, variant = %variant, "variant stopped: {}", stop.reason);
        }
    }
}

/// What names a conversation of an experiment: its client and its first
/// question, hashed (the store keeps no question twice).
fn conversation_key(client: &str, experiment: &str, opening: &str) -> String {
    let mut hash = Sha256::new();
    for part in [client, experiment, opening] {
        hash.update(part.len().to_le_bytes());
        hash.update(part.as_bytes());
    }
    crate::text::hex(&hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn experiment(variants: &str) -> Experiment {
        toml::from_str(&format!("variants = {{ {variants} }}")).unwrap()
    }

    /// A reload that changes an experiment makes its last reading stale at
    /// once: a variant it drew may be gone.
    #[test]
    fn a_reading_is_fresh_only_for_the_experiment_it_was_made_of() {
        let live = Live::default();
        let before = experiment("ask = 1, cheap = 1");
        let verdict = Arc::new(Verdict::of("ask", &before, None, &[], None, 0));
        live.keep("ask", &before, verdict);
        assert!(live.fresh("ask", &before).is_some());
        let after = experiment("ask = 1, self-moa = 1");
        assert!(live.fresh("ask", &after).is_none());
        assert!(live.last("ask", &after).is_none());
        live.rated("ask");
        std::thread::sleep(FRESH_AFTER_NEWS);
        assert!(
            live.fresh("ask", &before).is_none(),
            "news makes it stale sooner"
        );
    }

    #[test]
    fn a_conversation_is_known_by_its_client_and_first_question() {
        let key = conversation_key("alice", "ask", "q");
        assert_eq!(key, conversation_key("alice", "ask", "q"));
        assert_ne!(key, conversation_key("bob", "ask", "q"));
        assert_ne!(key, conversation_key("alice", "ask", "q2"));
        // The parts are delimited: no two splits of one text meet.
        assert_ne!(
            conversation_key("al", "iceask", "q"),
            conversation_key("alice", "ask", "q")
        );
    }
}
