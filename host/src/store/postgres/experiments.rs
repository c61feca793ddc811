//! `store::experiments` in PostgreSQL: a row per run of an experiment
//! (written in the transaction of the run's first row, removed with it:
//! `ON DELETE CASCADE`) and a row of decisions per experiment, shared by
//! every instance — a restart continues an experiment, and instances
//! decide on the same numbers.

use tokio_postgres::{GenericClient, Transaction};

use super::{Failure, Postgres};
use crate::record::Assignment;
use crate::store::StoreError;
use crate::store::experiments::{
    Decisions, Experiments, Judged, Judgement, Outcome, P95_RUNS, Point, ShadowTally, Tally, p95_of,
};

/// Experiments.
pub const MIGRATION: &str = r#"
CREATE TABLE experiment_runs (
    run_seq      BIGINT PRIMARY KEY REFERENCES runs (seq) ON DELETE CASCADE,
    experiment   TEXT NOT NULL,
    variant      TEXT NOT NULL,
    conversation TEXT
);
CREATE INDEX experiment_runs_by_experiment ON experiment_runs (experiment, run_seq);
CREATE INDEX experiment_runs_by_variant ON experiment_runs (experiment, variant, run_seq);
CREATE INDEX experiment_runs_by_conversation ON experiment_runs (experiment, conversation, run_seq);

CREATE TABLE experiment_decisions (
    name      TEXT PRIMARY KEY,
    decisions TEXT NOT NULL,
    at        BIGINT NOT NULL
);

CREATE TABLE shadow_judgements (
    experiment       TEXT NOT NULL,
    run_seq          BIGINT NOT NULL REFERENCES runs (seq) ON DELETE CASCADE,
    at               BIGINT NOT NULL,
    outcome          TEXT NOT NULL,
    baseline_cost    DOUBLE PRECISION,
    candidate_cost   DOUBLE PRECISION,
    judge_cost       DOUBLE PRECISION NOT NULL,
    candidate_answer TEXT NOT NULL,
    said             TEXT NOT NULL,
    PRIMARY KEY (experiment, run_seq)
);
CREATE INDEX shadow_judgements_by_time ON shadow_judgements (experiment, at);
CREATE INDEX shadow_judgements_by_run ON shadow_judgements (run_seq);
"#;

/// Records which variant the run `run_id`, just inserted, serves.
pub(super) async fn assign(
    tx: &Transaction<'_>,
    run_id: &str,
    assignment: &Assignment,
) -> Result<(), Failure> {
    tx.execute(
        "INSERT INTO experiment_runs (run_seq, experiment, variant, conversation)
         SELECT seq, $2, $3, $4 FROM runs WHERE id = $1
         ON CONFLICT (run_seq) DO NOTHING",
        &[
            &run_id,
            &assignment.experiment,
            &assignment.variant,
            &assignment.conversation,
        ],
    )
    .await?;
    Ok(())
}

impl Experiments for Postgres {
    fn assignment_of(&self, run_id: &str) -> Result<Option<Assignment>, StoreError> {
        let id = run_id.to_owned();
        self.read(move |client| async move {
            let row = client
                .query_opt(
                    "SELECT e.experiment, e.variant, e.conversation
                     FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq WHERE r.id = $1",
                    &[&id],
                )
                .await?;
            Ok(row.map(|row| Assignment {
                experiment: row.get(0),
                variant: row.get(1),
                conversation: row.get(2),
            }))
        })
    }

    fn variant_of_conversation(
        &self,
        experiment: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        let (experiment, key) = (experiment.to_owned(), key.to_owned());
        self.read(move |client| async move {
            let row = client
                .query_opt(
                    "SELECT variant FROM experiment_runs WHERE experiment = $1 AND conversation = $2
                     ORDER BY run_seq DESC LIMIT 1",
                    &[&experiment, &key],
                )
                .await?;
            Ok(row.map(|row| row.get(0)))
        })
    }

    fn tallies(&self, experiment: &str, metric: Option<&str>) -> Result<Vec<Tally>, StoreError> {
        let (experiment, metric) = (experiment.to_owned(), metric.map(str::to_owned));
        self.read(
            move |client| async move { tallies(&**client, &experiment, metric.as_deref()).await },
        )
    }

