//! The composition root: one running chorus — the pipeline runner built from
//! the configuration, and the store that keeps its runs. The CLI and the MCP
//! server hold a `Chorus`; nothing below this module knows that it exists.
//!
//! Every run goes through here, so every run is recorded: admitted by the
//! one gate ([`gate`]: grants, per-minute, runs in progress, budgets)
//! before anything is fetched, measured or asked of a model, watched by the
//! store as it goes, its end kept. Follow-ups and re-syntheses are resolved
//! here too, among the runs their client may see ([`visible`]).
//!
//! The runner can be swapped while chorus serves ([`reload`], driven by
//! [`watcher`] in `chorus serve`): each run takes the current one when it
//! starts and finishes on it, whatever is swapped in meanwhile.

mod carried;
pub mod experiments;
pub mod feedback;
mod gate;
pub mod reload;
mod resynthesis;
mod sent;
mod shadow;
mod spend;
pub mod trim;
mod visible;
pub mod watcher;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::budget::{Gate, Pass};
use crate::client::Client;
use crate::config::{ConfigError, Loaded};
use crate::events;
use crate::events::Progress;
use crate::metrics::{Flight, Metrics, ProviderOf};
use crate::pipeline::CallCache;
use crate::pipeline::{Question, RunError, Runner, options};
use crate::record::RunRecord;
use crate::store::{Links, Recorder, Store};
use crate::telemetry::{RunTrace, Telemetry};
use gate::{settle, unspent};

/// The log target of the audit lines: one per run, one per refused HTTP
/// request; on by default when serving.
pub const AUDIT: &str = "chorus::audit";

/// A run's audit line: who ran what, how it ended, what it cost. Never the
/// prompt or the answer.
fn audit(client: &str, run_id: Option<&str>, outcome: &Result<Arc<RunRecord>, RunError>) {
    match outcome {
        Ok(record) => tracing::info!(
            target: AUDIT,
            client,
            run = %record.run_id,
            pipeline = %record.pipeline,
            kind = %record.kind.as_str(),
            cost_usd = record.usage.cost_usd,
            cost_estimated = record.usage.cost_estimated,
            duration_ms = record.elapsed_ms,
            calls = record.calls.len(),
            "run ended"
        ),
        Err(error) => tracing::info!(
            target: AUDIT,
            client,
            run = run_id.unwrap_or("-"),
            error = %error,
            "run failed"
        ),
    }
}

/// What a pipeline's run continues.
enum Earlier {
    /// Nothing: a fresh question.
    None,
    /// A run kept in the store (`follow_up_of`), by id or prefix.
    Kept(String),
    /// Turns the caller sent whole (an OpenAI client's messages).
    Sent(crate::pipeline::follow_up::Conversation),
}

pub struct Chorus {
    /// The runner new runs use; replaced whole by a reload, announced to
    /// every subscriber.
    current: watch::Sender<Arc<Runner>>,
    pub store: Store,
    /// What runs and calls did, for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Runs as OpenTelemetry traces, when `[telemetry]` says where to.
    pub telemetry: Telemetry,
    /// Each client's runs per minute, runs in progress and budgets.
    pub gate: Arc<Gate>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// Moves on each event of each run this process makes (but streamed
    /// tokens): the run viewer reads a run in flight again when it does.
    moved: watch::Sender<u64>,
    /// Each reload's outcome, for MCP sessions to log (see `reloads`).
    reloaded: tokio::sync::broadcast::Sender<reload::Notice>,
    /// Where each experiment stands, as last read from the store.
    experiments: experiments::Live,
    /// Shadow judgements in flight.
    shadows: shadow::Shadows,
}

impl Chorus {
    /// Builds everything a configuration describes: providers, plugins (a
    /// built-in with its shipped settings loaded when a run first needs
    /// it: `Runner::load_needed`), the run store (in memory, said in the
    /// log, if its file cannot be opened) and the trace exporter.
    pub fn load(loaded: Loaded) -> Result<Self, ConfigError> {
        Self::build(loaded, Runner::load_needed)
    }

