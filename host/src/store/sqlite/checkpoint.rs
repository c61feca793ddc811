//! Checkpoints of the store's write-ahead log, off the writer's path.
//! SQLite's own (every 1000 WAL pages, run by whichever connection commits
//! across the mark) would make the run whose end crossed it wait for the
//! checkpoint's fsync of the database file — tens of milliseconds on a
//! slow disk, a whole run's p99. The writer turns them off and nudges this
//! thread after each commit; it checkpoints at most once per `EVERY` while
//! writes come, on a connection of its own, `PASSIVE`ly: it never waits on
//! a reader or the writer, which goes on appending meanwhile. Between two
//! checkpoints it rests deaf to nudges (see `store::bell`): woken by each,
//! it cost a run ten thread switches.
//!
//! A passive checkpoint copies the log into the database but cannot
//! rewind it while a reader still reads from it; under steady reads (the
//! viewer, budgets, follow-ups) the log would then only grow (549 MB after
//! 10,000 runs). So once the `-wal` file passes `TRUNCATE_AT`, the next
//! checkpoint is a `TRUNCATE` one: it waits for the readers of the log to
//! finish — at most `TRUNCATE_WAIT`, holding the writer that long at most —
//! and empties the file. One that cannot get through in time is tried
//! again at the next turn.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::store::bell::{Bell, Heard};

/// The least time between two checkpoints.
const EVERY: Duration = Duration::from_secs(1);
/// The `-wal` size past which a checkpoint empties the file.
pub const TRUNCATE_AT: u64 = 16 << 20;
/// The longest a truncating checkpoint waits for readers (and holds the
/// writer meanwhile).
const TRUNCATE_WAIT: Duration = Duration::from_millis(100);
/// What SQLite keeps of the `-wal` file after it rewinds it.
pub const JOURNAL_SIZE_LIMIT: i64 = 64 << 20;

/// The checkpointing thread's doorbell; dropping it ends the thread, and
/// waits for it: its connection is closed when this is gone.
pub struct Checkpointer {
    bell: Arc<Bell>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread for the store at `path`. A store it cannot
    /// connect to is checkpointed by SQLite when its last connection
    /// closes, as before (said in the log).
    pub fn spawn(path: &Path) -> std::io::Result<Self> {
        Self::spawn_with(path, TRUNCATE_AT)
    }

    /// `spawn`, emptying the log past `truncate_at` bytes.
    pub fn spawn_with(path: &Path, truncate_at: u64) -> std::io::Result<Self> {
        let bell = Arc::new(Bell::default());
        let rung = bell.clone();
        let path = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("chorus-checkpoint".into())
            .spawn(move || match super::schema::open_writer(&path) {
                Ok(conn) => {
                    let _ = conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT);
                    let _ = conn.busy_timeout(TRUNCATE_WAIT);
                    run(&conn, &rung, &path, truncate_at);
                }
                Err(e) => tracing::warn!(store = %path.display(), "the write-ahead log will not be checkpointed while chorus runs: {e}"),
            })?;
        Ok(Self {
            bell,
            thread: Some(thread),
        })
    }

    /// Something was committed: a checkpoint is due within `EVERY`.
    pub fn nudge(&self) {
        // Unheard if the thread could not connect (and said so).
        self.bell.ring();
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closed, the bell ends the thread's wait at once.
        self.bell.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The store's `-wal` file.
pub fn wal_of(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

fn run(conn: &Connection, bell: &Bell, path: &Path, truncate_at: u64) {
    let wal = wal_of(path);
    let mut failed = false;
    while bell.listen(None) == Heard::Rung {
        let big = std::fs::metadata(&wal).is_ok_and(|m| m.len() > truncate_at);
        let mode = if big { "TRUNCATE" } else { "PASSIVE" };
        match conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(())) {
            Ok(()) => failed = false,
            // Readers held the log past the wait: again next turn.
            Err(e) if big && e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {}
            Err(e) if !failed => {
                failed = true;
                tracing::warn!(store = %path.display(), "checkpointing the write-ahead log failed: {e}");
            }
            Err(_) => {}
        }
        // At most one a turn: a nudge meanwhile is heard when the rest is
        // over; closing the bell ends the thread at once.
        if !bell.rest(Instant::now() + EVERY) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store's writer as chorus sets it up: WAL, no checkpoints of its
    /// own, one table.
    fn writer(path: &Path) -> Connection {
        let writer = Connection::open(path).unwrap();
        writer
            .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        writer
    }

    #[test]
    fn writes_reach_the_database_file_without_the_writer_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.db");
        let writer = writer(&path);
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

    #[test]
    fn the_log_is_emptied_past_its_bound_while_readers_keep_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.db");
        let writer = writer(&path);
        let checkpointer = Checkpointer::spawn_with(&path, 1 << 20).unwrap();
        // A reader that always has a read transaction open on the log, as a
        // busy server's viewer and budgets do: a passive checkpoint can then
        // never rewind it.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reading = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let reader = Connection::open(&path).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    reader
                        .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
                        .unwrap();
                }
            })
        };
        let wal = wal_of(&path);
        let size = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        let mut most = 0;
        for _ in 0..40 {
            for _ in 0..32 {
                writer
                    .execute("INSERT INTO t VALUES (zeroblob(16384))", [])
                    .unwrap();
            }
            checkpointer.nudge();
            most = most.max(size());
            std::thread::sleep(Duration::from_millis(50));
        }
        // 20 MB written; let the last turn come round.
        let deadline = Instant::now() + Duration::from_secs(10);
        while size() > 1 << 20 && Instant::now() < deadline {
            checkpointer.nudge();
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reading.join().unwrap();
        assert!(size() <= 1 << 20, "the log stayed at {} bytes", size());
        assert!(
            most < 16 << 20,
            "the log reached {most} bytes of 20 MB written"
        );
        drop(checkpointer);
    }
}
