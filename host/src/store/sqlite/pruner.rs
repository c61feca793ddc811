//! Retention off the writer's thread and off the start: a thread of its
//! own, on a connection of its own, applies `[store]`'s retention a first
//! time a few seconds after the store opens (after the server has
//! answered `initialize`), then whenever the writer rings (every so many
//! runs ended) or every `EVERY`. A pass decides in a read transaction and
//! removes in slices (`retention::prune_until`), so writers wait at most
//! one slice; dropping the pruner stops a pass between slices.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use super::retention;
use crate::store::event::now_ms;
use crate::store::retention::Retention;

/// The first pass, this long after the store opens.
const FIRST: Duration = Duration::from_secs(5);
/// A pass at least this often while the process runs.
const EVERY: Duration = Duration::from_secs(600);

/// The pruning thread's doorbell; dropping it stops the thread between
/// slices and waits for it (its connection closes with it).
pub struct Pruner {
    bell: Option<SyncSender<()>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Pruner {
    /// Starts the thread for the store at `path`.
    pub fn spawn(path: &Path, retention: Retention) -> std::io::Result<Self> {
        Self::spawn_after(path, retention, FIRST)
    }

    /// `spawn`, with the first pass `first` after the start.
    pub fn spawn_after(
        path: &Path,
        retention: Retention,
        first: Duration,
    ) -> std::io::Result<Self> {
        let (bell, rung) = sync_channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let path = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("chorus-retention".into())
            .spawn(move || run(&path, &retention, &rung, &stopped, first))?;
        Ok(Self {
            bell: Some(bell),
            stop,
            thread: Some(thread),
        })
    }

    /// A pass is due (runs ended since the last).
    pub fn ring(&self) {
        if let Some(bell) = &self.bell {
            let _ = bell.try_send(());
        }
    }
}

impl Drop for Pruner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        drop(self.bell.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(
    path: &Path,
    retention: &Retention,
    rung: &Receiver<()>,
    stop: &AtomicBool,
    first: Duration,
) {
    let mut wait = first;
    loop {
        match rung.recv_timeout(wait) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        pass(path, retention, stop);
        wait = EVERY;
    }
}

fn pass(path: &Path, retention: &Retention, stop: &AtomicBool) {
    let mut conn = match super::schema::open_writer(path) {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(store = %path.display(), "retention could not connect: {e}");
            return;
        }
    };
    let stopped = || stop.load(Ordering::Relaxed);
    match retention::prune_until(&mut conn, retention, now_ms(), &stopped) {
        Ok(p) if p.removed > 0 => tracing::info!(
            store = %path.display(),
            "retention removed {} runs ({} bytes); {} kept",
            p.removed, p.removed_bytes, p.kept
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(store = %path.display(), "retention failed: {e}"),
    }
}
