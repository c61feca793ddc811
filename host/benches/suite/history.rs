//! The `history` scenario (`cargo bench --bench suite -- history`): what a
//! kept history costs. A synthetic history of N runs — each with two calls,
//! every tenth a follow-up of the one before — is written straight into a
//! SQLite store's tables (as `chorus serve` would have left them after a
//! clean exit: no write-ahead log), and into a PostgreSQL database
//! (`history_pg.rs`). Then, at each N:
//! - spawn → `initialize` of `chorus serve` on that store (plugin cache
//!   warmed by `chorus check`, best of 3), against the same with an empty
//!   store;
//! - reads through the store's API, p95 of 50 (`reads`);
//! - `chorus runs` and `chorus runs show PREFIX` as a person types them
//!   (wall time of the process, best of 3);
//! - `chorus runs prune --max-runs N/10` while a writer commits a small
//!   transaction every 5 ms: the prune's time, the writer's longest wait,
//!   and the store's size before and after.
//!
//! N = 10,000 and 1,000,000 (`CHORUS_BENCH_QUICK=1`: 10,000 only;
//! `CHORUS_BENCH_HISTORY_SIZES=10000,1000000` to choose). Backends:
//! `CHORUS_BENCH_HISTORY_BACKENDS=sqlite,postgres` (both by default;
//! PostgreSQL needs Debian's server binaries, else it is skipped, said).
//! `CHORUS_BENCH_PRUNE_LOG=FILE`: the prune's trace log (each slice's
//! timings) goes to FILE, and every wait of the writer over 20 ms is
//! printed with its time and how much of it was spent waiting for a lock,
//! to see which step of the prune held it up.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use chorus::store::{Cursor, Query, Retention, Store};
use rusqlite::{Connection, params};

use super::measure::percentile;
use super::server;

/// The sizes of history measured.
pub fn sizes(quick: bool) -> Vec<usize> {
    if let Ok(list) = std::env::var("CHORUS_BENCH_HISTORY_SIZES") {
        return list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("CHORUS_BENCH_HISTORY_SIZES: numbers")
            })
            .collect();
    }
    if quick {
        vec![10_000]
    } else {
        vec![10_000, 1_000_000]
    }
}

/// Whether `backend` (`sqlite`, `postgres`) is to be measured.
fn wanted(backend: &str) -> bool {
    std::env::var("CHORUS_BENCH_HISTORY_BACKENDS")
        .map_or(true, |list| list.split(',').any(|b| b.trim() == backend))
}

/// What `history` prints: a markdown table per backend, one row per size.
pub async fn run(binary: &Path, quick: bool) -> String {
    let mut out = String::new();
    if wanted("sqlite") {
        out += "SQLite\n\n";
        out += &sqlite(binary, quick).await;
    }
    if wanted("postgres") {
        out += "\nPostgreSQL\n\n";
        out += &super::history_pg::run(binary, quick).await;
    }
    out
}

/// The table's head (the backends' tables have the same columns).
pub const HEAD: &str = "| runs kept | start (empty store) | start | first page p95 | \
    page for a client, mid-history p95 | show by id p95 | by prefix p95 | chain p95 | \
    `chorus runs` | `chorus runs show` | prune 90% | writer's longest wait | \
    writes that waited > 100 ms | store before → after |\n\
    | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";

/// The writes a writer made during a prune: how many, how many waited
/// over 100 ms, the longest wait.
#[derive(Default)]
pub struct Writes {
    pub all: usize,
    pub over: usize,
    pub longest: Duration,
}

impl Writes {
    pub fn add(&mut self, waited: Duration) {
        self.all += 1;
        self.over += usize::from(waited > Duration::from_millis(100));
        self.longest = self.longest.max(waited);
    }
}

