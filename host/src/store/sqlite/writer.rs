//! The SQLite store's writer: one thread per process that owns the write
//! connection. Runs hand it their events through a bounded queue and
//! never wait on it; it writes them in batches, one transaction per batch
//! (see `store::queue`: after a batch it takes the events that come
//! within `LINGER` with the next, so a run of zero-latency calls costs
//! one commit). A run's end is the one message a run waits for (with a
//! bound): when its result is returned, the run is on disk for any other
//! process to read.

use std::path::PathBuf;
use std::time::Duration;

use rusqlite::Connection;

use super::apply;
use super::checkpoint::Checkpointer;
use super::pruner::Pruner;
use crate::store::WriteLag;
use crate::store::event::Msg;
use crate::store::queue::{self, Inbox, Queue};
use crate::store::retention::Retention;

/// Most messages in one transaction.
const BATCH: usize = 512;
/// The writer connection's page cache, in KiB (SQLite's default: 2,000).
const WRITER_CACHE_KIB: i64 = 512;
/// Retention (on its own thread: `pruner`) is rung after this many runs
/// ended.
const PRUNE_AFTER_RUNS: u32 = 200;

/// Starts the writer thread on `conn`. It ends when every sender is gone,
/// after writing what was sent; `done` is signalled then.
pub fn spawn(
    conn: Connection,
    path: PathBuf,
    retention: Retention,
    capacity: usize,
    lag: WriteLag,
) -> std::io::Result<(Queue, std::sync::mpsc::Receiver<()>)> {
    // Checkpoints are the checkpointer's, so no commit waits on one.
    let _ = conn.pragma_update(None, "wal_autocheckpoint", 0);
    // The writer appends: what it reads again is the right edge of each
    // table and index, a few dozen pages. SQLite's default cache (2 MB)
    // fills with pages written once and never read back, which a server
    // then holds for its whole life; a page it drops is in the OS's cache.
    let _ = conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB);
    let checkpointer = Checkpointer::spawn(&path)?;
    let pruner = Pruner::spawn(&path, retention.clone())?;
    let (sender, inbox) = queue::channel(capacity);
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("chorus-store".into())
        .spawn(move || {
            Writer {
                conn,
                path,
                retention,
                ended_since_prune: 0,
                lag,
                checkpointer,
                pruner: Some(pruner),
            }
            .run(inbox);
            let _ = done_tx.send(());
        })?;
    Ok((sender, done))
}

struct Writer {
    conn: Connection,
    path: PathBuf,
    retention: Retention,
    ended_since_prune: u32,
    lag: WriteLag,
    checkpointer: Checkpointer,
    /// Gone at shutdown, so its connection is closed before the last
    /// checkpoint.
    pruner: Option<Pruner>,
}

impl Writer {
    fn run(mut self, mut inbox: Inbox) {
        while let Some(batch) = inbox.next_batch(BATCH) {
            let shutdown = batch.iter().any(|m| matches!(m, Msg::Shutdown));
            self.write(batch);
            if shutdown {
                drop(self.pruner.take());
                // Everything in the database file, the log emptied: a clean
                // exit leaves no write-ahead log to read at the next start
                // (SQLite removes the file when the last connection closes).
                let _ = self
                    .conn
                    .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                return;
            }
            if self.ended_since_prune >= PRUNE_AFTER_RUNS
                && let Some(pruner) = &self.pruner
            {
                self.ended_since_prune = 0;
                pruner.ring();
            }
        }
    }

    /// Writes a batch in one transaction (tried twice if the store stays
    /// busy), then answers whoever waits on it.
    fn write(&mut self, mut batch: Vec<Msg>) {
        let mut outcome = self.transaction(&batch);
        if let Err(e) = &outcome {
            tracing::warn!(store = %self.path.display(), "writing to the run store failed ({e}); trying once more");
            std::thread::sleep(Duration::from_millis(100));
            outcome = self.transaction(&batch);
        }
        let failed = |i: usize| -> Option<String> {
            match &outcome {
                Err(e) => Some(e.clone()),
                Ok(errors) => errors
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map(|(_, e)| e.clone()),
            }
        };
        match &outcome {
            Err(e) => {
                tracing::warn!(store = %self.path.display(), "{} run events were not recorded: {e}", batch.len());
            }
            Ok(_) => {
                self.lag.written(&batch);
                self.checkpointer.nudge();
            }
        }
        for (i, msg) in batch.drain(..).enumerate() {
            let result = failed(i).map_or(Ok(()), Err);
            match msg {
                Msg::End { ack, .. } => {
                    self.ended_since_prune += 1;
                    if let Some(ack) = ack {
                        let _ = ack.send(result);
                    }
                }
                Msg::Flush(ack) => {
                    let _ = ack.send(result);
                }
                _ => {}
            }
        }
    }

    /// One transaction for the batch. A message that fails is logged and
    /// skipped (its index and error returned); the rest are still written.
    fn transaction(&mut self, batch: &[Msg]) -> Result<Vec<(usize, String)>, String> {
        apply::transaction(&mut self.conn, &self.path, batch, self.retention.max_bytes)
    }
}
