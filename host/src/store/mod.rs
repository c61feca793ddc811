//! The run store: every run's history — prompt, options, plan, each request
//! sent, each answer or failure with its timing, tokens and cost, the final
//! record — in one SQLite file that every chorus process naming it shares
//! (WAL, busy timeouts). A run is written as it goes, so a crash loses at
//! most the calls in flight. With `[store] enabled = false`, or when the
//! file cannot be opened, the runs of this process are kept in memory only.
//!
//! Runs write through a `Recorder` (one per run, a watcher of its events);
//! everything else reads: a run by id or unique prefix, a page of runs
//! newest first, retention.

mod location;
mod memory;
mod owner;
mod read;
mod recorder;
mod retention;
mod schema;
mod texts;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

pub use location::path as path_for;
pub use recorder::{Links, Recorder};
pub use retention::{Pruned, Retention};
pub use writer::now_ms;

use crate::config::{Limits, Loaded};
use crate::record::{RunSummary, StoredCall, StoredRun};
use memory::Memory;
use recorder::Sink;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the run store at {}: {message}", path.display())]
    Open { path: PathBuf, message: String },
    #[error(
        "the run store at {} has schema version {found}, newer than this chorus knows ({known}): \
         upgrade chorus, or point [store] path at another file",
        path.display()
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
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
    pub limit: usize,
}

impl Default for Query {
    fn default() -> Self {
        Self {
            before: None,
            pipeline: None,
            text: None,
            since: None,
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
    backend: Backend,
}

#[derive(Clone)]
enum Backend {
    Disk(Arc<Disk>),
    /// Why runs are in memory only.
    Memory(Arc<Memory>, &'static str),
}

struct Disk {
    path: PathBuf,
    sender: Option<mpsc::Sender<writer::Msg>>,
    reader: Mutex<Connection>,
    done: Mutex<std::sync::mpsc::Receiver<()>>,
}

/// Dropping the last handle lets the writer finish what it was sent; the
/// process waits for it a bounded time so the last runs reach the disk.
impl Drop for Disk {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            let _ = sender.try_send(writer::Msg::Shutdown);
        }
        let done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if done.recv_timeout(Duration::from_secs(5)).is_err() {
            tracing::warn!(store = %self.path.display(), "the run store's writer did not finish in 5 s; the last events may be lost");
        }
    }
}

impl Store {
    /// The store `loaded` describes: its file, or memory when disabled.
    pub fn open(loaded: &Loaded) -> Result<Self, StoreError> {
        let config = &loaded.config.store;
        if !config.enabled {
            return Ok(Self::in_memory(
                &loaded.config.limits,
                "[store] enabled = false",
            ));
        }
        Self::open_at(&location::path(loaded)?, Retention::of(config))
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

    /// The store `loaded` describes, to read and prune only: no writer
    /// thread, no retention pass, nothing created if it is missing.
    pub fn open_for_reading(loaded: &Loaded) -> Result<Self, StoreError> {
        if !loaded.config.store.enabled {
            return Err(StoreError::Disabled);
        }
        Self::open_reading_at(location::path(loaded)?)
    }

    fn open_reading_at(path: PathBuf) -> Result<Self, StoreError> {
        if let Some(message) = location::blocked(&path) {
            return Err(StoreError::Open { path, message });
        }
        if !path.exists() {
            return Err(StoreError::NotFound(path));
        }
        let reader = schema::open_read_only(&path)?;
        let (finished, done) = std::sync::mpsc::channel();
        let _ = finished.send(());
        Ok(Self {
            backend: Backend::Disk(Arc::new(Disk {
                path,
                sender: None,
                reader: Mutex::new(reader),
                done: Mutex::new(done),
            })),
        })
    }

    /// The SQLite store at `path`, created if missing.
    pub fn open_at(path: &Path, retention: Retention) -> Result<Self, StoreError> {
        Self::open_with_queue(path, retention, writer::CAPACITY)
    }

    fn open_with_queue(
        path: &Path,
        retention: Retention,
        capacity: usize,
    ) -> Result<Self, StoreError> {
        let conn = schema::open(path)?;
        let reader = schema::open_reader(path)?;
        let (sender, done) =
            writer::spawn(conn, path.to_owned(), retention, capacity).map_err(|e| {
                StoreError::Open {
                    path: path.to_owned(),
                    message: format!("cannot start its writer thread: {e}"),
                }
            })?;
        Ok(Self {
            backend: Backend::Disk(Arc::new(Disk {
                path: path.to_owned(),
                sender: Some(sender),
                reader: Mutex::new(reader),
                done: Mutex::new(done),
            })),
        })
    }

    /// Runs of this process only, bounded as `limits` says.
    pub fn in_memory(limits: &Limits, why: &'static str) -> Self {
        Self {
            backend: Backend::Memory(
                Arc::new(Memory::new(limits.max_runs_kept, limits.run_ttl)),
                why,
            ),
        }
    }

    /// The file, when runs are kept on disk.
    pub fn path(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Disk(disk) => Some(&disk.path),
            Backend::Memory(..) => None,
        }
    }