    /// As `load`, but the plugins that must be compiled compile in the
    /// background (`Runner::load_deferred`): for the first start of
    /// `serve`, which answers its client without waiting for them. Reloads
    /// still build the whole runner before swapping it in.
    pub fn load_serving(loaded: Loaded) -> Result<Self, ConfigError> {
        Self::build(loaded, Runner::load_deferred)
    }

    fn build(
        loaded: Loaded,
        runner: impl FnOnce(Loaded) -> Result<Runner, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let telemetry = Telemetry::start(&loaded)?;
        // The store opens (its file and schema check and writer thread, or
        // a database connection) while the plugins load: neither needs the
        // other, and a start waits for both before it answers.
        let runtime = tokio::runtime::Handle::try_current().ok();
        let (runner, store) = std::thread::scope(|scope| {
            let store = std::thread::Builder::new()
                .name("chorus-store-open".into())
                .spawn_scoped(scope, || {
                    let _entered = runtime.as_ref().map(|r| r.enter());
                    Store::open_or_memory(&loaded)
                });
            let runner = runner(loaded.clone());
            let store = match store {
                Ok(opening) => opening
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // No thread to be had: open it here, after the plugins.
                Err(_) => Store::open_or_memory(&loaded),
            };
            (runner, store)
        });
        let runner = runner?;
        let gate = Gate::new();
        if let Some(shared) = store.shared_limits() {
            runner.llm.share_limits(&shared);
            gate.share(shared);
        }
        let responses = crate::respcache::ResponseCache::of(&runner.loaded.config, &store);
        let runner = runner.with_responses(responses.map(|c| c as Arc<dyn CallCache>));
        let metrics = Metrics::new(store.write_lag().as_ref());
        Ok(Self {
            current: watch::Sender::new(Arc::new(runner)),
            store,
            metrics,
            telemetry,
            gate,
            reloading: tokio::sync::Mutex::new(()),
            moved: watch::Sender::new(0),
            reloaded: tokio::sync::broadcast::Sender::new(8),
            experiments: experiments::Live::default(),
            shadows: shadow::Shadows::default(),
        })
    }

    /// The runner as it is now. A run holds on to the one it started with.
    pub fn runner(&self) -> Arc<Runner> {
        self.current.borrow().clone()
    }

    /// Sees every runner swapped in by a reload (the MCP layer announces a
    /// changed tool list from it).
    pub fn changes(&self) -> watch::Receiver<Arc<Runner>> {
        self.current.subscribe()
    }

    /// Hears of every reload's outcome from now on (a lagging receiver
    /// misses some: these are notices, not state).
    pub fn reloads(&self) -> tokio::sync::broadcast::Receiver<reload::Notice> {
        self.reloaded.subscribe()
    }

    /// Sees every run of this process move (see `moved`).
    pub fn moves(&self) -> watch::Receiver<u64> {
        self.moved.subscribe()
    }

