//! The run store: every run's history — prompt, options, plan, each request
//! sent, each answer or failure with its timing, tokens and cost, the final
//! record. Two backends behind one `Store`: a SQLite file that every chorus
//! process naming it shares (`sqlite/`, the default), or a PostgreSQL
//! database that instances on several machines share (`postgres/`, with
//! `[store] url`). A run is written as it goes, so a crash loses at most
//! the calls in flight. With `[store] enabled = false`, or when the store
//! cannot be opened, the runs of this process are kept in memory only.
//!
//! Runs write through a `Recorder` (one per run, a watcher of its events)
//! into the backend's batched writer; everything else reads: a run by id
//! or unique prefix, a page of runs newest first, retention. Every backend
//! implements the one `Backend` trait (`backend.rs`); `Store` composes its
//! answers (find, the follow-up chain, a cached answer) once for all. Its
//! reads block; async code reads through `Store::off_runtime`.

pub mod attachments;
mod backend;
mod bell;
mod event;
pub mod experiments;
pub mod feedback;
mod lag;
mod memory;
mod owner;
mod postgres;
mod queue;
mod recorder;
pub mod responses;
mod retention;
mod row;
mod spend;
mod sqlite;
mod tasks;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use event::now_ms;
pub use feedback::{Feedback, Given, MAX_COMMENT_BYTES};
pub use lag::WriteLag;
pub use recorder::{Links, Recorder};
pub use retention::{Pruned, Retention};
pub use spend::{Ask, Period, Verdict};
pub use sqlite::location::path as path_for;
/// How chorus's SQLite connections wait for a lock (for the benches).
pub use sqlite::schema::wait_for_locks;
pub use tasks::{LOST as TASK_LOST, StoredTask, TaskRow};

use crate::config::{Limits, Loaded};
use crate::record::{Assignment, RunSummary, StoredCall, StoredRun};
use backend::Backend;
use memory::{InMemory, Memory};
use postgres::Postgres;
pub use postgres::Target;
use sqlite::Sqlite;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the run store at {}: {message}", path.display())]
    Open { path: PathBuf, message: String },
    #[error(
        "the run store at {at} has schema version {found}, newer than this chorus knows ({known}): \
         upgrade chorus, or {elsewhere}"
    )]
    NewerSchema {
        at: String,
        found: i64,
        known: i64,
        elsewhere: &'static str,
    },
    /// A PostgreSQL store (its URL shown without a password).
    #[error("the run store at {at}: {message}")]
    Database { at: String, message: String },
    #[error("the run store at {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "no place for the run store: set [store] path in the config, or $XDG_DATA_HOME or $HOME"
    )]
    NoPath,
    #[error("the run store is disabled ([store] enabled = false): runs are not kept on disk")]
    Disabled,
    #[error("the run store could not be read: {0}")]
    Unavailable(String),
    #[error(
        "there is no run store at {} yet: `chorus serve` and `chorus ask` record their runs there",
        .0.display()
    )]
    NotFound(PathBuf),
}

/// A run looked up by id or prefix.
#[derive(Debug, Clone)]
pub enum Lookup<T> {
    Found(T),
    /// No kept run has this id (or an id starting with it).
    Unknown,
    /// Several runs start with the prefix given; a few of them.
    Ambiguous(Vec<String>),
}

/// One call of a run, looked up by the run's full id and the call's number.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per read, returned and dropped
pub enum CallLookup {
    Found(StoredCall),
    /// The run is kept but has no call with this number; it has `calls`.
    NoSuchCall {
        calls: u32,
    },
    UnknownRun,
}

/// Where a listing continues: runs older than the last one shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor(i64);

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Cursor {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        text.parse()
            .map(Cursor)
            .map_err(|_| format!("`{text}` is not a cursor from an earlier listing"))
    }
}

/// Which runs to list, newest first.
#[derive(Debug, Clone)]
pub struct Query {
    pub before: Option<Cursor>,
    pub pipeline: Option<String>,
    /// Runs whose prompt or answer contains this (case-insensitive for ASCII).
    pub text: Option<String>,
    /// Runs started at or after this unix time in milliseconds.
    pub since: Option<i64>,
    /// Runs made by this client only (`chorus runs --client`, and every
    /// listing for a client that is not an admin).
    pub client: Option<String>,
    pub limit: usize,
}

