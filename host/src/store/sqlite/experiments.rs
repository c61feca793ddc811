//! `store::experiments` in the SQLite file: a row per run of an experiment,
//! keyed by the run's `seq` (written in the transaction of the run's first
//! row, removed with it by retention), and a row of decisions per
//! experiment, written on the budgets' connection so every process sharing
//! the file sees it at once.

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::Sqlite;
use crate::record::Assignment;
use crate::store::StoreError;
use crate::store::experiments::{
    Decisions, Experiments, Judged, Judgement, Outcome, P95_RUNS, Point, ShadowTally, Tally, p95_of,
};

/// Version 16: experiments.
pub const MIGRATION: &str = r#"
CREATE TABLE experiment_runs (
    run_seq      INTEGER PRIMARY KEY,
    experiment   TEXT NOT NULL,
    variant      TEXT NOT NULL,
    conversation TEXT                       -- a hash tying a conversation's turns
);
CREATE INDEX experiment_runs_by_experiment ON experiment_runs (experiment, run_seq);
CREATE INDEX experiment_runs_by_variant ON experiment_runs (experiment, variant, run_seq);
CREATE INDEX experiment_runs_by_conversation ON experiment_runs (experiment, conversation, run_seq);

CREATE TABLE experiment_decisions (
    name      TEXT PRIMARY KEY,
    decisions TEXT NOT NULL,                -- JSON: store::experiments::Decisions
    at        INTEGER NOT NULL              -- unix ms
) WITHOUT ROWID;

CREATE TABLE shadow_judgements (
    experiment       TEXT NOT NULL,
    run_seq          INTEGER NOT NULL,
    at               INTEGER NOT NULL,      -- unix ms
    outcome          TEXT NOT NULL,         -- win, loss, tie (for the candidate)
    baseline_cost    REAL,
    candidate_cost   REAL,
    judge_cost       REAL NOT NULL,
    candidate_answer TEXT NOT NULL,
    said             TEXT NOT NULL,
    PRIMARY KEY (experiment, run_seq)
);
CREATE INDEX shadow_judgements_by_time ON shadow_judgements (experiment, at);
CREATE INDEX shadow_judgements_by_run ON shadow_judgements (run_seq);
"#;

/// Records which variant the run just inserted as `seq` serves.
pub(super) fn assign(
    tx: &Transaction<'_>,
    seq: i64,
    assignment: &Assignment,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO experiment_runs (run_seq, experiment, variant, conversation)
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        seq,
        assignment.experiment,
        assignment.variant,
        assignment.conversation
    ])?;
    Ok(())
}

