//! Reading the PostgreSQL store: a run with its calls, a page of a
//! listing, ids in full or by a unique prefix — the SQLite store's queries
//! in PostgreSQL's dialect.

use std::sync::Arc;

use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row};

use super::Failure;
use crate::record::{
    AnswerKind, CallError, CallRecord, CallRef, RunStatus, RunSummary, StoredCall, StoredRun,
    Totals, first_line,
};
use crate::store::row::{PROMPT_LINE, RUN_COLUMNS, attachments, escape_like, json};
use crate::store::{CallLookup, Cursor, Exchange, Lookup, Page, Query};

/// Run `id`'s (in full) question, answer and the run it followed up.
pub async fn exchange(client: &impl GenericClient, id: &str) -> Result<Option<Exchange>, Failure> {
    let row = client
        .query_opt(
            "SELECT prompt, answer, follow_up_of FROM runs WHERE id = $1",
            &[&id],
        )
        .await?;
    Ok(row.map(|row| Exchange {
        prompt: row.get(0),
        answer: row.get(1),
        follow_up_of: row.get(2),
    }))
}

/// Whether a run is running for an instance whose lease has lapsed.
fn lost() -> String {
    format!(
        "(status = 'running' AND NOT EXISTS (SELECT 1 FROM instances
             WHERE instances.id = runs.owner AND instances.heartbeat_at > {} - {}))",
        super::NOW_MS,
        super::LEASE.as_millis()
    )
}

/// The status a row says, or interrupted when its instance is gone.
fn status_of(
    row: &Row,
    status: usize,
    deadline: usize,
    owner: usize,
    lost: usize,
    now: i64,
) -> RunStatus {
    if row.get::<_, bool>(lost) {
        RunStatus::Interrupted
    } else {
        crate::store::row::status(row.get(status), row.get(deadline), row.get(owner), now)
    }
}

/// The run `id` (exact), with its calls; their requests too if asked.
pub async fn run(
    client: &impl GenericClient,
    id: &str,
    with_requests: bool,
    now: i64,
) -> Result<Option<StoredRun>, Failure> {
    let Some(row) = client
        .query_opt(
            &format!("SELECT {RUN_COLUMNS}, {} FROM runs WHERE id = $1", lost()),
            &[&id],
        )
        .await?
    else {
        return Ok(None);
    };
    let seq: i64 = row.get(0);
    let mut run = run_row(&row, now);
    let rows = client
        .query(&call_select(with_requests, "ORDER BY id"), &[&seq])
        .await?;
    let ended = run.status != RunStatus::Running;
    run.calls = rows.iter().map(|row| call_row(row, ended)).collect();
    if run.kind.is_none() {
        let calls: Vec<CallRecord> = run.calls.iter().map(|c| c.call.clone()).collect();
        run.usage = Totals::of(&calls);
    }
    Ok(Some(run))
}

/// Call `call_id` of run `run_id` (exact), with its request if asked:
/// one row read, however many calls the run has.
pub async fn call(
    client: &impl GenericClient,
    run_id: &str,
    call_id: u32,
    with_request: bool,
    now: i64,
) -> Result<CallLookup, Failure> {
    let Some(row) = client
        .query_opt(
            &format!(
                "SELECT seq, status, deadline_at, owner, {},
                        (SELECT count(*) FROM calls WHERE run_seq = runs.seq)
                 FROM runs WHERE id = $1",
                lost()
            ),
            &[&run_id],
        )
        .await?
    else {
        return Ok(CallLookup::UnknownRun);
    };
    let (seq, status): (i64, RunStatus) = (row.get(0), status_of(&row, 1, 2, 3, 4, now));
    let calls = small(Some(row.get(5))).unwrap_or(u32::MAX);
    let ended = status != RunStatus::Running;
    let call = client
        .query_opt(
            &call_select(with_request, "AND id = $2"),
            &[&seq, &i64::from(call_id)],
        )
        .await?;
    Ok(call.map_or(CallLookup::NoSuchCall { calls }, |row| {
        CallLookup::Found(call_row(&row, ended))
    }))
}