impl Default for Query {
    fn default() -> Self {
        Self {
            before: None,
            pipeline: None,
            text: None,
            since: None,
            client: None,
            limit: 20,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Page {
    pub runs: Vec<RunSummary>,
    /// Set when there are older runs matching the query.
    pub next: Option<Cursor>,
}

impl Page {
    /// A page from up to `limit + 1` rows (seq, run), newest first: the
    /// extra row, when there is one, says that a next page exists.
    fn of(mut rows: Vec<(i64, RunSummary)>, limit: usize) -> Self {
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(|(seq, _)| Cursor(*seq))
        } else {
            None
        };
        Self {
            runs: rows.into_iter().map(|(_, run)| run).collect(),
            next,
        }
    }
}

/// A run as a follow-up of it needs it: its question and answer, and the
/// run it followed up in turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub prompt: String,
    pub answer: Option<String>,
    pub follow_up_of: Option<String>,
}

/// A handle on the store; clones share it.
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
}

/// Where `[store]` says runs are kept.
pub enum Location {
    File(PathBuf),
    Database(Box<Target>),
}

impl Location {
    /// `[store] url` (or `$CHORUS_STORE_URL`, applied when the config is
    /// read) when set, else the SQLite file.
    pub fn of(loaded: &Loaded) -> Result<Self, StoreError> {
        let config = &loaded.config.store;
        match &config.url {
            Some(url) => Ok(Self::Database(Box::new(Target::new(
                url,
                config.password_env.as_deref(),
            )?))),
            None => Ok(Self::File(sqlite::location::path(loaded)?)),
        }
    }
}

/// What `chorus check` says of the configured store: the file, or the
/// database and whether it can be reached now. Never a password.
pub fn probe(loaded: &Loaded) -> String {
    if !loaded.config.store.enabled {
        return "off ([store] enabled = false): runs are kept in memory only".into();
    }
    match Location::of(loaded) {
        Ok(Location::File(path)) => path.display().to_string(),
        Ok(Location::Database(target)) => postgres::probe(*target),
        Err(e) => e.to_string(),
    }
}

impl Store {
    /// The store `loaded` describes: its file or database, or memory when
    /// disabled.
    pub fn open(loaded: &Loaded) -> Result<Self, StoreError> {
        let config = &loaded.config.store;
        if !config.enabled {
            return Ok(Self::in_memory(
                &loaded.config.limits,
                "[store] enabled = false",
            ));
        }
        let retention = Retention::of(config);
        match Location::of(loaded)? {
            Location::File(path) => Self::open_at(&path, retention),
            Location::Database(target) => Self::open_database(*target, retention),
        }
    }

    /// As `open`, but a store that cannot be opened is reported and runs
    /// are kept in memory instead: serving goes on without history.
    pub fn open_or_memory(loaded: &Loaded) -> Self {
        Self::open(loaded).unwrap_or_else(|e| {
            tracing::warn!(
                "{e}; runs are kept in memory only (limits.max_runs_kept, limits.run_ttl)"
            );
            Self::in_memory(&loaded.config.limits, "the run store could not be opened")
        })
    }

    /// The store `loaded` describes, to read and prune only: no writer,
    /// no retention pass, nothing created if it is missing.
    pub fn open_for_reading(loaded: &Loaded) -> Result<Self, StoreError> {
        if !loaded.config.store.enabled {
            return Err(StoreError::Disabled);
        }
        Ok(match Location::of(loaded)? {
            Location::File(path) => Self::on(Sqlite::open_reading(path)?),
            Location::Database(target) => Self::on(Postgres::open_reading(*target)?),
        })
    }

    /// The SQLite store at `path`, created if missing.
    pub fn open_at(path: &Path, retention: Retention) -> Result<Self, StoreError> {
        Self::open_with_queue(path, retention, event::CAPACITY)
    }

    fn open_with_queue(
        path: &Path,
        retention: Retention,
        capacity: usize,
    ) -> Result<Self, StoreError> {
        Ok(Self::on(Sqlite::open(path, retention, capacity)?))
    }

    /// The PostgreSQL store `target` names; its tables are made if missing.
    /// A database that cannot be reached yet is no error (runs are kept in
    /// memory until it is back); a newer schema is.
    pub fn open_database(target: Target, retention: Retention) -> Result<Self, StoreError> {
        Ok(Self::on(Postgres::open(
            target,
            retention,
            event::CAPACITY,
        )?))
    }

    /// Runs of this process only, bounded as `limits` says.
    pub fn in_memory(limits: &Limits, why: &'static str) -> Self {
        Self::on(InMemory {
            runs: Arc::new(Memory::new(limits.max_runs_kept, limits.run_ttl)),
            why,
        })
    }

    fn on(backend: impl Backend) -> Self {
        Self {
            backend: Arc::new(backend),
        }
    }

