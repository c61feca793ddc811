//! The PostgreSQL backend (`[store] url`): the same runs as the SQLite
//! store, in a database that chorus instances on several machines share.
//! It runs on its own small tokio runtime, so the rest of the host keeps
//! the store's blocking interface (reads are called off the async threads,
//! as with SQLite) and the pool's connections outlive any caller's runtime.
//! Writes go through the writer task (batched, bounded); reads through a
//! connection pool (`deadpool-postgres`); plain TCP or a Unix socket, no
//! TLS (see docs/scaling.md).

mod apply;
mod attachments;
mod backend;
mod backlog;
mod experiments;
mod feedback;
pub mod limits;
mod read;
mod responses;
mod retention;
mod schema;
mod spend;
pub mod target;
mod tasks;
mod writer;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use super::StoreError;
use super::event::Msg;
use super::memory::Memory;
use super::retention::Retention;
pub use target::Target;
use writer::{Health, Writer};

/// Advisory lock keys: migrations; retention's freeing of attachment
/// bytes against their keeping; a retention pass (one instance at a time).
const LOCK_MIGRATE: i64 = 0x0063_686f_7275_0001;
const LOCK_RETENTION: i64 = 0x0063_686f_7275_0002;
const LOCK_PRUNE: i64 = 0x0063_686f_7275_0003;
/// The database's clock, in unix ms: leases are compared on one clock.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::BIGINT";
/// How often an instance renews its lease, and how long a lease lasts: a
/// killed instance's runs show as interrupted within `LEASE` + `HEARTBEAT`.
const HEARTBEAT: Duration = Duration::from_secs(5);
pub const LEASE: Duration = Duration::from_secs(15);
/// Runs kept readable in memory while the database is down.
const UNWRITTEN_RUNS: usize = 1000;
/// Connections in the pool: the writer's and a few readers'.
const POOL_SIZE: usize = 8;

/// What went wrong talking to the database.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("{}", describe(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error("cannot connect: {0}")]
    Pool(String),
    #[error("schema version {0} is newer than this chorus knows")]
    Newer(i64),
}

/// tokio-postgres's message, with the server's detail when there is one.
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => error.to_string(),
    }
}

/// SQLSTATEs of a statement refused for a passing reason, which the same
/// statement later gets through: disk full (53100), out of memory
/// (53200), too many connections (53300), read-only after a failover
/// (25006), a serialization failure or a deadlock (40001, 40P01).
const PASSING: [&str; 6] = ["53100", "53200", "53300", "25006", "40001", "40P01"];

impl Failure {
    /// Whether writing again later may succeed: the database is gone, or
    /// refused for a passing reason ([`PASSING`]). The writer keeps such
    /// events and retries them rather than dropping them.
    pub fn transient(&self) -> bool {
        self.unreachable()
            || matches!(self, Failure::Db(e) if e.code().is_some_and(|c| PASSING.contains(&c.code())))
    }

    /// Whether the database is gone (not there, restarting, the connection
    /// lost), as against refusing a statement.
    pub fn unreachable(&self) -> bool {
        match self {
            Failure::Pool(_) => true,
            Failure::Newer(_) => false,
            Failure::Db(e) => match e.code() {
                _ if e.is_closed() => true,
                Some(code) => {
                    let code = code.code();
                    code.starts_with("08") || code.starts_with("57P")
                }
                // Not the server's answer: the connection (io, connect,
                // timeout) — or a value this chorus could not send.
                None => {
                    let text = e.to_string();
                    [
                        "error connecting",
                        "error communicating",
                        "timeout",
                        "connection closed",
                    ]
                    .iter()
                    .any(|s| text.starts_with(s))
                }
            },
        }
    }
}

pub struct Postgres {
    pub shown: String,
    pool: Pool,
    pub sender: Option<super::queue::Queue>,
    health: Arc<Health>,
    /// Runs that ended while the database was down, until it is back.
    unwritten: Arc<Memory>,
    done: Mutex<std::sync::mpsc::Receiver<()>>,
    /// Renews this instance's lease; stopped before the writer gives it back.
    heartbeat: Option<tokio::task::JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
    /// This instance's id: its lease, and the owner of its tasks.
    pub instance: String,
    /// Task cancel requests heard from any instance (see `tasks::listen`).
    pub cancels: tokio::sync::broadcast::Sender<String>,
    /// How far its writes trail the runs (see `store::lag`).
    pub lag: crate::store::WriteLag,
}