impl Experiments for Sqlite {
    fn assignment_of(&self, run_id: &str) -> Result<Option<Assignment>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT e.experiment, e.variant, e.conversation
                 FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq WHERE r.id = ?1",
            )?
            .query_row([run_id], |row| {
                Ok(Assignment {
                    experiment: row.get(0)?,
                    variant: row.get(1)?,
                    conversation: row.get(2)?,
                })
            })
            .optional()
        })
    }

    fn variant_of_conversation(
        &self,
        experiment: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT variant FROM experiment_runs WHERE experiment = ?1 AND conversation = ?2
                 ORDER BY run_seq DESC LIMIT 1",
            )?
            .query_row([experiment, key], |row| row.get(0))
            .optional()
        })
    }

    fn tallies(&self, experiment: &str, metric: Option<&str>) -> Result<Vec<Tally>, StoreError> {
        self.read(|conn| tallies(conn, experiment, metric))
    }

    fn timeline(
        &self,
        experiment: &str,
        metric: Option<&str>,
        most: usize,
    ) -> Result<Vec<Point>, StoreError> {
        self.read(|conn| {
            let mut points: Vec<Point> = conn
                .prepare_cached(
                    "SELECT e.variant, r.started_at,
                        (SELECT AVG(f.value) FROM feedback f
                         WHERE f.run_seq = e.run_seq AND f.metric = ?2)
                     FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq
                     WHERE e.experiment = ?1 ORDER BY e.run_seq DESC LIMIT ?3",
                )?
                .query_map(
                    params![experiment, metric, i64::try_from(most).unwrap_or(i64::MAX)],
                    |row| {
                        Ok(Point {
                            variant: row.get(0)?,
                            at: row.get(1)?,
                            value: row.get(2)?,
                        })
                    },
                )?
                .collect::<Result<_, _>>()?;
            points.reverse();
            Ok(points)
        })
    }

    fn decisions(&self, experiment: &str) -> Result<Option<Decisions>, StoreError> {
        let text: Option<String> = self.read(|conn| {
            conn.prepare_cached("SELECT decisions FROM experiment_decisions WHERE name = ?1")?
                .query_row([experiment], |row| row.get(0))
                .optional()
        })?;
        Ok(text.and_then(|text| serde_json::from_str(&text).ok()))
    }

    fn decide(&self, experiment: &str, decisions: &Decisions) -> Result<Decisions, StoreError> {
        self.spending(|conn| decide(conn, experiment, decisions))
    }

    fn judged(&self, judgement: &Judgement) -> Result<bool, StoreError> {
        self.spending(|conn| {
            let inserted = conn.execute(
                "INSERT OR REPLACE INTO shadow_judgements
                    (experiment, run_seq, at, outcome, baseline_cost, candidate_cost, judge_cost,
                     candidate_answer, said)
                 SELECT ?1, seq, ?3, ?4, ?5, ?6, ?7, ?8, ?9 FROM runs WHERE id = ?2",
                params![
                    judgement.experiment,
                    judgement.run_id,
                    judgement.at,
                    judgement.outcome.as_str(),
                    judgement.baseline_cost_usd,
                    judgement.candidate_cost_usd,
                    judgement.judge_cost_usd,
                    judgement.candidate_answer,
                    judgement.said,
                ],
            )?;
            Ok(inserted > 0)
        })
    }

    fn decisive_judgements(&self, since: i64, most: usize) -> Result<Vec<Judged>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT r.id, j.experiment, r.prompt, r.answer, j.candidate_answer, j.outcome
                 FROM shadow_judgements j JOIN runs r ON r.seq = j.run_seq
                 WHERE j.at >= ?1 AND j.outcome <> 'tie' AND r.answer IS NOT NULL
                 ORDER BY j.at DESC LIMIT ?2",
            )?
            .query_map(
                params![since, i64::try_from(most).unwrap_or(i64::MAX)],
                |row| {
                    Ok(Judged {
                        run_id: row.get(0)?,
                        experiment: row.get(1)?,
                        prompt: row.get(2)?,
                        answer: row.get(3)?,
                        candidate_answer: row.get(4)?,
                        outcome: Outcome::parse(&row.get::<_, String>(5)?).unwrap_or(Outcome::Tie),
                    })
                },
            )?
            .collect()
        })
    }

    fn shadow_tally(&self, experiment: &str, since: i64) -> Result<ShadowTally, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT
                    COALESCE(SUM(outcome = 'win'), 0), COALESCE(SUM(outcome = 'loss'), 0),
                    COALESCE(SUM(outcome = 'tie'), 0),
                    COALESCE(SUM(baseline_cost), 0), COALESCE(SUM(candidate_cost), 0),
                    COALESCE(SUM(judge_cost), 0),
                    COALESCE(SUM(CASE WHEN at >= ?2
                        THEN COALESCE(candidate_cost, 0) + judge_cost END), 0)
                 FROM shadow_judgements WHERE experiment = ?1",
            )?
            .query_row(params![experiment, since], |row| {
                let count = |i: usize| row.get::<_, i64>(i).map(|n| u64::try_from(n).unwrap_or(0));
                Ok(ShadowTally {
                    wins: count(0)?,
                    losses: count(1)?,
                    ties: count(2)?,
                    baseline_cost_usd: row.get(3)?,
                    candidate_cost_usd: row.get(4)?,
                    judge_cost_usd: row.get(5)?,
                    spent_since_usd: row.get(6)?,
                })
            })
        })
    }
}