    /// The file, when runs are kept in a SQLite file.
    pub fn path(&self) -> Option<&Path> {
        self.backend.path()
    }

    /// How far the store's writes trail the runs; `None` when runs are
    /// kept in memory (nothing is written).
    pub fn write_lag(&self) -> Option<WriteLag> {
        self.backend.write_lag()
    }

    /// Limits (providers', clients') counted across every instance on
    /// this store: PostgreSQL's; `None` for SQLite or memory (one process
    /// counts its own).
    pub fn shared_limits(&self) -> Option<Arc<dyn crate::llm::limits::Shared>> {
        self.backend.shared_limits()
    }

    /// Where runs are kept, for messages.
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// The store as a remote client may see it named: what kind of store,
    /// never where it lies (a file path, a database host).
    pub fn describe_for_clients(&self) -> String {
        self.backend.describe_for_clients()
    }

    /// A recorder for one run; `time_limit` is the longest the run can take.
    pub fn recorder(&self, links: Links, time_limit: Duration) -> Recorder {
        Recorder::new(self.backend.sink(), links, time_limit)
    }

    /// Runs `read` (any of the blocking methods below) off the async
    /// runtime's threads: the one way async code reads the store.
    pub async fn off_runtime<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || read(&store))
            .await
            .unwrap_or_else(|e| Err(StoreError::Unavailable(format!("the read stopped: {e}"))))
    }

    /// The run with this id, this unique prefix of an id, or `last`.
    /// Blocking: call it off the async runtime's threads.
    pub fn find(&self, id: &str, with_requests: bool) -> Result<Lookup<StoredRun>, StoreError> {
        Ok(match self.backend.resolve(id)? {
            Lookup::Found(id) => match self.backend.run(&id, with_requests)? {
                Some(mut run) => {
                    // The run may be read from a writer's memory while its
                    // database is away (PostgreSQL's backlog carries the
                    // assignment itself): the run is found all the same.
                    if run.experiment.is_none() {
                        run.experiment = self.backend.assignment_of(&id).ok().flatten();
                    }
                    Lookup::Found(run)
                }
                None => Lookup::Unknown,
            },
            Lookup::Unknown => Lookup::Unknown,
            Lookup::Ambiguous(ids) => Lookup::Ambiguous(ids),
        })
    }

    /// Call `call_id` of the run `run_id` (in full), its request too if
    /// asked, without reading the run's other calls. Blocking.
    pub fn call(
        &self,
        run_id: &str,
        call_id: u32,
        with_request: bool,
    ) -> Result<CallLookup, StoreError> {
        self.backend.call(run_id, call_id, with_request)
    }

    /// The run `id` (in full) and the runs it followed up, newest first, at
    /// most `most`, stopping at a run not kept: the prompt and answer of
    /// each, nothing more. Blocking.
    pub fn exchanges(&self, id: &str, most: usize) -> Result<Vec<Exchange>, StoreError> {
        let mut chain: Vec<Exchange> = Vec::new();
        let mut next = Some(id.to_owned());
        while let Some(id) = next.take().filter(|_| chain.len() < most) {
            let Some(exchange) = self.backend.exchange(&id)? else {
                break;
            };
            next.clone_from(&exchange.follow_up_of);
            chain.push(exchange);
        }
        Ok(chain)
    }

    /// When each call of run `id` (in full) was sent, unix ms, by call id;
    /// empty for runs kept in memory, which do not keep it. Blocking.
    pub fn call_starts(&self, id: &str) -> Result<Vec<(u32, i64)>, StoreError> {
        self.backend.call_starts(id)
    }

    /// A page of runs, newest first. Blocking.
    pub fn list(&self, query: &Query) -> Result<Page, StoreError> {
        self.backend.list(query)
    }

    /// Admits a run against its client's budgets (see [`spend`]), or says
    /// which budget it does not fit. Blocking.
    pub fn reserve(&self, ask: &Ask) -> Result<Verdict, StoreError> {
        self.backend.reserve(ask)
    }

    /// The run admitted as `id` ended having cost `cost_usd`. Blocking.
    pub fn settle(&self, id: &str, cost_usd: f64) -> Result<(), StoreError> {
        self.backend.settle(id, cost_usd)
    }

    /// Keeps `feedback` on its run (see [`feedback`]). Blocking.
    pub fn give_feedback(&self, feedback: &Feedback) -> Result<Given, StoreError> {
        self.backend.give(feedback)
    }

    /// The feedback on the run `run_id` (a full id), oldest first. Blocking.
    pub fn feedback_of(&self, run_id: &str) -> Result<Vec<Feedback>, StoreError> {
        self.backend.feedback_of(run_id)
    }

    /// The experiment and variant the run `run_id` (a full id) served.
    /// Blocking.
    pub fn assignment_of(&self, run_id: &str) -> Result<Option<Assignment>, StoreError> {
        self.backend.assignment_of(run_id)
    }

    /// The variant that served the conversation `key` of `experiment`
    /// last. Blocking.
    pub fn variant_of_conversation(
        &self,
        experiment: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        self.backend.variant_of_conversation(experiment, key)
    }

    /// Each variant's numbers in `experiment` (see [`experiments`]),
    /// with its ratings on `metric`. Blocking.
    pub fn experiment_tallies(
        &self,
        experiment: &str,
        metric: Option<&str>,
    ) -> Result<Vec<experiments::Tally>, StoreError> {
        self.backend.tallies(experiment, metric)
    }

    /// The latest `most` runs of `experiment`, oldest first. Blocking.
    pub fn experiment_timeline(
        &self,
        experiment: &str,
        metric: Option<&str>,
        most: usize,
    ) -> Result<Vec<experiments::Point>, StoreError> {
        self.backend.timeline(experiment, metric, most)
    }

    /// What was decided in `experiment`. Blocking.
    pub fn experiment_decisions(
        &self,
        experiment: &str,
    ) -> Result<Option<experiments::Decisions>, StoreError> {
        self.backend.decisions(experiment)
    }

    /// Records `decisions` on those kept; answers what is kept now.
    /// Blocking.
    pub fn decide_experiment(
        &self,
        experiment: &str,
        decisions: &experiments::Decisions,
    ) -> Result<experiments::Decisions, StoreError> {
        self.backend.decide(experiment, decisions)
    }

    /// Keeps a shadow judgement with its run (`false`: the run is gone).
    /// Blocking.
    pub fn keep_judgement(&self, judgement: &experiments::Judgement) -> Result<bool, StoreError> {
        self.backend.judged(judgement)
    }

    /// A shadow experiment's judgements, and what it spent since `since`.
    /// Blocking.
    pub fn shadow_tally(
        &self,
        experiment: &str,
        since: i64,
    ) -> Result<experiments::ShadowTally, StoreError> {
        self.backend.shadow_tally(experiment, since)
    }

    /// The latest `most` runs since `since` rated on `metric`, newest
    /// first. Blocking.
    pub fn rated_runs(
        &self,
        metric: &str,
        since: i64,
        most: usize,
    ) -> Result<Vec<feedback::Rated>, StoreError> {
        self.backend.rated(metric, since, most)
    }

    /// The latest `most` shadow judgements since `since` that were not a
    /// tie, newest first. Blocking.
    pub fn decisive_judgements(
        &self,
        since: i64,
        most: usize,
    ) -> Result<Vec<experiments::Judged>, StoreError> {
        self.backend.decisive_judgements(since, most)
    }

    /// Applies `retention` (default: the configured one) now. Blocking.
    pub fn prune(&self, retention: &Retention) -> Result<Pruned, StoreError> {
        self.backend.prune_at(retention, now_ms())
    }

    /// At a graceful shutdown, once its runs are written: gives back this
    /// instance's lease (PostgreSQL), or closes every connection so no
    /// write-ahead log is left (SQLite). Blocking.
    pub fn release(&self) {
        self.backend.release();
    }

    /// Waits until everything recorded so far is written.
    pub async fn flush(&self) -> Result<(), String> {
        self.backend.flush().await
    }

    /// A server's last word to its store: writes what was recorded, then
    /// `release`s it. A failure is logged; stopping goes on.
    pub async fn close(&self) {
        if let Err(e) = self.flush().await {
            tracing::warn!("the last runs may not be in the store: {e}");
        }
        let released = self.off_runtime(|store| {
            store.release();
            Ok(())
        });
        let _ = released.await;
    }

    /// `prune` as if it were `now`.
    #[cfg(test)]
    fn prune_at(&self, retention: &Retention, now: i64) -> Result<Pruned, StoreError> {
        self.backend.prune_at(retention, now)
    }
}

impl CallLookup {
    /// Call `call_id` among `run`'s calls.
    fn in_run(run: &StoredRun, call_id: u32) -> Self {
        run.calls.iter().find(|c| c.call.id == call_id).map_or(
            Self::NoSuchCall {
                calls: u32::try_from(run.calls.len()).unwrap_or(u32::MAX),
            },
            |call| Self::Found(call.clone()),
        )
    }
}

#[cfg(test)]
#[path = "../../../tests/support/postgres.rs"]
mod pg_cluster;
#[cfg(test)]
mod tests;
