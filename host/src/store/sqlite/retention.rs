//! Retention in the SQLite store (what it keeps: `store::retention`), and
//! the size of a run it is measured by (with the attachment bytes it is
//! the newest to refer to). Removing runs frees pages, and the bytes of
//! attachments no kept run refers to; an incremental vacuum gives them
//! back to the file system.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::attachments;
use crate::store::retention::{Pruned, Retention};

/// A run is live while it is running and its deadline has not passed.
const NOT_LIVE: &str = "NOT (status = 'running' AND deadline_at > ?1)";

/// Most runs removed (or measured) in one write transaction: a slice holds
/// the write lock for milliseconds, so the writer's batches (and other
/// processes') go on between slices, never waiting long on retention.
const SLICE: usize = 256;
/// The least pause between two slices (see `yield_to_writers`).
const PAUSE: Duration = Duration::from_millis(5);
/// Most free pages given back to the file system by one step, and the
/// time a step aims to hold the write lock: a step's pages are halved or
/// doubled to stay near it. A page's cost varies a thousandfold: a free
/// page at the end of the file is dropped, a page in use there is moved
/// into a free one found through the free list.
const VACUUM_STEP: i64 = 512;
const VACUUM_HOLD: Duration = Duration::from_millis(10);
/// Free pages left after each slice; the rest go back to the file system
/// before the next slice. Every page a vacuum moves searches the free
/// list's trunk pages, so its cost grows with the list: vacuuming only
/// after the last slice of a 900,000-run prune (700,000 free pages: a
/// trunk chain longer than SQLite's page cache, re-read for every page
/// moved) made steps of 1–8 pages hold writers up 130–240 ms. Kept to a
/// trunk page's worth, the list stays in the cache and a step stays short.
const FREE_KEPT: i64 = 1024;
/// The write-ahead log's length (frames: pages written) past which a pass
/// rewinds it (`bound_log`): 16 MB with 4 KiB pages.
const REWIND_AT: i64 = 4096;
/// The longest the rewind waits for other connections (and so holds their
/// writes up) before it leaves the rewind to a later step.
const REWIND_WAIT: Duration = Duration::from_millis(20);

/// Applies `retention` at `now` in slices: what to remove is decided in a
/// read transaction (which takes no lock from writers), then removed
/// `SLICE` runs per write transaction. `stop` is asked between slices: a
/// pass stopped early keeps what it did, and the next finishes the job.
pub fn prune(conn: &mut Connection, retention: &Retention, now: i64) -> rusqlite::Result<Pruned> {
    prune_until(conn, retention, now, &|| false)
}

