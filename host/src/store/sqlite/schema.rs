//! The store's schema and its migrations. The version is SQLite's
//! `user_version`; each migration runs once, in order, inside the same
//! write transaction that reads the version, so processes opening a new
//! store together cannot both migrate it.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::store::StoreError;

/// How long a write waits for another process's write to end.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The migrations, oldest first; the schema version is their count.
const MIGRATIONS: &[&str] = &[
    V1,
    super::texts::MIGRATION,
    V3,
    V4,
    V5,
    V6,
    V7,
    V8,
    V9,
    V10,
    V11,
    super::attachments::MIGRATION,
    V13,
    V14,
    super::feedback::MIGRATION,
    super::experiments::MIGRATION,
];

/// Version 1: runs, and the calls of each run.
pub(in crate::store) const V1: &str = r#"
CREATE TABLE runs (
    seq               INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    pipeline          TEXT NOT NULL,
    status            TEXT NOT NULL,          -- running, done, failed, cancelled
    started_at        INTEGER NOT NULL,       -- unix ms
    deadline_at       INTEGER NOT NULL,       -- past this, a running run was interrupted
    owner             TEXT,                   -- host/pid-namespace/pid of the process making it
    finished_at       INTEGER,
    prompt            TEXT NOT NULL,
    options           TEXT NOT NULL,          -- JSON object
    plan              TEXT,                   -- JSON
    follow_up_of      TEXT,
    resynthesis_of    TEXT,
    kind              TEXT,
    summary           TEXT,
    answer            TEXT,
    notes             TEXT NOT NULL DEFAULT '[]',
    details           TEXT,
    error             TEXT,
    elapsed_ms        INTEGER,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    cost_usd          REAL,
    cost_estimated    INTEGER NOT NULL DEFAULT 0, -- part of cost_usd is chorus's estimate
    lost_events       INTEGER NOT NULL DEFAULT 0,
    bytes             INTEGER NOT NULL DEFAULT 0  -- the run's text and its calls', set when it ends
);
CREATE INDEX runs_by_pipeline ON runs (pipeline, seq);
CREATE INDEX runs_by_start ON runs (started_at);

CREATE TABLE calls (
    run_seq           INTEGER NOT NULL,
    id                INTEGER NOT NULL,
    stage             TEXT NOT NULL,
    label             TEXT NOT NULL,
    model             TEXT NOT NULL,
    status            TEXT NOT NULL,          -- running, ok, failed
    started_at        INTEGER,
    request           TEXT,                   -- JSON: label, model, messages, sampling; never headers
    reply             TEXT,
    latency_ms        INTEGER,
    attempts          INTEGER,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    reasoning_tokens  INTEGER,
    cost_usd          REAL,
    cost_estimated    INTEGER NOT NULL DEFAULT 0, -- cost_usd is chorus's estimate
    error_kind        TEXT,
    error_status      INTEGER,
    error_message     TEXT,
    reused_from_run   TEXT,
    reused_from_call  INTEGER,
    UNIQUE (run_seq, id)
);
"#;

/// Version 13: whether a call's token counts are chorus's estimates (the
/// provider reported none).
const V13: &str = r#"
ALTER TABLE calls ADD COLUMN tokens_estimated INTEGER NOT NULL DEFAULT 0;
"#;

/// Version 3: what response format each call's provider was asked for.
const V3: &str = r#"
ALTER TABLE calls ADD COLUMN format_sent TEXT;  -- json-schema, json-object; NULL: none
"#;

/// Version 4: the models that failed for good before a call's model filled
/// its seat (fallback models).
const V4: &str = r#"
ALTER TABLE calls ADD COLUMN fallback_from TEXT;  -- JSON array of "model: failure"; NULL: none
"#;

/// Version 5: of each call's prompt tokens, those read from and written to
/// the provider's prompt cache.
const V5: &str = r#"
ALTER TABLE calls ADD COLUMN cached_tokens INTEGER;
ALTER TABLE calls ADD COLUMN cache_write_tokens INTEGER;
"#;

