//! The `history` scenario on PostgreSQL (see `history.rs`): a throwaway
//! cluster of Debian's PostgreSQL (`tests/support/postgres.rs`), a new
//! database per size, the synthetic history written by the database itself
//! (`generate_series`, then `VACUUM ANALYZE` as autovacuum would have
//! done), and the same measures as on SQLite: start, the store's reads,
//! `chorus runs` as typed, and `chorus runs prune` while a writer inserts
//! a run with a call every 5 ms. Each read query's plan, from `EXPLAIN
//! (ANALYZE, BUFFERS)`, is printed on stderr (for docs/scaling.md).

use std::path::Path;
use std::time::{Duration, Instant};

use chorus::store::{Store, Target};
use tokio_postgres::{Client, NoTls};

use super::history::{
    self, HEAD, Row, Writes, best_cli, best_start, keep_all, keep_everything, run_id,
};
use super::postgres::Cluster;
use super::server;

/// The table for PostgreSQL, or why it was not measured.
pub async fn run(binary: &Path, quick: bool) -> String {
    let Some(cluster) = Cluster::start() else {
        return "not measured: PostgreSQL's server binaries are not installed\n".into();
    };
    let provider = server::provider().await;
    let cache = tempfile::tempdir().unwrap();
    let mut out = String::from(HEAD);
    for n in history::sizes(quick) {
        let url = cluster.database();
        let dir = tempfile::tempdir().unwrap();
        let config = server::config(&provider.url, dir.path(), server::Flavor::Full);
        keep_everything(&config, Some(&url));
        // The empty database first (its tables made by the first start).
        let empty = best_start(binary, &config, cache.path()).await;
        let client = connect(&url).await;
        eprintln!("  PostgreSQL: writing {n} runs…");
        let written = Instant::now();
        fill(&client, n).await;
        eprintln!("  written in {:.1} s", written.elapsed().as_secs_f64());
        let start = best_start(binary, &config, cache.path()).await;
        let reads = {
            let url = url.clone();
            tokio::task::spawn_blocking(move || {
                let target = Target::new(&url, None).unwrap();
                history::reads(&Store::open_database(target, keep_all()).unwrap(), n)
            })
            .await
            .unwrap()
        };
        explain(&client, n).await;
        let listed = best_cli(binary, &config, cache.path(), &["runs"]);
        let shown = best_cli(
            binary,
            &config,
            cache.path(),
            &["runs", "show", &run_id(n / 2)[..12]],
        );
        let before = database_size(&client).await;
        let (pruned, writes) = prune_while_writing(binary, &config, cache.path(), &url, n).await;
        let after = database_size(&client).await;
        out += &Row {
            n,
            empty,
            start,
            reads,
            listed,
            shown,
            pruned,
            writes,
            before,
            after,
        }
        .line();
    }
    out
}

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn database_size(client: &Client) -> u64 {
    let size: i64 = client
        .query_one("SELECT pg_database_size(current_database())", &[])
        .await
        .unwrap()
        .get(0);
    u64::try_from(size).unwrap()
}

/// `history::run_id(i)` in SQL, for `i` a bigint.
const RUN_ID: &str = "lpad(to_hex(i), 8, '0') || '-' || lpad(to_hex(i % 65535), 4, '0')
    || '-7000-8000-' || lpad(to_hex(i), 12, '0')";

/// `n` finished runs of about 2 KB with two calls each, as `history::fill`
/// writes them into SQLite, 100,000 per transaction.
async fn fill(client: &Client, n: usize) {
    client
        .batch_execute("SET synchronous_commit = off")
        .await
        .unwrap();
    let previous = RUN_ID
        .replace("(i)", "(i - 1)")
        .replace("(i %", "((i - 1) %");
    let runs = format!(
        "INSERT INTO runs (seq, id, pipeline, status, started_at, deadline_at, finished_at,
                           prompt, options, follow_up_of, kind, summary, answer, elapsed_ms,
                           cost_usd, client, bytes)
         SELECT i + 1, {RUN_ID}, 'ask', 'done', 1700000000000 + i * 1000,
                1700000000000 + i * 1000, 1700000000000 + i * 1000,
                'question ' || i || ': how does a long history cost?', '{{}}',
                CASE WHEN i % 10 <> 0 THEN {previous} END, 'synthesis', 'synthesis of 2 of 2',
                repeat('a', 600), 40, 0.002, 'local:bench', 2000
         FROM generate_series($1::BIGINT, $2::BIGINT) AS i"
    );
    let calls = "INSERT INTO calls (run_seq, id, stage, label, model, status, started_at, request,
                                    reply, latency_ms, attempts, prompt_tokens, completion_tokens,
                                    cost_usd)
         SELECT i + 1, c, 'fan-out', 'm', 'm1', 'ok', 1700000000000 + i * 1000,
                '{\"messages\":[{\"role\":\"user\",\"content\":\"' || repeat('q', 300) || '\"}]}',
                repeat('a', 600), 20, 1, 100, 150, 0.001
         FROM generate_series($1::BIGINT, $2::BIGINT) AS i, generate_series(0, 1) AS c";
    let n = i64::try_from(n).unwrap();
    for from in (0..n).step_by(100_000) {
        let to = (from + 100_000).min(n) - 1;
        client.execute(&runs, &[&from, &to]).await.unwrap();
        client.execute(calls, &[&from, &to]).await.unwrap();
    }
    // One statement each: VACUUM refuses to run in a multi-statement string.
    for sql in [
        format!("SELECT setval('runs_seq_seq', {n})"),
        "VACUUM ANALYZE runs".into(),
        "VACUUM ANALYZE calls".into(),
    ] {
        client.batch_execute(&sql).await.unwrap();
    }
}