/// `prune`, asking `stop` between slices.
pub fn prune_until(
    conn: &mut Connection,
    retention: &Retention,
    now: i64,
    stop: &dyn Fn() -> bool,
) -> rusqlite::Result<Pruned> {
    // The pass checkpoints itself, before each write (`bound_log`), not in
    // its commits.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    measure_interrupted(conn, now, stop)?;
    let (cut, older_than) = cut(conn, retention, now)?;
    let mut removed = 0u64;
    let mut removed_bytes = 0u64;
    // One rule at a time, each walking an index in order, so a slice's
    // lookup reads its slice and no more (an `OR` of the two made SQLite
    // gather and sort every match, for every slice, under the lock).
    let by_count_or_size = "seq <= ?2 ORDER BY seq";
    let by_age = "started_at < ?2 ORDER BY started_at";
    for (rule, bound) in [(by_count_or_size, cut), (by_age, older_than)] {
        if bound == i64::MIN {
            continue;
        }
        let (n, bytes) = remove_slices(conn, rule, bound, now, stop)?;
        removed += n;
        removed_bytes += bytes;
    }
    bound_log(conn)?;
    let began = Instant::now();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let freed = attachments::free(&tx)?;
    super::responses::prune(&tx, now)?;
    let committing = Instant::now();
    tx.commit()?;
    trace_step("attachments and cache", began, committing, 0);
    removed_bytes += freed;
    // What is kept, read without holding up any writer.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let attachment_bytes = attachments::total(&tx)?;
    let (kept, kept_bytes): (i64, i64) = tx.query_row(
        "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM runs",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    tx.commit()?;
    if removed > 0 || freed > 0 {
        Vacuum::default().down_to(conn, 0, stop)?;
        bound_log(conn)?;
    }
    Ok(Pruned {
        removed,
        removed_bytes,
        kept: u64::try_from(kept).unwrap_or(0),
        kept_bytes: u64::try_from(kept_bytes).unwrap_or(0) + attachment_bytes,
    })
}

/// Removes the runs `rule` (a condition on `?2` = `bound`, then an
/// order) finds, but live ones, `SLICE` per write transaction; how many
/// and their bytes.
fn remove_slices(
    conn: &mut Connection,
    rule: &str,
    bound: i64,
    now: i64,
    stop: &dyn Fn() -> bool,
) -> rusqlite::Result<(u64, u64)> {
    let (mut removed, mut removed_bytes) = (0u64, 0u64);
    let find = format!("SELECT seq, bytes FROM runs WHERE {NOT_LIVE} AND {rule} LIMIT {SLICE}");
    let mut vacuum = Vacuum::default();
    while !stop() {
        bound_log(conn)?;
        let began = Instant::now();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let slice: Vec<(i64, i64)> = tx
            .prepare_cached(&find)?
            .query_map(params![now, bound], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for (seq, bytes) in &slice {
            removed_bytes += u64::try_from(*bytes).unwrap_or(0);
            tx.prepare_cached("DELETE FROM calls WHERE run_seq = ?1")?
                .execute([seq])?;
            tx.prepare_cached("DELETE FROM feedback WHERE run_seq = ?1")?
                .execute([seq])?;
            tx.prepare_cached("DELETE FROM experiment_runs WHERE run_seq = ?1")?
                .execute([seq])?;
            tx.prepare_cached("DELETE FROM shadow_judgements WHERE run_seq = ?1")?
                .execute([seq])?;
            tx.prepare_cached("DELETE FROM runs WHERE seq = ?1")?
                .execute([seq])?;
            attachments::unlink(&tx, *seq)?;
        }
        let committing = Instant::now();
        tx.commit()?;
        trace_step("slice", began, committing, slice.len());
        removed += slice.len() as u64;
        if slice.len() < SLICE {
            break;
        }
        yield_to_writers(began.elapsed());
        vacuum.down_to(conn, FREE_KEPT, stop)?;
    }
    Ok((removed, removed_bytes))
}

/// Leaves the write lock free a while after a slice — as long as the
/// slice held it, at least `PAUSE` — so writers waiting on it (whose busy
/// handlers retry after 1, 2, 5, 10… ms) get in: SQLite's lock is not
/// fair, and slices taken back to back would starve them.
fn yield_to_writers(held: Duration) {
    std::thread::sleep(held.max(PAUSE));
}

/// Interrupted runs never reached the end that measures a run: measured
/// now, a slice at a time (found through the index of running runs).
fn measure_interrupted(
    conn: &mut Connection,
    now: i64,
    stop: &dyn Fn() -> bool,
) -> rusqlite::Result<()> {
    while !stop() {
        bound_log(conn)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let unmeasured: Vec<String> = tx
            .prepare_cached(&format!(
                "SELECT id FROM runs WHERE status = 'running' AND deadline_at <= ?1 AND bytes = 0
                 LIMIT {SLICE}"
            ))?
            .query_map([now], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        for id in &unmeasured {
            measure(&tx, id)?;
        }
        tx.commit()?;
        // An empty run measures 0 bytes and would be found again: one pass.
        if unmeasured.len() < SLICE {
            break;
        }
        yield_to_writers(Duration::ZERO);
    }
    Ok(())
}

/// Which runs retention removes, decided in a read transaction: those at
/// or below `seq` (past `max_runs` newest, or past `max_bytes` counting
/// from the newest), and those started before the second value (`max_age`).
/// Live runs are never removed, though they count.
fn cut(conn: &mut Connection, retention: &Retention, now: i64) -> rusqlite::Result<(i64, i64)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let past_count: Option<i64> = tx
        .query_row(
            "SELECT seq FROM runs ORDER BY seq DESC LIMIT 1 OFFSET ?1",
            [i64::try_from(retention.max_runs).unwrap_or(i64::MAX)],
            |row| row.get(0),
        )
        .optional()?;
    // Newest first until the sizes pass the bound: the walk stops there,
    // so it costs what is kept, not the whole history.
    let mut past_size = None;
    if retention.max_bytes < u64::MAX {
        let mut statement = tx.prepare(&format!(
            "SELECT r.seq, r.bytes + COALESCE(o.size, 0)
             FROM runs r LEFT JOIN ({owned}) o ON o.seq = r.seq
             ORDER BY r.seq DESC",
            owned = attachments::OWNED_BYTES
        ))?;
        let mut rows = statement.query([])?;
        let mut newer = 0u64;
        while let Some(row) = rows.next()? {
            newer = newer.saturating_add(u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0));
            if newer > retention.max_bytes {
                past_size = Some(row.get::<_, i64>(0)?);
                break;
            }
        }
    }
    drop(tx);
    let cut = past_count.max(past_size).unwrap_or(i64::MIN);
    let older_than = retention.max_age.map_or(i64::MIN, |age| {
        now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
    });
    Ok((cut, older_than))
}

/// Returns freed pages to the file system, a step per write (each its
/// own short transaction, sized to hold the lock about `VACUUM_HOLD`); the
/// file shrinks when a checkpoint has copied the WAL back.
struct Vacuum {
    /// The next step's pages, adapted to the time steps take.
    pages: i64,
}

impl Default for Vacuum {
    fn default() -> Self {
        Self { pages: 8 }
    }
}

impl Vacuum {
    /// Steps until at most `kept` pages are free (or none are given back:
    /// a store made without incremental auto-vacuum keeps its free pages).
    fn down_to(
        &mut self,
        conn: &mut Connection,
        kept: i64,
        stop: &dyn Fn() -> bool,
    ) -> rusqlite::Result<()> {
        let mut before = i64::MAX;
        while !stop() {
            let free: i64 = conn.query_row("PRAGMA freelist_count", [], |row| row.get(0))?;
            if free <= kept || free >= before {
                return Ok(());
            }
            before = free;
            let pages = self.pages.min(free - kept);
            bound_log(conn)?;
            let began = Instant::now();
            // A pragma takes no bound values (`pages` is a number), and
            // is not cached: its many sizes would push out what is.
            let mut statement = conn.prepare(&format!("PRAGMA incremental_vacuum({pages})"))?;
            let mut steps = statement.query([])?;
            while steps.next()?.is_some() {}
            drop(steps);
            drop(statement);
            let held = began.elapsed();
            trace_step(
                "vacuum",
                began,
                Instant::now(),
                usize::try_from(pages).unwrap_or(0),
            );
            self.pages = if held > VACUUM_HOLD {
                (self.pages / 2).max(1)
            } else if held < VACUUM_HOLD / 2 {
                (self.pages * 2).min(VACUUM_STEP)
            } else {
                self.pages
            };
            yield_to_writers(held);
        }
        Ok(())
    }
}

/// Copies the log back into the database without taking a lock (a
/// passive checkpoint, as SQLite's automatic one), and rewinds it once it
/// is past `REWIND_AT` frames. Without the rewind the log of a long pass
/// only grows (to gigabytes over a million runs): SQLite starts it over
/// only at a write that begins when every frame is copied back, and other
/// connections' writes land between a passive checkpoint and the pass's
/// next write. A `RESTART` checkpoint holds writers off while it copies
/// the few frames written since the passive one and waits for readers
/// (`REWIND_WAIT` at most, else a later step rewinds), so the next write
/// starts the log over.
fn bound_log(conn: &mut Connection) -> rusqlite::Result<()> {
    let began = Instant::now();
    let log: i64 = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get(1))?;
    trace_step("checkpoint", began, began, 0);
    if log <= REWIND_AT {
        return Ok(());
    }
    let began = Instant::now();
    conn.busy_timeout(REWIND_WAIT)?;
    let busy = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| {
        row.get::<_, i64>(0)
    });
    super::schema::wait_for_locks(conn)?;
    let rewound = match busy {
        Ok(busy) => busy == 0,
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => false,
        Err(e) => return Err(e),
    };
    tracing::trace!(
        log,
        rewound,
        held_ms = began.elapsed().as_secs_f64() * 1e3,
        "retention rewinds the log"
    );
    Ok(())
}