    fn timeline(
        &self,
        experiment: &str,
        metric: Option<&str>,
        most: usize,
    ) -> Result<Vec<Point>, StoreError> {
        let (experiment, metric) = (experiment.to_owned(), metric.map(str::to_owned));
        let most = i64::try_from(most).unwrap_or(i64::MAX);
        self.read(move |client| async move {
            let rows = client
                .query(
                    "SELECT e.variant, r.started_at,
                        (SELECT AVG(f.value) FROM feedback f
                         WHERE f.run_seq = e.run_seq AND f.metric = $2)
                     FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq
                     WHERE e.experiment = $1 ORDER BY e.run_seq DESC LIMIT $3",
                    &[&experiment, &metric, &most],
                )
                .await?;
            let mut points: Vec<Point> = rows
                .iter()
                .map(|row| Point {
                    variant: row.get(0),
                    at: row.get(1),
                    value: row.get(2),
                })
                .collect();
            points.reverse();
            Ok(points)
        })
    }

    fn decisions(&self, experiment: &str) -> Result<Option<Decisions>, StoreError> {
        let experiment = experiment.to_owned();
        let text: Option<String> = self.read(move |client| async move {
            let row = client
                .query_opt(
                    "SELECT decisions FROM experiment_decisions WHERE name = $1",
                    &[&experiment],
                )
                .await?;
            Ok(row.map(|row| row.get(0)))
        })?;
        Ok(text.and_then(|text| serde_json::from_str(&text).ok()))
    }

    fn decide(&self, experiment: &str, decisions: &Decisions) -> Result<Decisions, StoreError> {
        let (experiment, decisions) = (experiment.to_owned(), decisions.clone());
        self.read(move |mut client| async move {
            let tx = client.transaction().await?;
            // The row locked (or the name, when there is none yet: a
            // second instance's insert waits on the first's), so two
            // instances' decisions merge in order.
            tx.execute(
                "INSERT INTO experiment_decisions (name, decisions, at) VALUES ($1, '{}', 0)
                 ON CONFLICT (name) DO NOTHING",
                &[&experiment],
            )
            .await?;
            let kept: String = tx
                .query_one(
                    "SELECT decisions FROM experiment_decisions WHERE name = $1 FOR UPDATE",
                    &[&experiment],
                )
                .await?
                .get(0);
            let merged = match serde_json::from_str::<Decisions>(&kept) {
                Ok(kept) if !kept.variants.is_empty() => kept.merge(&decisions),
                _ => decisions,
            };
            let text = serde_json::to_string(&merged).unwrap_or_default();
            tx.execute(
                "UPDATE experiment_decisions SET decisions = $2, at = $3 WHERE name = $1",
                &[&experiment, &text, &crate::store::event::now_ms()],
            )
            .await?;
            tx.commit().await?;
            Ok(merged)
        })
    }

    fn judged(&self, judgement: &Judgement) -> Result<bool, StoreError> {
        let judgement = judgement.clone();
        self.read(move |client| async move {
            let inserted = client
                .execute(
                    "INSERT INTO shadow_judgements
                        (experiment, run_seq, at, outcome, baseline_cost, candidate_cost, judge_cost,
                         candidate_answer, said)
                     SELECT $1, seq, $3, $4, $5, $6, $7, $8, $9 FROM runs WHERE id = $2
                     ON CONFLICT (experiment, run_seq) DO UPDATE SET
                        at = excluded.at, outcome = excluded.outcome,
                        baseline_cost = excluded.baseline_cost,
                        candidate_cost = excluded.candidate_cost, judge_cost = excluded.judge_cost,
                        candidate_answer = excluded.candidate_answer, said = excluded.said",
                    &[
                        &judgement.experiment,
                        &judgement.run_id,
                        &judgement.at,
                        &judgement.outcome.as_str(),
                        &judgement.baseline_cost_usd,
                        &judgement.candidate_cost_usd,
                        &judgement.judge_cost_usd,
                        &super::apply::text(&judgement.candidate_answer),
                        &super::apply::text(&judgement.said),
                    ],
                )
                .await?;
            Ok(inserted > 0)
        })
    }