/// The query for a run's calls (`$1` its `seq`), `more` narrowing or
/// ordering them.
fn call_select(with_requests: bool, more: &str) -> String {
    let request_column = if with_requests {
        "request"
    } else {
        "NULL::text"
    };
    format!(
        "SELECT id, stage, label, model, status, latency_ms, attempts, prompt_tokens,
                completion_tokens, cost_usd, error_kind, error_status, error_message, reply,
                reused_from_run, reused_from_call, {request_column}, reasoning_tokens,
                cost_estimated, format_sent, fallback_from, cached_tokens, cache_write_tokens,
                citations, queued_ms, ttft_ms, cached_from_run, cached_from_call, tokens_estimated
         FROM calls WHERE run_seq = $1 {more}"
    )
}

fn count(value: Option<i64>) -> u64 {
    value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}

fn small(value: Option<i64>) -> Option<u32> {
    value.and_then(|v| u32::try_from(v).ok())
}

fn run_row(row: &Row, now: i64) -> StoredRun {
    let notes: String = row.get(15);
    StoredRun {
        run_id: row.get(1),
        pipeline: row.get(2),
        status: status_of(row, 3, 4, 22, 26, now),
        started_at: row.get(5),
        finished_at: row.get(6),
        prompt: row.get(7),
        options: json(row.get(8)).unwrap_or(Value::Object(Default::default())),
        plan: json(row.get(9)),
        follow_up_of: row.get(10),
        resynthesis_of: row.get(11),
        kind: row.get::<_, Option<&str>>(12).and_then(AnswerKind::parse),
        summary: row.get(13),
        answer: row.get(14),
        notes: serde_json::from_str(&notes).unwrap_or_default(),
        details: json(row.get(16)),
        error: row.get(17),
        elapsed_ms: row
            .get::<_, Option<i64>>(18)
            .and_then(|e| u64::try_from(e).ok()),
        usage: Totals {
            prompt_tokens: count(row.get(19)),
            completion_tokens: count(row.get(20)),
            cost_usd: row.get::<_, Option<f64>>(21),
            cost_estimated: row.get(23),
            // The calls, once read, say (`Totals::of`).
            tokens_estimated: false,
        },
        client: row.get(24),
        attachments: attachments(row.get(25)),
        experiment: None,
        calls: Vec::new(),
    }
}

fn call_row(row: &Row, run_ended: bool) -> StoredCall {
    let status: String = row.get(4);
    let error = row.get::<_, Option<String>>(10).map(|kind| CallError {
        kind,
        status: row
            .get::<_, Option<i64>>(11)
            .and_then(|s| u16::try_from(s).ok()),
        message: row.get::<_, Option<String>>(12).unwrap_or_default(),
    });
    let reused_from = row.get::<_, Option<String>>(14).map(|run_id| CallRef {
        run_id,
        call: small(row.get(15)).unwrap_or(0),
    });
    StoredCall {
        call: CallRecord {
            id: small(Some(row.get(0))).unwrap_or(0),
            stage: row.get(1),
            label: row.get(2),
            model: row.get(3),
            status: if status == "running" && run_ended {
                "unfinished".to_owned()
            } else {
                status
            },
            latency_ms: small(row.get(5)).unwrap_or(0),
            attempts: small(row.get(6)).unwrap_or(0),
            queued_ms: small(row.get(24)),
            ttft_ms: small(row.get(25)),
            prompt_tokens: small(row.get(7)),
            completion_tokens: small(row.get(8)),
            reasoning_tokens: small(row.get(17)),
            cost_usd: row.get(9),
            cost_estimated: row.get(18),
            tokens_estimated: row.get(28),
            error,
            reply: row.get::<_, Option<String>>(13).map(Arc::new),
            reused_from,
            format_sent: row.get(19),
            cached_tokens: small(row.get(21)),
            cache_write_tokens: small(row.get(22)),
            fallback_from: row
                .get::<_, Option<String>>(20)
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default(),
            citations: row
                .get::<_, Option<String>>(23)
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default(),
            cached_from: row.get::<_, Option<String>>(26).map(|run_id| CallRef {
                run_id,
                call: small(row.get(27)).unwrap_or(0),
            }),
        },
        request: json(row.get(16)),
    }
}

