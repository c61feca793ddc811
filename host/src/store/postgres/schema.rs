//! The PostgreSQL store's schema and its migrations. The version is the one
//! row of `schema_version`; migrations run inside one transaction holding
//! an advisory lock, so instances starting together migrate once. A
//! database of a newer schema is refused, as the SQLite store refuses one.

use tokio_postgres::Client;

use super::{Failure, LOCK_MIGRATE};

/// The migrations, oldest first; the schema version is their count.
const MIGRATIONS: &[&str] = &[
    V1,
    V2,
    V3,
    V4,
    V5,
    V6,
    V7,
    V8,
    super::attachments::MIGRATION,
    V10,
    V11,
    V12,
    super::feedback::MIGRATION,
    super::experiments::MIGRATION,
];

/// Version 11: whether a call's token counts are chorus's estimates (the
/// provider reported none).
const V11: &str = r#"
ALTER TABLE calls ADD COLUMN tokens_estimated BOOLEAN NOT NULL DEFAULT FALSE;
"#;

/// Version 12: the runs still marked running, indexed, so finding the
/// interrupted ones (retention measures them) reads those alone.
const V12: &str = r#"
CREATE INDEX IF NOT EXISTS runs_running ON runs (deadline_at) WHERE status = 'running';
"#;

/// Version 1: runs and their calls, as the SQLite store keeps them (texts
/// of any length inline: PostgreSQL stores long ones out of line itself).
const V1: &str = r#"
CREATE TABLE runs (
    seq               BIGSERIAL PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    pipeline          TEXT NOT NULL,
    status            TEXT NOT NULL,          -- running, done, failed, cancelled
    started_at        BIGINT NOT NULL,        -- unix ms
    deadline_at       BIGINT NOT NULL,        -- past this, a running run was interrupted
    owner             TEXT,                   -- host/pid-namespace/pid of the process making it
    finished_at       BIGINT,
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
    elapsed_ms        BIGINT,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    cost_usd          DOUBLE PRECISION,
    cost_estimated    BOOLEAN NOT NULL DEFAULT FALSE,
    lost_events       BIGINT NOT NULL DEFAULT 0,
    bytes             BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_pipeline ON runs (pipeline, seq);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE INDEX runs_by_id_prefix ON runs (id text_pattern_ops);

CREATE TABLE calls (
    run_seq           BIGINT NOT NULL REFERENCES runs (seq) ON DELETE CASCADE,
    id                BIGINT NOT NULL,
    stage             TEXT NOT NULL,
    label             TEXT NOT NULL,
    model             TEXT NOT NULL,
    status            TEXT NOT NULL,          -- running, ok, failed
    started_at        BIGINT,
    request           TEXT,                   -- JSON: label, model, messages, sampling; never headers
    reply             TEXT,
    latency_ms        BIGINT,
    attempts          BIGINT,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    reasoning_tokens  BIGINT,
    cost_usd          DOUBLE PRECISION,
    cost_estimated    BOOLEAN NOT NULL DEFAULT FALSE,
    error_kind        TEXT,
    error_status      BIGINT,
    error_message     TEXT,
    reused_from_run   TEXT,
    reused_from_call  BIGINT,
    format_sent       TEXT,
    fallback_from     TEXT,
    cached_tokens     BIGINT,                 -- prompt tokens the provider served from its cache
    cache_write_tokens BIGINT,                -- prompt tokens written to its cache
    PRIMARY KEY (run_seq, id)
);
"#;

/// Version 2: the instances writing to the store, each with a lease kept
/// by its heartbeat; a running run whose instance's lease has lapsed was
/// interrupted (a process killed, a machine lost).
const V2: &str = r#"
CREATE TABLE instances (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,              -- host/pid-namespace/pid, for people
    started_at   BIGINT NOT NULL,            -- unix ms, the database's clock
    heartbeat_at BIGINT NOT NULL
);
"#;

/// Version 3: who made each run, and what each client's runs hold against
/// its budgets (see `store::spend`), as in the SQLite store's version 6.
const V3: &str = r#"
ALTER TABLE runs ADD COLUMN client TEXT;
CREATE INDEX runs_by_client ON runs (client, seq);
CREATE TABLE spend (
    id           TEXT PRIMARY KEY,
    client       TEXT NOT NULL,
    at           BIGINT NOT NULL,
    reserved_usd DOUBLE PRECISION NOT NULL,
    cost_usd     DOUBLE PRECISION
);
CREATE INDEX spend_by_client ON spend (client, at);
"#;

/// Version 4: MCP tasks, so every instance answers for every task (see
/// `store::tasks`); a working task whose owner's lease lapsed was lost.
const V4: &str = r#"
CREATE TABLE tasks (
    id               TEXT PRIMARY KEY,
    client           TEXT NOT NULL,
    owner            TEXT NOT NULL,           -- instances.id of the instance running it
    run_id           TEXT,
    status           TEXT NOT NULL,           -- working, completed, failed, cancelled
    detail           TEXT NOT NULL,           -- JSON: the task as tasks/get answers it
    updated_at       BIGINT NOT NULL,         -- unix ms
    expires_at       BIGINT NOT NULL,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX tasks_by_expiry ON tasks (expires_at);
"#;

/// Version 5: each call's web citations, as in the SQLite store's
/// version 8.
const V5: &str = r#"
ALTER TABLE calls ADD COLUMN citations TEXT;
"#;

/// Version 6: each run's attachments, as in the SQLite store's version 9.
const V6: &str = r#"
ALTER TABLE runs ADD COLUMN attachments TEXT;
"#;

/// Version 7: each call's wait for its provider's permits and its time to
/// first token, as in the SQLite store's version 10.
const V7: &str = r#"
ALTER TABLE calls ADD COLUMN queued_ms BIGINT;
ALTER TABLE calls ADD COLUMN ttft_ms BIGINT;
"#;

/// Version 8: the response cache, as in the SQLite store's version 11.
const V8: &str = r#"
ALTER TABLE calls ADD COLUMN cached_from_run TEXT;
ALTER TABLE calls ADD COLUMN cached_from_call BIGINT;
CREATE TABLE response_cache (
    key        TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL,
    call_id    BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX response_cache_by_expiry ON response_cache (expires_at);
"#;

/// Version 10 (after 9, the attachment bytes): limits
/// shared by the instances on this database (`postgres/limits.rs`).
/// `limit_holds`: what each instance holds of a scope's limit — its
/// concurrency slots (one row per scope and instance, counted while the
/// instance's lease lives), or an amount of requests or tokens taken at
/// `at` (counted for a minute and the batch's life). `limit_backoff`: when
/// a scope may be sent to again after a 429.
const V10: &str = r#"
CREATE TABLE limit_holds (
    id       TEXT PRIMARY KEY,
    scope    TEXT NOT NULL,
    kind     TEXT NOT NULL,                 -- concurrency, requests, tokens
    instance TEXT NOT NULL,
    amount   BIGINT NOT NULL,
    at       BIGINT NOT NULL                -- unix ms, the database's clock
);
CREATE INDEX limit_holds_by_scope ON limit_holds (scope, kind, at);
CREATE TABLE limit_backoff (
    scope TEXT PRIMARY KEY,
    until BIGINT NOT NULL                   -- unix ms, the database's clock
);
"#;

/// The schema version this chorus writes.
pub fn version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the database up to this chorus's schema, or refuses a newer one.
/// Returns the version found.
pub async fn migrate(client: &mut Client) -> Result<i64, Failure> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_MIGRATE])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_version (
             one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
             version BIGINT NOT NULL
         );
         INSERT INTO schema_version (version) VALUES (0) ON CONFLICT DO NOTHING;",
    )
    .await?;
    let found: i64 = tx
        .query_one("SELECT version FROM schema_version", &[])
        .await?
        .get(0);
    if found > version() {
        return Err(Failure::Newer(found));
    }
    for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
        tx.batch_execute(migration).await?;
    }
    if found < version() {
        tx.execute("UPDATE schema_version SET version = $1", &[&version()])
            .await?;
    }
    tx.commit().await?;
    if found < version() {
        tracing::info!(
            "run store schema (PostgreSQL): version {found} -> {}",
            version()
        );
    }
    Ok(found)
}