    fn decisive_judgements(&self, since: i64, most: usize) -> Result<Vec<Judged>, StoreError> {
        let most = i64::try_from(most).unwrap_or(i64::MAX);
        self.read(move |client| async move {
            let rows = client
                .query(
                    "SELECT r.id, j.experiment, r.prompt, r.answer, j.candidate_answer, j.outcome
                     FROM shadow_judgements j JOIN runs r ON r.seq = j.run_seq
                     WHERE j.at >= $1 AND j.outcome <> 'tie' AND r.answer IS NOT NULL
                     ORDER BY j.at DESC LIMIT $2",
                    &[&since, &most],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| Judged {
                    run_id: row.get(0),
                    experiment: row.get(1),
                    prompt: row.get(2),
                    answer: row.get(3),
                    candidate_answer: row.get(4),
                    outcome: Outcome::parse(row.get(5)).unwrap_or(Outcome::Tie),
                })
                .collect())
        })
    }

    fn shadow_tally(&self, experiment: &str, since: i64) -> Result<ShadowTally, StoreError> {
        let experiment = experiment.to_owned();
        self.read(move |client| async move {
            let row = client
                .query_one(
                    "SELECT
                        COUNT(*) FILTER (WHERE outcome = 'win'),
                        COUNT(*) FILTER (WHERE outcome = 'loss'),
                        COUNT(*) FILTER (WHERE outcome = 'tie'),
                        COALESCE(SUM(baseline_cost), 0), COALESCE(SUM(candidate_cost), 0),
                        COALESCE(SUM(judge_cost), 0),
                        COALESCE(SUM(COALESCE(candidate_cost, 0) + judge_cost)
                            FILTER (WHERE at >= $2), 0)
                     FROM shadow_judgements WHERE experiment = $1",
                    &[&experiment, &since],
                )
                .await?;
            let count = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
            Ok(ShadowTally {
                wins: count(0),
                losses: count(1),
                ties: count(2),
                baseline_cost_usd: row.get(3),
                candidate_cost_usd: row.get(4),
                judge_cost_usd: row.get(5),
                spent_since_usd: row.get(6),
            })
        })
    }
}

async fn tallies(
    client: &impl GenericClient,
    experiment: &str,
    metric: Option<&str>,
) -> Result<Vec<Tally>, Failure> {
    let rows = client
        .query(
            "SELECT e.variant,
                COUNT(*) FILTER (WHERE r.status IN ('done', 'failed')),
                COUNT(*) FILTER (WHERE r.status = 'failed' OR (r.status = 'done' AND r.kind = 'none')),
                COALESCE(SUM(r.cost_usd) FILTER (WHERE r.status IN ('done', 'failed')), 0)
             FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq
             WHERE e.experiment = $1 GROUP BY e.variant ORDER BY e.variant",
            &[&experiment],
        )
        .await?;
    let mut tallies: Vec<Tally> = rows
        .iter()
        .map(|row| Tally {
            variant: row.get(0),
            runs: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
            failed: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
            cost_usd: row.get(3),
            ..Tally::default()
        })
        .collect();
    for tally in &mut tallies {
        tally.p95_ms = p95(client, experiment, &tally.variant).await?;
    }
    if let Some(metric) = metric {
        let rows = client
            .query(
                "SELECT variant, COUNT(*), SUM(v) FROM (
                    SELECT e.variant AS variant, AVG(f.value) AS v
                    FROM experiment_runs e JOIN feedback f ON f.run_seq = e.run_seq
                    WHERE e.experiment = $1 AND f.metric = $2 GROUP BY e.run_seq, e.variant
                 ) rated GROUP BY variant",
                &[&experiment, &metric],
            )
            .await?;
        for row in &rows {
            let variant: String = row.get(0);
            if let Some(tally) = tallies.iter_mut().find(|t| t.variant == variant) {
                tally.rated = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
                tally.value_sum = row.get(2);
            }
        }
    }
    Ok(tallies)
}

/// The 95th-percentile time of a variant's latest answered runs.
async fn p95(
    client: &impl GenericClient,
    experiment: &str,
    variant: &str,
) -> Result<Option<u64>, Failure> {
    let most = i64::try_from(P95_RUNS).unwrap_or(0);
    let rows = client
        .query(
            "SELECT r.elapsed_ms FROM experiment_runs e JOIN runs r ON r.seq = e.run_seq
             WHERE e.experiment = $1 AND e.variant = $2 AND r.status = 'done'
               AND r.elapsed_ms IS NOT NULL
             ORDER BY e.run_seq DESC LIMIT $3",
            &[&experiment, &variant, &most],
        )
        .await?;
    Ok(p95_of(rows.iter().map(|row| row.get(0)).collect()))
}