    /// Where runs are kept, for messages.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Disk(disk) => format!("the run store at {}", disk.path.display()),
            Backend::Memory(_, why) => format!("this process's memory ({why})"),
        }
    }

    /// A recorder for one run; `time_limit` is the longest the run can take.
    pub fn recorder(&self, links: Links, time_limit: Duration) -> Recorder {
        let sink = match &self.backend {
            Backend::Disk(disk) => match &disk.sender {
                Some(sender) => Sink::Disk(sender.clone()),
                // Opened for reading: every write is refused, and counted.
                None => Sink::Disk(mpsc::channel(1).0),
            },
            Backend::Memory(memory, _) => Sink::Memory(memory.clone()),
        };
        Recorder::new(sink, links, time_limit)
    }

    /// The run with this id, this unique prefix of an id, or `last`.
    /// Blocking: call it off the async runtime's threads.
    pub fn find(&self, id: &str, with_requests: bool) -> Result<Lookup<StoredRun>, StoreError> {
        match &self.backend {
            Backend::Memory(memory, _) => Ok(match memory.resolve(id) {
                Lookup::Found(id) => memory
                    .get(&id)
                    .map_or(Lookup::Unknown, |r| Lookup::Found(StoredRun::clone(&r))),
                Lookup::Unknown => Lookup::Unknown,
                Lookup::Ambiguous(ids) => Lookup::Ambiguous(ids),
            }),
            Backend::Disk(disk) => disk.read(|conn| {
                Ok(match read::resolve(conn, id)? {
                    Lookup::Found(id) => read::run(conn, &id, with_requests, now_ms())?
                        .map_or(Lookup::Unknown, Lookup::Found),
                    Lookup::Unknown => Lookup::Unknown,
                    Lookup::Ambiguous(ids) => Lookup::Ambiguous(ids),
                })
            }),
        }
    }

    /// Call `call_id` of the run `run_id` (in full), its request too if
    /// asked, without reading the run's other calls. Blocking.
    pub fn call(
        &self,
        run_id: &str,
        call_id: u32,
        with_request: bool,
    ) -> Result<CallLookup, StoreError> {
        match &self.backend {
            Backend::Memory(memory, _) => Ok(match memory.get(run_id) {
                None => CallLookup::UnknownRun,
                Some(run) => run.calls.iter().find(|c| c.call.id == call_id).map_or(
                    CallLookup::NoSuchCall {
                        calls: u32::try_from(run.calls.len()).unwrap_or(u32::MAX),
                    },
                    |call| CallLookup::Found(call.clone()),
                ),
            }),
            Backend::Disk(disk) => {
                disk.read(|conn| read::call(conn, run_id, call_id, with_request, now_ms()))
            }
        }
    }

    /// The run `id` (in full) and the runs it followed up, newest first, at
    /// most `most`: the prompt and answer of each, nothing more. Blocking.
    pub fn exchanges(&self, id: &str, most: usize) -> Result<Vec<Exchange>, StoreError> {
        match &self.backend {
            Backend::Memory(memory, _) => {
                let mut chain: Vec<Exchange> = Vec::new();
                let mut next = Some(id.to_owned());
                while let Some(run) = next
                    .take()
                    .filter(|_| chain.len() < most)
                    .and_then(|id| memory.get(&id))
                {
                    next.clone_from(&run.follow_up_of);
                    chain.push(Exchange {
                        prompt: run.prompt.clone(),
                        answer: run.answer.clone(),
                        follow_up_of: run.follow_up_of.clone(),
                    });
                }
                Ok(chain)
            }
            Backend::Disk(disk) => disk.read(|conn| read::exchanges(conn, id, most)),
        }
    }

    /// When each call of run `id` (in full) was sent, unix ms, by call id;
    /// empty for runs kept in memory, which do not keep it. Blocking.
    pub fn call_starts(&self, id: &str) -> Result<Vec<(u32, i64)>, StoreError> {
        match &self.backend {
            Backend::Memory(..) => Ok(Vec::new()),
            Backend::Disk(disk) => disk.read(|conn| read::call_starts(conn, id)),
        }
    }

    /// A page of runs, newest first. Blocking.
    pub fn list(&self, query: &Query) -> Result<Page, StoreError> {
        match &self.backend {
            Backend::Memory(memory, _) => Ok(memory.list(query)),
            Backend::Disk(disk) => disk.read(|conn| read::list(conn, query, now_ms())),
        }
    }

    /// Applies `retention` (default: the configured one) now. Blocking.
    pub fn prune(&self, retention: &Retention) -> Result<Pruned, StoreError> {
        let Backend::Disk(disk) = &self.backend else {
            return Err(StoreError::Disabled);
        };
        let mut conn = schema::open(&disk.path)?;
        retention::prune(&mut conn, retention, now_ms()).map_err(|source| StoreError::Sqlite {
            path: disk.path.clone(),
            source,
        })
    }

    /// Waits until everything recorded so far is written.
    pub async fn flush(&self) -> Result<(), String> {
        let Backend::Disk(disk) = &self.backend else {
            return Ok(());
        };
        let (ack, written) = oneshot::channel();
        let sender = disk.sender.as_ref().ok_or("the store is closed")?;
        sender
            .send(writer::Msg::Flush(ack))
            .await
            .map_err(|_| "the run store's writer has stopped".to_owned())?;
        written
            .await
            .map_err(|_| "the run store's writer has stopped".to_owned())?
    }
}

impl Disk {
    fn read<T>(
        &self,
        query: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        query(&conn).map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hardening;