fn tallies(
    conn: &Connection,
    experiment: &str,
    metric: Option<&str>,
) -> rusqlite::Result<Vec<Tally>> {
    let mut tallies: Vec<Tally> = conn
        .prepare_cached(
            "SELECT e.variant,
                SUM(CASE WHEN r.status IN ('done', 'failed') THEN 1 ELSE 0 END),
                SUM(CASE WHEN r.status = 'failed' OR (r.status = 'done' AND r.kind = 'none')
                    THEN 1 ELSE 0 END),
                COALESCE(SUM(CASE WHEN r.status IN ('done', 'failed') THEN r.cost_usd END), 0)
             FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq
             WHERE e.experiment = ?1 GROUP BY e.variant ORDER BY e.variant",
        )?
        .query_map([experiment], |row| {
            Ok(Tally {
                variant: row.get(0)?,
                runs: u64::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                failed: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                cost_usd: row.get(3)?,
                ..Tally::default()
            })
        })?
        .collect::<Result<_, _>>()?;
    for tally in &mut tallies {
        tally.p95_ms = p95(conn, experiment, &tally.variant)?;
    }
    if let Some(metric) = metric {
        let mut rated = conn.prepare_cached(
            "SELECT variant, COUNT(*), SUM(v) FROM (
                SELECT e.variant AS variant, AVG(f.value) AS v
                FROM experiment_runs e JOIN feedback f ON f.run_seq = e.run_seq
                WHERE e.experiment = ?1 AND f.metric = ?2 GROUP BY e.run_seq
             ) GROUP BY variant",
        )?;
        let sums = rated.query_map([experiment, metric], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, f64>(2)?,
            ))
        })?;
        for sum in sums {
            let (variant, count, value_sum) = sum?;
            if let Some(tally) = tallies.iter_mut().find(|t| t.variant == variant) {
                tally.rated = u64::try_from(count).unwrap_or(0);
                tally.value_sum = value_sum;
            }
        }
    }
    Ok(tallies)
}

/// The 95th-percentile time of a variant's latest answered runs.
fn p95(conn: &Connection, experiment: &str, variant: &str) -> rusqlite::Result<Option<u64>> {
    let times: Vec<i64> = conn
        .prepare_cached(
            "SELECT r.elapsed_ms FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq
             WHERE e.experiment = ?1 AND e.variant = ?2 AND r.status = 'done'
               AND r.elapsed_ms IS NOT NULL
             ORDER BY e.run_seq DESC LIMIT ?3",
        )?
        .query_map(
            params![experiment, variant, i64::try_from(P95_RUNS).unwrap_or(0)],
            |row| row.get(0),
        )?
        .collect::<Result<_, _>>()?;
    Ok(p95_of(times))
}

fn decide(
    conn: &mut Connection,
    experiment: &str,
    decisions: &Decisions,
) -> rusqlite::Result<Decisions> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let kept: Option<String> = tx
        .query_row(
            "SELECT decisions FROM experiment_decisions WHERE name = ?1",
            [experiment],
            |row| row.get(0),
        )
        .optional()?;
    let merged = match kept.and_then(|text| serde_json::from_str::<Decisions>(&text).ok()) {
        Some(kept) => kept.merge(decisions),
        None => decisions.clone(),
    };
    let text = serde_json::to_string(&merged).unwrap_or_default();
    tx.execute(
        "INSERT INTO experiment_decisions (name, decisions, at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET decisions = excluded.decisions, at = excluded.at",
        params![experiment, text, crate::store::event::now_ms()],
    )?;
    tx.commit()?;
    Ok(merged)
}
