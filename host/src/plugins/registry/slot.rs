//! How the registry holds a plugin: loaded, or not yet — compiling in the
//! background after a first start of `serve`, or a shipped built-in left
//! to load when a run first needs it — and the one load that settles it.

use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;

use super::loader::{Job, Loader, load_and_settle};
use crate::config::ConfigError;
use crate::plugins::{Kind, Plugin};

/// A plugin as the registry holds it.
#[derive(Clone)]
pub(super) enum Slot {
    Ready(Arc<Plugin>),
    /// Not loaded yet (see [`Pending`]); settles once, loaded or failed.
    Deferred(Arc<Deferred>),
}

impl Slot {
    /// The plugin, once it has loaded.
    pub(super) fn loaded(&self) -> Option<&Arc<Plugin>> {
        match self {
            Slot::Ready(plugin) => Some(plugin),
            Slot::Deferred(deferred) => deferred.outcome()?.as_ref().ok(),
        }
    }

    /// Whether both hold one plugin, loaded or not: what a reload kept.
    pub(super) fn same(&self, other: &Slot) -> bool {
        if let (Slot::Deferred(a), Slot::Deferred(b)) = (self, other)
            && Arc::ptr_eq(a, b)
        {
            return true;
        }
        matches!((self.loaded(), other.loaded()), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
    }
}

/// Why a plugin is not loaded yet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Pending {
    /// Compiling in the background, at a first start of `serve`.
    Compiling,
    /// A built-in with its shipped settings, its code ready (cached or
    /// precompiled): loaded when a run first needs it, in milliseconds.
    /// Its settings are known to be accepted, so nothing a start would
    /// have refused waits for a run to say it.
    FirstUse,
}

/// A plugin not loaded yet.
pub(super) struct Deferred {
    /// What its exports declare, known before it loads (or fails to): so
    /// what chorus offers (say, `resynthesize`'s synthesizers) and the
    /// roles its pipelines give it are checked without loading it.
    pub(super) kind: Option<Kind>,
    pub(super) pending: Pending,
    outcome: OnceLock<Result<Arc<Plugin>, ConfigError>>,
    settled: watch::Sender<bool>,
    /// A first-use load not started yet: what it needs.
    on_demand: Mutex<Option<(Arc<Loader>, Box<Job>)>>,
}

impl Deferred {
    fn new(
        kind: Option<Kind>,
        pending: Pending,
        on_demand: Option<(Arc<Loader>, Box<Job>)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            kind,
            pending,
            outcome: OnceLock::new(),
            settled: watch::Sender::new(false),
            on_demand: Mutex::new(on_demand),
        })
    }

    /// A plugin compiling in the background (the caller settles it).
    pub(super) fn compiling(kind: Option<Kind>) -> Arc<Self> {
        Self::new(kind, Pending::Compiling, None)
    }

    /// A plugin that could not be had at all.
    pub(super) fn failed(error: ConfigError) -> Arc<Self> {
        let failed = Self::compiling(None);
        failed.settle(Err(error));
        failed
    }

    /// `job`, loaded by `loader` when [`Deferred::start`] is first called.
    pub(super) fn on_first_use(kind: Option<Kind>, loader: Arc<Loader>, job: Job) -> Arc<Self> {
        Self::new(kind, Pending::FirstUse, Some((loader, Box::new(job))))
    }

    pub(super) fn outcome(&self) -> Option<&Result<Arc<Plugin>, ConfigError>> {
        self.outcome.get()
    }

    pub(super) fn settle(&self, outcome: Result<Arc<Plugin>, ConfigError>) {
        let _ = self.outcome.set(outcome);
        self.settled.send_replace(true);
    }

    /// Starts a first-use load that has not started (once; a no-op for
    /// the rest). It runs on a blocking thread of its own, so a run that
    /// stops waiting for it never leaves it half done for the next.
    pub(super) fn start(self: &Arc<Self>) {
        let taken = self
            .on_demand
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some((loader, job)) = taken else { return };
        let deferred = self.clone();
        tokio::task::spawn_blocking(move || load_and_settle(&loader, &job, &deferred));
    }

    pub(super) async fn wait(&self) {
        // Set before `settled` moves: nothing is missed between the two.
        let mut settled = self.settled.subscribe();
        let _ = settled.wait_for(|done| *done).await;
    }

    /// Blocks until it settles (off the runtime: a reload).
    pub(super) fn wait_blocking(&self) -> &Result<Arc<Plugin>, ConfigError> {
        self.outcome.wait()
    }
}