/// The last handle lets the writer write what it was sent (a bounded
/// time), then stops the store's runtime.
impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if let Some(sender) = self.sender.take() {
            sender.deliver_blocking(Msg::Shutdown, false);
        }
        let done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if done.recv_timeout(Duration::from_secs(5)).is_err() {
            tracing::warn!(store = %self.shown, "the run store's writer did not finish in 5 s; the last events may be lost");
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Postgres {
    /// The store in `target`'s database, with its writer. A database that
    /// cannot be reached now is not an error: runs are kept in memory
    /// until it can be (said in the log); a newer schema is.
    pub fn open(target: Target, retention: Retention, capacity: usize) -> Result<Self, StoreError> {
        let listener = target.config.clone();
        let mut store = Self::connect(target)?;
        let migrated = match store.block(|pool| async move {
            let mut client = pool.get().await.map_err(|e| Failure::Pool(e.to_string()))?;
            schema::migrate(&mut client).await
        }) {
            Ok(Ok(_)) => true,
            Ok(Err(Failure::Newer(found))) => return Err(store.newer(found)),
            Ok(Err(failure)) => {
                tracing::warn!(store = %store.shown, "the run store cannot be reached ({failure}): runs go on, kept in memory, and are written when it is back");
                store.health.set(Some(failure.to_string()));
                false
            }
            Err(e) => return Err(e),
        };
        let instance = store.instance.clone();
        if let Some(runtime) = &store.runtime {
            runtime.spawn(tasks::listen(listener, store.cancels.clone()));
        }
        if migrated {
            // The lease is taken before the first run is written.
            let _ = store.block({
                let instance = instance.clone();
                |pool| async move { renew(&pool, &instance).await }
            });
        }
        store.heartbeat = store.runtime.as_ref().map(|runtime| {
            let (pool, instance) = (store.pool.clone(), instance.clone());
            runtime.spawn(async move {
                let mut tick = tokio::time::interval(HEARTBEAT);
                loop {
                    tick.tick().await;
                    if let Err(e) = renew(&pool, &instance).await {
                        tracing::debug!("the run store's lease was not renewed: {e}");
                    }
                }
            })
        });
        let (sender, inbox) = super::queue::channel(capacity);
        let (done_tx, done) = std::sync::mpsc::channel();
        let writer = Writer {
            pool: store.pool.clone(),
            shown: store.shown.clone(),
            retention,
            health: store.health.clone(),
            instance,
            unwritten: store.unwritten.clone(),
            migrated,
            pending: Default::default(),
            lost: 0,
            last_prune: Instant::now(),
            ended_since_prune: 0,
            pruning: Default::default(),
            retry: Duration::from_millis(250),
            lag: store.lag.clone(),
        };
        if let Some(runtime) = &store.runtime {
            runtime.spawn(async move {
                writer.run(inbox.into_receiver()).await;
                let _ = done_tx.send(());
            });
        }
        store.sender = Some(sender);
        store.done = Mutex::new(done);
        Ok(store)
    }

    /// The store in `target`'s database, to read and prune only; an older
    /// schema is brought up to date first, a newer one refused, an
    /// unreachable database an error.
    pub fn open_reading(target: Target) -> Result<Self, StoreError> {
        let store = Self::connect(target)?;
        match store.block(|pool| async move {
            let mut client = pool.get().await.map_err(|e| Failure::Pool(e.to_string()))?;
            schema::migrate(&mut client).await
        })? {
            Ok(_) => Ok(store),
            Err(Failure::Newer(found)) => Err(store.newer(found)),
            Err(failure) => Err(store.error(failure)),
        }
    }

    fn connect(target: Target) -> Result<Self, StoreError> {
        let shown = target.shown.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("chorus-store-pg")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Database {
                at: shown.clone(),
                message: format!("cannot start its runtime: {e}"),
            })?;
        let manager = Manager::from_config(
            target.config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(target::CONNECT_TIMEOUT))
            .create_timeout(Some(target::CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Database {
                at: shown.clone(),
                message: e.to_string(),
            })?;
        let (finished, done) = std::sync::mpsc::channel();
        let _ = finished.send(());
        Ok(Self {
            shown,
            pool,
            sender: None,
            health: Arc::new(Health::default()),
            unwritten: Arc::new(Memory::new(UNWRITTEN_RUNS, Duration::from_secs(24 * 3600))),
            done: Mutex::new(done),
            heartbeat: None,
            runtime: Some(runtime),
            instance: uuid::Uuid::now_v7().to_string(),
            cancels: tokio::sync::broadcast::channel(256).0,
            lag: crate::store::WriteLag::default(),
        })
    }

    /// Runs `work` on the store's runtime and waits for it: callable from
    /// any thread (off the async runtime's worker threads, as SQLite reads).
    fn block<F, T>(&self, work: impl FnOnce(Pool) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let runtime = self.runtime.as_ref().ok_or_else(|| StoreError::Database {
            at: self.shown.clone(),
            message: "the store is closed".into(),
        })?;
        let handle = runtime.spawn(work(self.pool.clone()));
        futures::executor::block_on(handle).map_err(|e| StoreError::Database {
            at: self.shown.clone(),
            message: e.to_string(),
        })
    }

    /// A read on a pooled connection.
    fn read<F, T>(
        &self,
        query: impl FnOnce(deadpool_postgres::Object) -> F + Send + 'static,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, Failure>> + Send + 'static,
        T: Send + 'static,
    {
        let outcome = self.block(|pool| async move {
            let client = pool.get().await.map_err(|e| Failure::Pool(e.to_string()))?;
            query(client).await
        })?;
        outcome.map_err(|failure| self.error(failure))
    }

    fn error(&self, failure: Failure) -> StoreError {
        let message = if failure.unreachable() {
            format!("cannot be reached ({failure})")
        } else {
            failure.to_string()
        };
        StoreError::Database {
            at: self.shown.clone(),
            message,
        }
    }

    fn newer(&self, found: i64) -> StoreError {
        StoreError::NewerSchema {
            at: self.shown.clone(),
            found,
            known: schema::version(),
            elsewhere: "point [store] url at another database",
        }
    }

    /// The limits shared with the other instances on this database.
    fn limits(&self) -> Option<limits::SharedLimits> {
        Some(limits::SharedLimits {
            pool: self.pool.clone(),
            runtime: self.runtime.as_ref()?.handle().clone(),
            instance: self.instance.clone(),
            shown: self.shown.clone(),
        })
    }

    /// Why the database is unreachable, as the writer last found it.
    pub fn down(&self) -> Option<String> {
        self.health.down()
    }
}

/// Renews (or takes) this instance's lease.
async fn renew(pool: &Pool, instance: &str) -> Result<(), Failure> {
    let client = pool.get().await.map_err(|e| Failure::Pool(e.to_string()))?;
    client
        .execute(
            &format!(
                "INSERT INTO instances (id, host, started_at, heartbeat_at)
                 VALUES ($1, $2, {NOW_MS}, {NOW_MS})
                 ON CONFLICT (id) DO UPDATE SET heartbeat_at = {NOW_MS}"
            ),
            &[&instance, &super::owner::this_process()],
        )
        .await?;
    Ok(())
}

/// What `chorus check` says of the database `target` names: reachable
/// (with its schema version) or why not. Never shows a password.
pub fn probe(target: Target) -> String {
    let shown = target.shown.clone();
    let store = match Postgres::connect(target) {
        Ok(store) => store,
        Err(e) => return format!("{shown}: {e}"),
    };
    let version = store.read(|client| async move {
        let exists: bool = client
            .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
            .await?
            .get(0);
        if !exists {
            return Ok(None);
        }
        let row = client
            .query_one("SELECT version FROM schema_version", &[])
            .await?;
        Ok(Some(row.get::<_, i64>(0)))
    });
    match version {
        Ok(Some(found)) if found > schema::version() => format!(
            "{shown} (PostgreSQL) — schema version {found} is NEWER than this chorus knows ({}): upgrade chorus",
            schema::version()
        ),
        Ok(Some(found)) => format!(
            "{shown} (PostgreSQL, reachable, schema version {found}; provider limits shared by its instances)"
        ),
        Ok(None) => format!("{shown} (PostgreSQL, reachable; its tables are made on first use)"),
        Err(e) => format!(
            "{shown} (PostgreSQL) — UNREACHABLE: {e}; runs would be kept in memory until it is back, and provider limits counted per instance"
        ),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_limits;
