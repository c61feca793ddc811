//! Checkpoints of the store's write-ahead log, off the writer's path.
//! SQLite's own (every 1000 WAL pages, run by whichever connection commits
//! across the mark) would make the run whose end crossed it wait for the
//! checkpoint's fsync of the database file — tens of milliseconds on a
//! slow disk, a whole run's p99. The writer turns them off and nudges this
//! thread after each commit; it checkpoints at most once per `EVERY` while
//! writes come, on a connection of its own, `PASSIVE`ly: it never waits on
//! a reader or the writer, which goes on appending meanwhile.

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use rusqlite::Connection;

/// The least time between two checkpoints.
const EVERY: Duration = Duration::from_secs(1);

/// The checkpointing thread's doorbell; dropping it ends the thread.
pub struct Checkpointer(SyncSender<()>);

impl Checkpointer {
    /// Starts the thread for the store at `path`. A store it cannot
    /// connect to is checkpointed by SQLite when its last connection
    /// closes, as before (said in the log).
    pub fn spawn(path: &Path) -> std::io::Result<Self> {
        let (bell, rung) = sync_channel(1);
        let path = path.to_owned();
        std::thread::Builder::new()
            .name("chorus-checkpoint".into())
            .spawn(move || match super::schema::open_writer(&path) {
                Ok(conn) => run(&conn, &rung, &path),
                Err(e) => tracing::warn!(store = %path.display(), "the write-ahead log will not be checkpointed while chorus runs: {e}"),
            })?;
        Ok(Self(bell))
    }

    /// Something was committed: a checkpoint is due within `EVERY`.
    pub fn nudge(&self) {
        // Full: one is due already. Disconnected: the thread could not
        // connect, and said so.
        let _ = self.0.try_send(());
    }
}

fn run(conn: &Connection, rung: &Receiver<()>, path: &Path) {
    let mut failed = false;
    while rung.recv().is_ok() {
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            Ok(()) => failed = false,
            Err(e) if !failed => {
                failed = true;
                tracing::warn!(store = %path.display(), "checkpointing the write-ahead log failed: {e}");
            }
            Err(_) => {}
        }
        std::thread::sleep(EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_reach_the_database_file_without_the_writer_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.db");
        let writer = Connection::open(&path).unwrap();
        writer
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let checkpointer = Checkpointer::spawn(&path).unwrap();
        for _ in 0..50 {
            writer
                .execute("INSERT INTO t VALUES (zeroblob(8192))", [])
                .unwrap();
        }
        let size = || std::fs::metadata(&path).unwrap().len();
        assert!(size() < 100 * 1024, "nothing checkpointed yet: {}", size());
        checkpointer.nudge();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while size() < 400 * 1024 {
            assert!(
                std::time::Instant::now() < deadline,
                "not checkpointed: {} bytes",
                size()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