/// Version 6: who made each run (`[[http.clients]]`, or the local user),
/// and what each client's runs hold against its budgets (see
/// `store::spend`).
const V6: &str = r#"
ALTER TABLE runs ADD COLUMN client TEXT;  -- NULL: made before runs named their client
CREATE INDEX runs_by_client ON runs (client, seq);
CREATE TABLE spend (
    id           TEXT PRIMARY KEY,
    client       TEXT NOT NULL,
    at           INTEGER NOT NULL,            -- unix ms, when the run was admitted
    reserved_usd REAL NOT NULL,               -- the run's worst case
    cost_usd     REAL                         -- what it cost, once it ended
);
CREATE INDEX spend_by_client ON spend (client, at);
"#;

/// Version 7: MCP tasks, so processes sharing the file answer for each
/// other's (see `store::tasks`).
const V7: &str = r#"
CREATE TABLE tasks (
    id               TEXT PRIMARY KEY,
    client           TEXT NOT NULL,
    owner            TEXT NOT NULL,           -- host/pid-namespace/pid of the process running it
    run_id           TEXT,
    status           TEXT NOT NULL,           -- working, completed, failed, cancelled
    detail           TEXT NOT NULL,           -- JSON: the task as tasks/get answers it
    updated_at       INTEGER NOT NULL,        -- unix ms
    expires_at       INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tasks_by_expiry ON tasks (expires_at);
"#;

/// Version 8: each call's web citations (`url_citation` annotations), from
/// which a run's numbered sources are rebuilt.
const V8: &str = r#"
ALTER TABLE calls ADD COLUMN citations TEXT;  -- JSON array of citations; NULL: none
"#;

/// Version 9: what each run's question came with — attachment names,
/// types, sizes and hashes as JSON, never the bytes.
const V9: &str = r#"
ALTER TABLE runs ADD COLUMN attachments TEXT;  -- JSON array; NULL: none
"#;

/// Version 10: each call's wait for its provider's permits and its time
/// to first token, for the run viewer's timeline.
const V10: &str = r#"
ALTER TABLE calls ADD COLUMN queued_ms INTEGER;  -- NULL: never queued
ALTER TABLE calls ADD COLUMN ttft_ms INTEGER;    -- NULL: no answer, or kept before version 10
"#;

/// Version 11: the response cache (see `store::responses`): which earlier
/// call answered each cached call, and the index from a request's key to
/// the call whose answer is reused.
const V11: &str = r#"
ALTER TABLE calls ADD COLUMN cached_from_run TEXT;
ALTER TABLE calls ADD COLUMN cached_from_call INTEGER;
CREATE TABLE response_cache (
    key        TEXT PRIMARY KEY,              -- hex SHA-256 of the request (see respcache::key)
    run_id     TEXT NOT NULL,
    call_id    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,              -- unix ms
    expires_at INTEGER NOT NULL               -- unix ms; past this the entry is not used
) WITHOUT ROWID;
CREATE INDEX response_cache_by_expiry ON response_cache (expires_at);
"#;

/// Version 14: the runs still marked running, indexed, so finding the
/// interrupted ones (retention measures them) reads those alone, however
/// long the history.
const V14: &str = r#"
CREATE INDEX IF NOT EXISTS runs_running ON runs (deadline_at) WHERE status = 'running';
"#;

/// The schema version this chorus writes.
pub fn version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Opens (creating if need be) the store at `path`, ready for use by this
/// process alongside others: WAL, a busy timeout, the schema up to date.
pub fn open(path: &Path) -> Result<Connection, StoreError> {
    let open_error = |message: String| StoreError::Open {
        path: path.to_owned(),
        message,
    };
    super::location::create_dir(path)
        .and_then(|()| super::location::create_file(path))
        .map_err(|e| open_error(e.to_string()))?;
    let sqlite = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(e.to_string()))?;
    wait_for_locks(&mut conn).map_err(sqlite)?;
    // Before anything is written: commits then wait for no fsync.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite)?;
    // Must come before the first table, so only a new store gets it.
    // Setting it always writes the header — a commit, and an fsync of the
    // WAL and its directory on every start (tens of ms on a slow disk).
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
        .map_err(sqlite)?;
    if tables == 0 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
            .map_err(sqlite)?;
    }
    let mode =
        wal_mode(&conn).map_err(|e| open_error(format!("cannot switch to WAL mode: {e}")))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(open_error(format!(
            "the file system does not support WAL mode (journal mode is `{mode}`)"
        )));
    }
    // Bounds the -wal file once a checkpoint has emptied it.
    conn.pragma_update(
        None,
        "journal_size_limit",
        super::checkpoint::JOURNAL_SIZE_LIMIT,
    )
    .map_err(sqlite)?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Switches `conn` to WAL mode; the journal mode it is in then. Two