/// Prints the plan of each read the store makes (as `store/postgres/read.rs`
/// and `retention.rs` write them), run on this history.
async fn explain(client: &Client, n: usize) {
    let lost = "(status = 'running' AND NOT EXISTS (SELECT 1 FROM instances
         WHERE instances.id = runs.owner
           AND instances.heartbeat_at > (extract(epoch from clock_timestamp()) * 1000)::BIGINT - 15000))";
    let list = |filter: &str, limit: usize| {
        format!(
            "SELECT seq, id, pipeline, status, deadline_at, kind, started_at, elapsed_ms, cost_usd,
                    substr(prompt, 1, 400), summary, follow_up_of, resynthesis_of, owner, {lost},
                    client
             FROM runs {filter} ORDER BY seq DESC LIMIT {limit}"
        )
    };
    let middle = run_id(n / 2);
    let queries = [
        ("runs list, first page", list("", 21)),
        (
            "resources/list page for a client, mid-history",
            list(
                &format!("WHERE seq < {} AND client = 'local:bench'", n / 2),
                51,
            ),
        ),
        (
            "show by id (the run)",
            format!("SELECT *, {lost} FROM runs WHERE id = '{middle}'"),
        ),
        (
            "show by id (its calls)",
            format!(
                "SELECT * FROM calls WHERE run_seq = {} ORDER BY id",
                n / 2 + 1
            ),
        ),
        (
            "prefix resolve",
            format!(
                "SELECT id FROM runs WHERE id LIKE '{}%' ORDER BY id LIMIT 6",
                &middle[..12]
            ),
        ),
        (
            "follow-up chain (one exchange of ten)",
            format!("SELECT prompt, answer, follow_up_of FROM runs WHERE id = '{middle}'"),
        ),
        (
            "recovering interrupted runs (retention measures them)",
            "SELECT seq FROM runs WHERE status = 'running' AND deadline_at <= 1800000000000
             AND bytes = 0"
                .to_owned(),
        ),
        (
            "retention: the count bound (max_runs = N/10)",
            format!(
                "SELECT seq FROM runs ORDER BY seq DESC LIMIT 1 OFFSET {}",
                n / 10
            ),
        ),
        (
            "retention: a step of the size bound's walk, newest first",
            format!(
                "SELECT seq, bytes FROM runs WHERE seq < {} ORDER BY seq DESC LIMIT 2000",
                n / 2
            ),
        ),
        (
            "retention: one slice removed (rolled back)",
            format!(
                "WITH gone AS (DELETE FROM runs WHERE seq IN (
                                   SELECT seq FROM runs
                                   WHERE NOT (status = 'running' AND deadline_at > 1800000000000)
                                     AND seq >= {} AND seq <= {} ORDER BY seq LIMIT 500)
                               RETURNING bytes, seq AS key)
                 SELECT COUNT(*)::BIGINT, COALESCE(SUM(bytes), 0)::BIGINT, MAX(key) FROM gone",
                n / 4,
                n / 2
            ),
        ),
    ];
    for (what, sql) in queries {
        // What a plan of a DELETE did is undone.
        client.batch_execute("BEGIN").await.unwrap();
        let plan: Vec<String> = client
            .query(&format!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}"), &[])
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        client.batch_execute("ROLLBACK").await.unwrap();
        eprintln!("  EXPLAIN {what} ({n} runs):\n    {}", plan.join("\n    "));
    }
}

/// The advisory lock of retention (`store/postgres/mod.rs`).
const LOCK_RETENTION: i64 = 0x0063_686f_7275_0002;

/// `chorus runs prune` of 90% of the runs while this process inserts a
/// run with one call every 5 ms, as chorus's writer does for a run with
/// attachments: the prune's time and the longest any of those inserts took.
async fn prune_while_writing(
    binary: &Path,
    config: &Path,
    cache: &Path,
    url: &str,
    n: usize,
) -> (Duration, Writes) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, client) = (stop.clone(), connect(url).await);
        tokio::spawn(async move {
            let mut client = client;
            let mut writes = Writes::default();
            let mut beat = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                beat += 1;
                let started = Instant::now();
                let tx = client.transaction().await.unwrap();
                // As the start of a run with attachments: they exclude
                // retention's freeing of bytes (`postgres/attachments.rs`).
                tx.execute(
                    "SELECT pg_advisory_xact_lock_shared($1)",
                    &[&LOCK_RETENTION],
                )
                .await
                .unwrap();
                let seq: i64 = tx
                    .query_one(
                        "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt,
                                           options, client)
                         VALUES ($1, 'ask', 'done', 1800000000000, 1800000000000, 'beat', '{}',
                                 'local:bench')
                         RETURNING seq",
                        &[&format!("beat-{beat}")],
                    )
                    .await
                    .unwrap()
                    .get(0);
                tx.execute(
                    "INSERT INTO calls (run_seq, id, stage, label, model, status)
                     VALUES ($1, 0, 'fan-out', 'm', 'm1', 'ok')",
                    &[&seq],
                )
                .await
                .unwrap();
                tx.commit().await.unwrap();
                writes.add(started.elapsed());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            client
                .execute("DELETE FROM runs WHERE id LIKE 'beat-%'", &[])
                .await
                .unwrap();
            writes
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let keep = (n / 10).to_string();
    let started = Instant::now();
    let mut prune = history::cli(
        binary,
        config,
        cache,
        &["runs", "prune", "--max-runs", &keep],
    );
    prune.stderr(std::process::Stdio::piped());
    let output = tokio::task::spawn_blocking(move || prune.output().unwrap())
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        output.status.success(),
        "chorus runs prune failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (took, writer.await.unwrap())
}