/// What a step of a pass took (trace level: `CHORUS_LOG=chorus::store=trace`
/// shows which step a writer waited on): from `began` (its lock asked
/// for) to now, of which the commit from `committing`.
fn trace_step(step: &str, began: Instant, committing: Instant, runs: usize) {
    tracing::trace!(
        step,
        runs,
        held_ms = began.elapsed().as_secs_f64() * 1e3,
        commit_ms = committing.elapsed().as_secs_f64() * 1e3,
        "retention step"
    );
}

/// Sets a run's size: its own text and its calls'.
pub fn measure(tx: &Transaction<'_>, run_id: &str) -> rusqlite::Result<()> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE runs SET bytes =
                 octet_length(prompt) + octet_length(options) + octet_length(notes)
                 + coalesce(octet_length(plan), 0) + coalesce(octet_length(summary), 0)
                 + coalesce(octet_length(answer), 0) + coalesce(octet_length(details), 0)
                 + coalesce(octet_length(error), 0) + {calls}
             WHERE id = ?1",
            calls = calls_bytes(),
        )
    });
    tx.prepare_cached(&SQL)?.execute([run_id])?;
    Ok(())
}

/// The SQL, in a statement on `runs`, for the bytes of the run's calls:
/// their requests, replies and errors, wherever the texts are kept.
pub fn calls_bytes() -> &'static str {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "coalesce((SELECT SUM({request} + {reply} + coalesce(octet_length(error_message), 0))
                       FROM calls WHERE run_seq = runs.seq), 0)",
            request = super::texts::bytes("request"),
            reply = super::texts::bytes("reply"),
        )
    });
    &SQL
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20 finished runs of about 256 KiB each, straight into the tables.
    fn filled(path: &std::path::Path) -> Connection {
        let conn = crate::store::sqlite::schema::open(path).unwrap();
        for i in 0..20 {
            conn.execute(
                "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options, bytes)
                 VALUES (?1, 'ask', 'done', ?2, 0, ?3, '{}', 262144)",
                params![format!("run-{i}"), i, "x".repeat(256 * 1024)],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn a_pass_stopped_between_slices_keeps_its_slices_and_the_next_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.sqlite3");
        let mut conn = crate::store::sqlite::schema::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for i in 0..600 {
            tx.execute(
                "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options, bytes)
                 VALUES (?1, 'ask', 'done', ?2, 0, 'q', '{}', 1)",
                params![format!("run-{i}"), i],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        let retention = Retention {
            max_runs: 1,
            max_age: None,
            max_bytes: u64::MAX,
        };
        // Asked before the interrupted runs, then before each slice: the
        // third ask stops the pass after one slice.
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() >= 3
        };
        let first = prune_until(&mut conn, &retention, 0, &stop).unwrap();
        assert_eq!(
            (first.removed, first.kept),
            (SLICE as u64, 600 - SLICE as u64)
        );
        let oldest: i64 = conn
            .query_row("SELECT MIN(started_at) FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(oldest, SLICE as i64, "the oldest went first");
        let rest = prune(&mut conn, &retention, 0).unwrap();
        assert_eq!((rest.removed, rest.kept), (599 - SLICE as u64, 1));
    }

    #[test]
    fn pruning_gives_the_space_back_to_the_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.sqlite3");
        let mut conn = filled(&path);
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        assert!(before > 20 * 256 * 1024, "{before}");
        let retention = Retention {
            max_runs: 1,
            max_age: None,
            max_bytes: u64::MAX,
        };
        let pruned = prune(&mut conn, &retention, 0).unwrap();
        assert_eq!((pruned.removed, pruned.kept), (19, 1));
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(
            after < before / 10,
            "the file went from {before} to {after} bytes"
        );
    }
}