/// One row of the table.
pub struct Row {
    pub n: usize,
    pub empty: Duration,
    pub start: Duration,
    pub reads: Reads,
    pub listed: Duration,
    pub shown: Duration,
    pub pruned: Duration,
    pub writes: Writes,
    pub before: u64,
    pub after: u64,
}

impl Row {
    pub fn line(&self) -> String {
        let r = &self.reads;
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} of {} | {} → {} |\n",
            self.n,
            ms(self.empty),
            ms(self.start),
            ms(r.page),
            ms(r.client_page),
            ms(r.show),
            ms(r.prefix),
            ms(r.chain),
            ms(self.listed),
            ms(self.shown),
            ms(self.pruned),
            ms(self.writes.longest),
            self.writes.over,
            self.writes.all,
            mb(self.before),
            mb(self.after),
        )
    }
}

async fn sqlite(binary: &Path, quick: bool) -> String {
    let provider = server::provider().await;
    let cache = tempfile::tempdir().unwrap();
    let mut out = String::from(HEAD);
    for n in sizes(quick) {
        let dir = tempfile::tempdir().unwrap();
        let config = server::config(&provider.url, dir.path(), server::Flavor::Full);
        keep_everything(&config, None);
        let store = dir.path().join("store/runs.sqlite3");
        std::fs::create_dir_all(store.parent().unwrap()).unwrap();
        // The empty store first (made by a start), then the history.
        let empty = best_start(binary, &config, cache.path()).await;
        eprintln!("  SQLite: writing {n} runs…");
        let written = Instant::now();
        fill(&store, n);
        eprintln!("  written in {:.1} s", written.elapsed().as_secs_f64());
        let start = best_start(binary, &config, cache.path()).await;
        let reads = reads(&Store::open_at(&store, keep_all()).unwrap(), n);
        let listed = best_cli(binary, &config, cache.path(), &["runs"]);
        let shown = best_cli(
            binary,
            &config,
            cache.path(),
            &["runs", "show", &run_id(n / 2)[..12]],
        );
        let before = size(&store);
        let (pruned, writes) = prune_while_writing(binary, &config, cache.path(), &store, n);
        let after = size(&store);
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

/// Retention of the server left at its defaults would prune the synthetic
/// history a few seconds after a start: keep everything (in the database
/// at `url` when given, instead of the SQLite file).
pub fn keep_everything(config: &Path, url: Option<&str>) {
    let mut text = std::fs::read_to_string(config).unwrap();
    if let Some(url) = url {
        let from = text.find("[store]\n").unwrap() + "[store]\n".len();
        let to = from + text[from..].find('\n').unwrap() + 1;
        assert!(text[from..to].starts_with("path = "), "{}", &text[from..to]);
        text.replace_range(from..to, &format!("url = \"{url}\"\n"));
    }
    let text = text.replace(
        "[store]\n",
        "[store]\nmax_runs = 100000000\nmax_bytes = 1000000000000\n",
    );
    std::fs::write(config, text).unwrap();
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

pub fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn size(store: &Path) -> u64 {
    let wal = store.with_extension("sqlite3-wal");
    std::fs::metadata(store).map_or(0, |m| m.len()) + std::fs::metadata(wal).map_or(0, |m| m.len())
}

pub fn run_id(i: usize) -> String {
    format!("{:08x}-{:04x}-7000-8000-{:012x}", i, i % 0xffff, i)
}

/// `n` finished runs of about 2 KB, with two calls each, straight into the
/// tables of the store at `store` (made by `Store::open_at` first).
fn fill(store: &Path, n: usize) {
    drop(Store::open_at(store, keep_all()).unwrap());
    let mut conn = Connection::open(store).unwrap();
    conn.pragma_update(None, "synchronous", "OFF").unwrap();
    let answer = "a".repeat(600);
    let request = format!(
        "{{\"messages\":[{{\"role\":\"user\",\"content\":\"{}\"}}]}}",
        "q".repeat(300)
    );
    let started = 1_700_000_000_000i64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(20_000) {
        let tx = conn.transaction().unwrap();
        {
            let mut run = tx
                .prepare(
                    "INSERT INTO runs (seq, id, pipeline, status, started_at, deadline_at, finished_at,
                                       prompt, options, follow_up_of, kind, summary, answer, elapsed_ms,
                                       cost_usd, client, bytes)
                     VALUES (?1, ?2, 'ask', 'done', ?3, ?3, ?3, ?4, '{}', ?5, 'synthesis',
                             'synthesis of 2 of 2', ?6, 40, 0.002, 'local:bench', 2000)",
                )
                .unwrap();
            let mut call = tx
                .prepare(
                    "INSERT INTO calls (run_seq, id, stage, label, model, status, started_at, request,
                                        reply, latency_ms, attempts, prompt_tokens, completion_tokens, cost_usd)
                     VALUES (?1, ?2, 'fan-out', 'm', 'm1', 'ok', ?3, ?4, ?5, 20, 1, 100, 150, 0.001)",
                )
                .unwrap();
            for &i in chunk {
                let seq = i as i64 + 1;
                let at = started + i as i64 * 1000;
                let follows = (i % 10 != 0).then(|| run_id(i - 1));
                run.execute(params![
                    seq,
                    run_id(i),
                    at,
                    format!("question {i}: how does a long history cost?"),
                    follows,
                    answer
                ])
                .unwrap();
                for id in 0..2 {
                    call.execute(params![seq, id, at, request, answer]).unwrap();
                }
            }
        }
        tx.commit().unwrap();
    }
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

pub fn keep_all() -> Retention {
    Retention {
        max_runs: u64::MAX,
        max_age: None,
        max_bytes: u64::MAX,
    }
}

pub async fn best_start(binary: &Path, config: &Path, cache: &Path) -> Duration {
    // A warm plugin cache: `chorus check` compiles and caches every plugin
    // and waits for it, where a start leaves compiles to the background
    // (and would be gone before they end, its compiles competing with the
    // starts measured).
    let _ = cli(binary, config, cache, &["check"]).status();
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let (server, took) = server::Server::start(binary, config, cache).await.unwrap();
        drop(server);
        best = best.min(took);
        // The killed child's store lock gone before the next.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    best
}

/// The reads of a kept history, each p95 of 50, in this process.
pub struct Reads {
    /// The first page of runs: `chorus runs`, the viewer's `/`.
    pub page: Duration,
    /// A page of one client's runs from the middle of the history: what
    /// `resources/list` reads for a client following a cursor (50 runs).
    pub client_page: Duration,
    /// A run by its whole id, with its calls: `/runs/ID`, `chorus://runs/ID`.
    pub show: Duration,
    /// A run by a unique prefix of its id: `chorus runs show`.
    pub prefix: Duration,
    /// A follow-up's chain of ten exchanges.
    pub chain: Duration,
}

/// p95 of 50 of each read through `store`, whose runs are `run_id(0..n)`.
pub fn reads(store: &Store, n: usize) -> Reads {
    let time = |read: &dyn Fn(usize)| {
        let mut samples: Vec<Duration> = (0..50)
            .map(|k| {
                let started = Instant::now();
                read(k);
                started.elapsed()
            })
            .collect();
        samples.sort();
        percentile(&samples, 95)
    };
    let page = time(&|_| {
        let page = store.list(&Query::default()).unwrap();
        assert_eq!(page.runs.len(), 20);
    });
    let client_page = time(&|k| {
        let before: Cursor = ((k * 7919) % (n / 2) + n / 4).to_string().parse().unwrap();
        let page = store
            .list(&Query {
                before: Some(before),
                client: Some("local:bench".into()),
                limit: 50,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(page.runs.len(), 50);
    });
    let show = time(&|k| {
        let id = run_id((k * 7919) % n);
        let chorus::store::Lookup::Found(run) = store.find(&id, false).unwrap() else {
            panic!("run {id} not found");
        };
        assert_eq!(run.calls.len(), 2);
    });
    let prefix = time(&|k| {
        let id = run_id((k * 7919) % n);
        assert!(matches!(
            store.find(&id[..12], false).unwrap(),
            chorus::store::Lookup::Found(_)
        ));
    });
    let chain = time(&|k| {
        // The last of a chain of ten.
        let id = run_id(((k * 7919) % (n / 10)) * 10 + 9);
        assert_eq!(store.exchanges(&id, 10).unwrap().len(), 10);
    });
    Reads {
        page,
        client_page,
        show,
        prefix,
        chain,
    }
}

pub fn cli(binary: &Path, config: &Path, cache: &Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(binary);
    command
        .args(args)
        .arg("--config")
        .arg(config)
        .env("XDG_CACHE_HOME", cache)
        .env("XDG_DATA_HOME", cache)
        .env("BENCH_KEY", "bench")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

pub fn best_cli(binary: &Path, config: &Path, cache: &Path, args: &[&str]) -> Duration {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            let status = cli(binary, config, cache, args).status().unwrap();
            assert!(status.success(), "chorus {args:?} failed");
            started.elapsed()
        })
        .min()
        .unwrap()
}

/// `chorus runs prune` of 90% of the runs while this process commits one
/// small transaction every 5 ms on the same file: the prune's time and the
/// longest any of those commits waited.
fn prune_while_writing(
    binary: &Path,
    config: &Path,
    cache: &Path,
    store: &Path,
    n: usize,
) -> (Duration, Writes) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let log = std::env::var_os("CHORUS_BENCH_PRUNE_LOG");
    let writer = {
        let (store, stop, diagnose) = (store.to_owned(), stop.clone(), log.is_some());
        std::thread::spawn(move || {
            let mut conn = Connection::open(&store).unwrap();
            // Waiting for locks as chorus's connections do (a look every
            // millisecond, `wait_for_locks`), counting the looks.
            let looks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
            let counted = looks.clone();
            conn.busy_handler(Some(move |tries: i32| {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                tries < 5000
            }))
            .unwrap();
            // As chorus's writer: no checkpoint in a commit (the
            // checkpoint's own work would count as a wait here), and no
            // fsync per commit (under the prune's gigabytes of log, one
            // took 0.6 s).
            conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
            conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
            conn.execute_batch("CREATE TABLE IF NOT EXISTS bench_beats (at INTEGER)")
                .unwrap();
            let mut writes = Writes::default();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                looks.store(0, std::sync::atomic::Ordering::Relaxed);
                let (at, started) = (SystemTime::now(), Instant::now());
                // A write refused after the 5 s wait counts as that wait.
                let _ = conn.execute("INSERT INTO bench_beats (at) VALUES (1)", []);
                let waited = started.elapsed();
                writes.add(waited);
                if diagnose && waited > Duration::from_millis(20) {
                    let since = at.duration_since(SystemTime::UNIX_EPOCH).unwrap();
                    eprintln!(
                        "  writer waited {} from {}.{:06} (unix s), {} lock looks of 1 ms",
                        ms(waited),
                        since.as_secs(),
                        since.subsec_micros(),
                        looks.load(std::sync::atomic::Ordering::Relaxed)
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = conn.execute_batch("DROP TABLE bench_beats");
            writes
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let keep = (n / 10).to_string();
    let started = Instant::now();
    let mut prune = cli(
        binary,
        config,
        cache,
        &["runs", "prune", "--max-runs", &keep],
    );
    if let Some(log) = &log {
        prune
            .env("CHORUS_LOG", "chorus::store=trace")
            .stderr(std::fs::File::create(log).unwrap());
    }
    let status = prune.status().unwrap();
    let took = started.elapsed();
    assert!(status.success(), "chorus runs prune failed");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (took, writer.join().unwrap())
}
