//! The SQLite backend: one file that every chorus process naming it shares
//! (WAL, busy timeouts). One writer thread per process owns the write
//! connection; reads take a connection from a small pool, so concurrent
//! readers (`resources/read`, `chorus runs`) do not queue behind each other.

mod apply;
mod attachments;
mod backend;
mod checkpoint;
mod experiments;
mod feedback;
pub(super) mod location;
mod pruner;
mod read;
mod responses;
pub(super) mod retention;
pub(super) mod schema;
mod spend;
mod tasks;
pub(super) mod texts;
pub(super) mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use rusqlite::Connection;

use super::StoreError;
use super::event::Msg;
use super::queue::Queue;
use super::retention::Retention;

/// Most read connections open at once; a read past them waits for one.
pub const READERS: usize = 4;

pub struct Sqlite {
    pub path: PathBuf,
    pub sender: Option<Queue>,
    readers: Readers,
    done: Mutex<std::sync::mpsc::Receiver<()>>,
    /// The budgets' connection (see `store::spend`), opened when first
    /// needed; one admission of this process at a time.
    spend: Mutex<Option<Connection>>,
    /// How far its writes trail the runs (see `store::lag`).
    pub lag: super::WriteLag,
}

/// Dropping the last handle lets the writer finish what it was sent; the
/// process waits for it a bounded time so the last runs reach the disk.
impl Drop for Sqlite {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            sender.deliver_blocking(Msg::Shutdown, false);
        }
        self.writer_done();
    }
}

impl Sqlite {
    /// Waits (5 s at most) for the writer thread to end, once told to.
    fn writer_done(&self) {
        let done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        // Disconnected: it ended already (and said so once).
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            done.recv_timeout(Duration::from_secs(5))
        {
            tracing::warn!(store = %self.path.display(), "the run store's writer did not finish in 5 s; the last events may be lost");
        }
    }

    /// The server is stopping: the writer writes what it was sent and
    /// ends, and every connection of this process closes, the last one
    /// removing the write-ahead log. Blocking. Reads after this open new
    /// connections; writes are not taken any more.
    pub fn release(&self) {
        if let Some(sender) = &self.sender {
            sender.deliver_blocking(Msg::Shutdown, true);
        }
        self.writer_done();
        self.readers.close_idle();
        self.spend.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl Sqlite {
    /// The store at `path`, created if missing, with its writer thread.
    pub fn open(path: &Path, retention: Retention, capacity: usize) -> Result<Self, StoreError> {
        let conn = schema::open(path)?;
        let first = schema::open_reader(path)?;
        let lag = super::WriteLag::default();
        let (sender, done) = writer::spawn(conn, path.to_owned(), retention, capacity, lag.clone())
            .map_err(|e| StoreError::Open {
                path: path.to_owned(),
                message: format!("cannot start its writer thread: {e}"),
            })?;
        Ok(Self {
            path: path.to_owned(),
            sender: Some(sender),
            readers: Readers::new(path, false, first),
            done: Mutex::new(done),
            spend: Mutex::new(None),
            lag,
        })
    }

    /// The existing store at `path`, to read and prune only: no writer
    /// thread, no retention pass, nothing created if it is missing.
    pub fn open_reading(path: PathBuf) -> Result<Self, StoreError> {
        if let Some(message) = location::blocked(&path) {
            return Err(StoreError::Open { path, message });
        }
        if !path.exists() {
            return Err(StoreError::NotFound(path));
        }
        let first = schema::open_read_only(&path)?;
        let (finished, done) = std::sync::mpsc::channel();
        let _ = finished.send(());
        Ok(Self {
            readers: Readers::new(&path, true, first),
            path,
            sender: None,
            done: Mutex::new(done),
            spend: Mutex::new(None),
            lag: super::WriteLag::default(),
        })
    }

    fn spending<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        if self.sender.is_none() {
            return Err(StoreError::Unavailable(
                "the store is open for reading only".into(),
            ));
        }
        let mut slot = self.spend.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(schema::open_writer(&self.path)?);
        }
        let conn = slot.as_mut().expect("opened above");
        work(conn).map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    fn read<T>(
        &self,
        query: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let conn = self.readers.take()?;
        let outcome = query(&conn).map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        });
        self.readers.give_back(conn);
        outcome
    }

    #[cfg(test)]
    pub fn readers_open(&self) -> usize {
        self.readers.lock().open
    }
}

/// A bounded pool of read connections, opened as reads need them.
struct Readers {
    path: PathBuf,
    read_only: bool,
    state: Mutex<Pool>,
    returned: Condvar,
}

struct Pool {
    idle: Vec<Connection>,
    open: usize,
}

impl Readers {
    /// Closes the connections not in use.
    fn close_idle(&self) {
        let mut pool = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let closed = pool.idle.len();
        pool.idle.clear();
        pool.open -= closed;
    }

    fn new(path: &Path, read_only: bool, first: Connection) -> Self {
        Self {
            path: path.to_owned(),
            read_only,
            state: Mutex::new(Pool {
                idle: vec![first],
                open: 1,
            }),
            returned: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An idle connection, a new one while fewer than `READERS` are open,
    /// or the next one given back.
    fn take(&self) -> Result<Connection, StoreError> {
        let mut pool = self.lock();
        loop {
            if let Some(conn) = pool.idle.pop() {
                return Ok(conn);
            }
            if pool.open < READERS {
                pool.open += 1;
                drop(pool);
                let opened = if self.read_only {
                    schema::connect_read_only(&self.path)
                } else {
                    schema::open_reader(&self.path)
                };
                if opened.is_err() {
                    self.lock().open -= 1;
                    self.returned.notify_one();
                }
                return opened;
            }
            pool = self.returned.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn give_back(&self, conn: Connection) {
        self.lock().idle.push(conn);
        self.returned.notify_one();
    }
}

#[cfg(test)]
mod tests_batches;
#[cfg(test)]
mod tests_hardening;