/// processes opening a new store at once race for this switch, and SQLite
/// answers the loser "database is locked" at once, without its busy
/// handler: tried again until `BUSY_TIMEOUT`.
fn wal_mode(conn: &Connection) -> rusqlite::Result<String> {
    let started = std::time::Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            outcome => return outcome,
        }
    }
}

/// How a connection waits for another's lock: it looks again every
/// millisecond, for up to `BUSY_TIMEOUT`. SQLite's own busy handler backs
/// off to 100 ms between looks, so a writer could miss the gaps retention
/// leaves between its slices for most of a second (the history bench saw
/// 0.8 s at 1,000,000 runs); a look every millisecond takes the first gap.
pub fn wait_for_locks(conn: &mut Connection) -> rusqlite::Result<()> {
    let mut began = Instant::now();
    conn.busy_handler(Some(move |tries: i32| {
        if tries == 0 {
            began = Instant::now();
        }
        if began.elapsed() >= BUSY_TIMEOUT {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
        true
    }))
}

/// A connection to the existing store at `path` (`flags`: read-write or
/// read-only), waiting `BUSY_TIMEOUT` for a writer's lock.
fn connect(path: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let mut conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| StoreError::Open {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    wait_for_locks(&mut conn).map_err(|source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    })?;
    Ok(conn)
}

/// A second read-write connection to an open store (`store::spend`'s).
pub fn open_writer(path: &Path) -> Result<Connection, StoreError> {
    connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
}

/// A read-only connection to an existing store (no pragma, no migration).
pub fn connect_read_only(path: &Path) -> Result<Connection, StoreError> {
    connect(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
}

/// A second connection to an open store, for reading.
pub fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    let sqlite = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    conn.pragma_update(None, "query_only", true)
        .map_err(sqlite)?;
    Ok(conn)
}

/// Opens an existing store to read only: nothing is written (no pragma,
/// no migration), so a store the user cannot write can still be read. A
/// store of an older schema is brought up to date first, which does write.
pub fn open_read_only(path: &Path) -> Result<Connection, StoreError> {
    let conn = connect_read_only(path)?;
    if schema_version(&conn, path)? < version() {
        drop(open(path)?);
    }
    Ok(conn)
}

/// The schema version of the store `conn` is open on; a version newer
/// than this chorus knows is refused (an older chorus must not write it).
fn schema_version(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    let found: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        })?;
    if found > version() {
        return Err(StoreError::NewerSchema {
            at: path.display().to_string(),
            found,
            known: version(),
            elsewhere: "point [store] path at another file",
        });
    }
    Ok(found)
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let sqlite = |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite)?;
    let found = schema_version(&tx, path)?;
    for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
        tx.execute_batch(migration).map_err(sqlite)?;
    }
    if found < version() {
        tx.pragma_update(None, "user_version", version())
            .map_err(sqlite)?;
        tracing::info!(store = %path.display(), "run store schema: version {found} -> {}", version());
    }
    tx.commit().map_err(sqlite)
}