/// When each call of run `id` was sent (unix ms), by call id.
pub async fn call_starts(
    client: &impl GenericClient,
    id: &str,
) -> Result<Vec<(u32, i64)>, Failure> {
    Ok(client
        .query(
            "SELECT calls.id, calls.started_at FROM calls JOIN runs ON runs.seq = calls.run_seq
             WHERE runs.id = $1 AND calls.started_at IS NOT NULL ORDER BY calls.id",
            &[&id],
        )
        .await?
        .iter()
        .filter_map(|row| Some((small(Some(row.get(0)))?, row.get(1))))
        .collect())
}

/// Resolves a full id, a unique prefix of one, or `last`.
pub async fn resolve(client: &impl GenericClient, text: &str) -> Result<Lookup<String>, Failure> {
    if text == "last" {
        return Ok(client
            .query_opt("SELECT id FROM runs ORDER BY seq DESC LIMIT 1", &[])
            .await?
            .map_or(Lookup::Unknown, |row| Lookup::Found(row.get(0))));
    }
    if text.is_empty() {
        return Ok(Lookup::Unknown);
    }
    if let Some(row) = client
        .query_opt("SELECT id FROM runs WHERE id = $1", &[&text])
        .await?
    {
        return Ok(Lookup::Found(row.get(0)));
    }
    let pattern = format!("{}%", escape_like(text));
    let ids: Vec<String> = client
        .query(
            "SELECT id FROM runs WHERE id LIKE $1 ORDER BY id LIMIT 6",
            &[&pattern],
        )
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    Ok(match ids.len() {
        0 => Lookup::Unknown,
        1 => Lookup::Found(ids.into_iter().next().unwrap_or_default()),
        _ => Lookup::Ambiguous(ids),
    })
}

/// A page of runs, newest first.
pub async fn list(client: &impl GenericClient, query: &Query, now: i64) -> Result<Page, Failure> {
    let mut conditions = Vec::new();
    let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut bind = |condition: &str, value: Box<dyn ToSql + Sync + Send>| {
        values.push(value);
        conditions.push(condition.replace('?', &format!("${}", values.len())));
    };
    if let Some(Cursor(seq)) = query.before {
        bind("seq < ?", Box::new(seq));
    }
    if let Some(pipeline) = &query.pipeline {
        bind("pipeline = ?", Box::new(pipeline.clone()));
    }
    if let Some(client) = &query.client {
        bind("client = ?", Box::new(client.clone()));
    }
    if let Some(since) = query.since {
        bind("started_at >= ?", Box::new(since));
    }
    if let Some(text) = &query.text {
        let pattern = format!("%{}%", escape_like(text));
        bind("(prompt ILIKE ? OR answer ILIKE ?)", Box::new(pattern));
    }
    let limit = query.limit.clamp(1, 10_000);
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let sql = format!(
        "SELECT seq, id, pipeline, status, deadline_at, kind, started_at, elapsed_ms, cost_usd,
                substr(prompt, 1, 400), summary, follow_up_of, resynthesis_of, owner, {}, client
         FROM runs {filter} ORDER BY seq DESC LIMIT {}",
        lost(),
        limit + 1
    );
    let params: Vec<&(dyn ToSql + Sync)> =
        values.iter().map(|v| &**v as &(dyn ToSql + Sync)).collect();
    let rows = client.query(&sql, &params).await?;
    let runs: Vec<(i64, RunSummary)> = rows
        .iter()
        .map(|row| {
            (
                row.get(0),
                RunSummary {
                    run_id: row.get(1),
                    pipeline: row.get(2),
                    status: status_of(row, 3, 4, 13, 14, now),
                    kind: row.get::<_, Option<&str>>(5).and_then(AnswerKind::parse),
                    started_at: row.get(6),
                    elapsed_ms: row
                        .get::<_, Option<i64>>(7)
                        .and_then(|e| u64::try_from(e).ok()),
                    cost_usd: row.get(8),
                    prompt: first_line(row.get(9), PROMPT_LINE),
                    summary: row.get(10),
                    follow_up_of: row.get(11),
                    resynthesis_of: row.get(12),
                    client: row.get(15),
                },
            )
        })
        .collect();
    Ok(Page::of(runs, limit))
}