    /// Waits until no run of this process is going (each one's end handed
    /// to the store), or `within` has passed; how many are still going.
    /// Looks every 100 ms: a run that just ended has its response still
    /// to write, and the HTTP drain ends the session right after this.
    pub async fn runs_end(&self, within: std::time::Duration) -> i64 {
        let started = std::time::Instant::now();
        while self.metrics.runs_in_flight() > 0 && started.elapsed() < within {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        self.metrics.runs_in_flight()
    }

    /// The watcher that moves `moved`; after the recorder, so what it
    /// announces has been sent to the store.
    fn mover(&self) -> Progress {
        let moved = self.moved.clone();
        Arc::new(move |event| {
            if !matches!(
                event,
                events::Event::CallTokens { .. } | events::Event::AnswerText { .. }
            ) {
                moved.send_modify(|n| *n = n.wrapping_add(1));
            }
        })
    }

    /// Finds the configuration the way every command does, and loads it.
    pub fn discover(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        Loaded::discover(explicit).and_then(Self::load)
    }

    /// Runs `pipeline` for `client` and keeps its record. `options` may
    /// hold the built-in `follow_up_of`. Cancel by dropping the future.
    pub async fn run(
        &self,
        client: &Arc<Client>,
        pipeline: &str,
        question: Question,
        mut options: Map<String, Value>,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        let earlier =
            match options::take_follow_up(&mut options).map_err(RunError::InvalidOptions)? {
                Some(id) => Earlier::Kept(id),
                None => Earlier::None,
            };
        self.turn(client, pipeline, question, options, earlier, progress)
            .await
    }

    /// The one path of a pipeline's run, whatever came before it: admitted
    /// by the gate, the earlier turns resolved, the question prepared, the
    /// run made and kept; a run refused after admission gives its pass back.
    async fn turn(
        &self,
        client: &Arc<Client>,
        pipeline: &str,
        question: Question,
        options: Map<String, Value>,
        earlier: Earlier,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        let worst = worst_case(&self.runner(), Some(&options));
        let pass = self.admit(client, pipeline, worst).await?;
        let (conversation, question) = match earlier {
            Earlier::Kept(id) => {
                let resolved = async {
                    let (conversation, earlier) = self.conversation(client, &id).await?;
                    let question = self.carry_over(&earlier, question, pipeline).await?;
                    Ok((Some(conversation), question))
                };
                match resolved.await {
                    Ok(resolved) => resolved,
                    Err(e) => return Err(unspent(pass, e)),
                }
            }
            Earlier::Sent(conversation) => (Some(conversation), question),
            Earlier::None => (None, question),
        };
        // Its PDFs' pages are counted as its client's (`attach::pdf::turns`).
        let prepared = crate::attach::pdf::for_client(&client.name, self.prepared(question));
        let question = match prepared.await {
            Ok(question) => question,
            Err(e) => return Err(unspent(pass, e)),
        };
        // An experiment's run is made by one of its variants, and says so.
        let experiment = self
            .assign(client, pipeline, conversation.as_ref(), &question.text)
            .await;
        let variant = experiment.as_ref().map(|a| a.variant.clone());
        let runs = variant.as_deref().unwrap_or(pipeline);
        let recorded = experiment.clone();
        let links = Links {
            follow_up_of: conversation.as_ref().and_then(|c| c.of.clone()),
            resynthesis_of: None,
            client: Some(client.name.clone()),
            attachments: question.attachments.clone(),
            experiment: experiment.clone(),
        };
        let outcome = self
            .make(
                pass,
                client,
                runs,
                links,
                progress,
                |runner, progress| async move {
                    let record = runner
                        .run_continuing(runs, question, options, conversation, progress)
                        .await?;
                    Ok(RunRecord {
                        experiment: recorded,
                        ..record
                    })
                },
            )
            .await;
        if let Some(served) = &experiment {
            self.experiments.ended(&served.experiment);
        }
        if let Ok(record) = &outcome {
            self.shadow(record);
        }
        outcome
    }

    /// Asks `model` alone (see `Runner::ask_model`) and keeps the run's
    /// record, named `model:ID`.
    pub async fn ask_model(
        &self,
        client: &Arc<Client>,
        model: &str,
        question: Question,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        let name = crate::pipeline::single_run_name(model);
        let pass = self
            .admit(client, &name, worst_case(&self.runner(), None))
            .await?;
        // Its PDFs' pages are counted as its client's (`attach::pdf::turns`).
        let prepared = crate::attach::pdf::for_client(&client.name, self.prepared(question));
        let question = match prepared.await {
            Ok(question) => question,
            Err(e) => return Err(unspent(pass, e)),
        };
        let links = Links {
            client: Some(client.name.clone()),
            attachments: question.attachments.clone(),
            ..Links::default()
        };
        self.make(
            pass,
            client,
            &name,
            links,
            progress,
            |runner, progress| async move { runner.ask_model(model, question, progress).await },
        )
        .await
    }

    /// The one way this layer makes a run, whatever kind, once `pass`
    /// admitted it: watched by the store, the metrics and the viewer, and
    /// kept; its cost is then settled against the client's budgets — what
    /// its calls spent, whether it answered or failed.
    async fn make<F, Fut>(
        &self,
        pass: Pass,
        client: &Arc<Client>,
        name: &str,
        links: Links,
        progress: Progress,
        run: F,
    ) -> Result<Arc<RunRecord>, RunError>
    where
        F: FnOnce(Arc<Runner>, Progress) -> Fut,
        Fut: Future<Output = Result<RunRecord, RunError>>,
    {
        let runner = self.runner();
        let flight = self.metrics.run(name);
        let trace = self
            .telemetry
            .run(name, &client.name, providers_of(&runner));
        let mut recorder = self.store.recorder(links, runner.time_limit(name));
        let spent = spend::Spent::default();
        let progress = self.watched(
            &recorder,
            events::fan(vec![spent.watcher(), progress]),
            &client.name,
            &runner,
            trace.as_ref(),
        );
        // Its PDFs are parsed as its client's: one turn at a time, within
        // one budget (`attach::pdf::turns`).
        let run = crate::attach::pdf::for_client(&client.name, run(runner, progress));
        let outcome = crate::respcache::SCOPE
            .scope(client.name.clone(), run)
            .await;
        let cost = match &outcome {
            Ok(record) => record.usage.cost_usd,
            // A failed run may have asked models before it failed: what
            // its calls spent, or (a cost unknown) its worst case.
            Err(_) => spent.total(),
        };
        settle(pass, cost);
        self.keep(&client.name, &mut recorder, (flight, trace), outcome)
            .await
    }

    fn watched(
        &self,
        recorder: &Recorder,
        progress: Progress,
        client: &str,
        runner: &Runner,
        trace: Option<&RunTrace>,
    ) -> Progress {
        let mut watchers = vec![
            recorder.watcher(),
            self.metrics.watcher(client, providers_of(runner)),
            self.mover(),
        ];
        watchers.extend(trace.map(RunTrace::watcher));
        watchers.push(progress);
        events::fan(watchers)
    }

    /// Records the run's end (in the store, the metrics and its trace); a
    /// run the store could not keep says so.
    async fn keep(
        &self,
        client: &str,
        recorder: &mut Recorder,
        (flight, trace): (Flight, Option<RunTrace>),
        outcome: Result<RunRecord, RunError>,
    ) -> Result<Arc<RunRecord>, RunError> {
        let outcome = outcome.map(Arc::new);
        flight.end(&outcome);
        if let Some(trace) = trace {
            trace.end(&outcome);
        }
        audit(client, recorder.run_id(), &outcome);
        let written = recorder
            .finish(outcome.as_ref().map_err(ToString::to_string))
            .await;
        match (outcome, written) {
            (Ok(record), Err(e)) => {
                tracing::warn!(run = %record.run_id, "the run was not saved: {e}");
                let mut record = Arc::unwrap_or_clone(record);
                record.notes.push(format!(
                    "This run may not have been saved to {}: {e}.",
                    self.store.describe()
                ));
                Ok(Arc::new(record))
            }
            (outcome, Err(e)) => {
                tracing::warn!(
                    run = recorder.run_id().unwrap_or_default(),
                    "the run's failure was not saved: {e}"
                );
                outcome
            }
            (outcome, Ok(())) => outcome,
        }
    }

    /// Runs `pipeline`'s plugins without calling any model (placeholder
    /// answers); the record is not kept. See `Runner::dry_run`.
    pub async fn dry_run(
        &self,
        pipeline: &str,
        question: Question,
        options: Map<String, Value>,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        let runner = self.runner();
        let question = runner.fetched(question).await?;
        runner.dry_run(pipeline, question, options, progress).await
    }
}

/// Which provider serves each model of `runner`'s configuration.
fn providers_of(runner: &Runner) -> ProviderOf {
    let llm = runner.llm.clone();
    Arc::new(move |model: &str| llm.model(model).map(|m| m.provider.clone()))
}

/// A run's worst-case cost: its ceiling, `limits.max_cost_usd` lowered by
/// the call's `max_cost_usd` option.
fn worst_case(runner: &Runner, options: Option<&Map<String, Value>>) -> Option<f64> {
    let configured = runner.loaded.config.limits.max_cost_usd;
    let asked = options
        .and_then(|o| o.get(options::MAX_COST_USD))
        .and_then(Value::as_f64)
        .filter(|usd| usd.is_finite() && *usd >= 0.0);
    match (configured, asked) {
        (Some(limit), Some(asked)) => Some(limit.min(asked)),
        (limit, asked) => limit.or(asked),
    }
}
