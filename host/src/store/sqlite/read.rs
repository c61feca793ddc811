//! Reading the SQLite store: a run with its calls, a page of a listing, and ids
//! given in full or by a unique prefix.

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, Row, params_from_iter};
use serde_json::Value;

use super::texts;
use crate::record::{
    AnswerKind, CallError, CallRecord, CallRef, RunStatus, RunSummary, StoredCall, StoredRun,
    Totals, first_line,
};
use crate::store::row::{PROMPT_LINE, RUN_COLUMNS, attachments, escape_like, json, status};
use crate::store::{CallLookup, Cursor, Exchange, Lookup, Page, Query};

/// Run `id`'s (in full) question, answer and the run it followed up.
pub fn exchange(conn: &Connection, id: &str) -> rusqlite::Result<Option<Exchange>> {
    conn.prepare_cached("SELECT prompt, answer, follow_up_of FROM runs WHERE id = ?1")?
        .query_row([id], |row| {
            Ok(Exchange {
                prompt: row.get(0)?,
                answer: row.get(1)?,
                follow_up_of: row.get(2)?,
            })
        })
        .optional()
}

/// The run `id` (exact), with its calls; their requests too if asked.
pub fn run(
    conn: &Connection,
    id: &str,
    with_requests: bool,
    now: i64,
) -> rusqlite::Result<Option<StoredRun>> {
    let found = conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
        .query_row([id], |row| Ok((row.get::<_, i64>(0)?, run_row(row, now)?)))
        .optional()?;
    let Some((seq, mut run)) = found else {
        return Ok(None);
    };
    let ended = run.status != RunStatus::Running;
    run.calls = conn
        .prepare_cached(&call_select(with_requests, "ORDER BY id"))?
        .query_map([seq], |row| call_row(row, ended))?
        .collect::<Result<_, _>>()?;
    if run.kind.is_none() {
        // A run without a record: its totals are what its calls spent so far.
        let calls: Vec<CallRecord> = run.calls.iter().map(|c| c.call.clone()).collect();
        run.usage = Totals::of(&calls);
    }
    Ok(Some(run))
}

/// Call `call_id` of run `run_id` (exact), with its request if asked:
/// one row read, however many calls the run has.
pub fn call(
    conn: &Connection,
    run_id: &str,
    call_id: u32,
    with_request: bool,
    now: i64,
) -> rusqlite::Result<CallLookup> {
    let found = conn
        .prepare_cached(
            "SELECT seq, status, deadline_at, owner,
                    (SELECT count(*) FROM calls WHERE run_seq = runs.seq)
             FROM runs WHERE id = ?1",
        )?
        .query_row([run_id], |row| {
            let status = status(
                &row.get::<_, String>(1)?,
                row.get(2)?,
                row.get::<_, Option<String>>(3)?.as_deref(),
                now,
            );
            Ok((row.get::<_, i64>(0)?, status, row.get::<_, u32>(4)?))
        })
        .optional()?;
    let Some((seq, status, calls)) = found else {
        return Ok(CallLookup::UnknownRun);
    };
    let ended = status != RunStatus::Running;
    let call = conn
        .prepare_cached(&call_select(with_request, "AND id = ?2"))?
        .query_row(rusqlite::params![seq, call_id], |row| call_row(row, ended))
        .optional()?;
    Ok(call.map_or(CallLookup::NoSuchCall { calls }, CallLookup::Found))
}

/// The query for a run's calls (`?1` its `seq`), `more` narrowing or
/// ordering them.
fn call_select(with_requests: bool, more: &str) -> String {
    let request_column = if with_requests {
        texts::select("request")
    } else {
        "NULL".to_owned()
    };
    let reply_column = texts::select("reply");
    format!(
        "SELECT id, stage, label, model, status, latency_ms, attempts, prompt_tokens,
                completion_tokens, cost_usd, error_kind, error_status, error_message, {reply_column},
                reused_from_run, reused_from_call, {request_column}, reasoning_tokens,
                cost_estimated, format_sent, fallback_from, cached_tokens, cache_write_tokens,
                citations, queued_ms, ttft_ms, cached_from_run, cached_from_call, tokens_estimated
         FROM calls WHERE run_seq = ?1 {more}"
    )
}

fn run_row(row: &Row<'_>, now: i64) -> rusqlite::Result<StoredRun> {
    let notes: String = row.get(15)?;
    Ok(StoredRun {
        run_id: row.get(1)?,
        pipeline: row.get(2)?,
        status: status(
            &row.get::<_, String>(3)?,
            row.get(4)?,
            row.get::<_, Option<String>>(22)?.as_deref(),
            now,
        ),
        started_at: row.get(5)?,
        finished_at: row.get(6)?,
        prompt: row.get(7)?,
        options: json(row.get(8)?).unwrap_or(Value::Object(Default::default())),
        plan: json(row.get(9)?),
        follow_up_of: row.get(10)?,
        resynthesis_of: row.get(11)?,
        kind: row
            .get::<_, Option<String>>(12)?
            .as_deref()
            .and_then(AnswerKind::parse),
        summary: row.get(13)?,
        answer: row.get(14)?,
        notes: serde_json::from_str(&notes).unwrap_or_default(),
        details: json(row.get(16)?),
        error: row.get(17)?,
        elapsed_ms: row
            .get::<_, Option<i64>>(18)?
            .and_then(|e| u64::try_from(e).ok()),
        usage: Totals {
            prompt_tokens: row
                .get::<_, Option<i64>>(19)?
                .and_then(|t| u64::try_from(t).ok())
                .unwrap_or(0),
            completion_tokens: row
                .get::<_, Option<i64>>(20)?
                .and_then(|t| u64::try_from(t).ok())
                .unwrap_or(0),
            cost_usd: row.get::<_, Option<f64>>(21)?,
            cost_estimated: row.get::<_, Option<bool>>(23)?.unwrap_or(false),
            // The calls, once read, say (`Totals::of`).
            tokens_estimated: false,
        },
        client: row.get(24)?,
        attachments: attachments(row.get(25)?),
        experiment: None,
        calls: Vec::new(),
    })
}

fn call_row(row: &Row<'_>, run_ended: bool) -> rusqlite::Result<StoredCall> {
    let status: String = row.get(4)?;
    let error = match row.get::<_, Option<String>>(10)? {
        Some(kind) => Some(CallError {
            kind,
            status: row.get(11)?,
            message: row.get::<_, Option<String>>(12)?.unwrap_or_default(),
        }),
        None => None,
    };
    let reused_from = match row.get::<_, Option<String>>(14)? {
        Some(run_id) => Some(CallRef {
            run_id,
            call: row.get::<_, Option<u32>>(15)?.unwrap_or(0),
        }),
        None => None,
    };
    Ok(StoredCall {
        call: CallRecord {
            id: row.get(0)?,
            stage: row.get(1)?,
            label: row.get(2)?,
            model: row.get(3)?,
            status: if status == "running" && run_ended {
                "unfinished".to_owned()
            } else {
                status
            },
            latency_ms: row.get::<_, Option<u32>>(5)?.unwrap_or(0),
            attempts: row.get::<_, Option<u32>>(6)?.unwrap_or(0),
            queued_ms: row.get(24)?,
            ttft_ms: row.get(25)?,
            prompt_tokens: row.get(7)?,
            completion_tokens: row.get(8)?,
            reasoning_tokens: row.get(17)?,
            cached_tokens: row.get(21)?,
            cache_write_tokens: row.get(22)?,
            cost_usd: row.get(9)?,
            cost_estimated: row.get::<_, Option<bool>>(18)?.unwrap_or(false),
            tokens_estimated: row.get::<_, Option<bool>>(28)?.unwrap_or(false),
            error,
            reply: texts::read(row, 13)?.map(Arc::new),
            reused_from,
            format_sent: row.get(19)?,
            fallback_from: row
                .get::<_, Option<String>>(20)?
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default(),
            citations: row
                .get::<_, Option<String>>(23)?
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default(),
            cached_from: match row.get::<_, Option<String>>(26)? {
                Some(run_id) => Some(CallRef {
                    run_id,
                    call: row.get::<_, Option<u32>>(27)?.unwrap_or(0),
                }),
                None => None,
            },
        },
        request: json(texts::read(row, 16)?),
    })
}

/// When each call of run `id` (exact) was sent, unix ms, by call id: what
/// the run viewer's timeline places calls by. Calls never sent are absent.
pub fn call_starts(conn: &Connection, id: &str) -> rusqlite::Result<Vec<(u32, i64)>> {
    conn.prepare_cached(
        "SELECT calls.id, calls.started_at FROM calls JOIN runs ON runs.seq = calls.run_seq
         WHERE runs.id = ?1 AND calls.started_at IS NOT NULL ORDER BY calls.id",
    )?
    .query_map([id], |row| Ok((row.get(0)?, row.get(1)?)))?
    .collect()
}

/// Resolves a full id, a unique prefix of one, or `last`.
pub fn resolve(conn: &Connection, text: &str) -> rusqlite::Result<Lookup<String>> {
    if text == "last" {
        return Ok(conn
            .query_row("SELECT id FROM runs ORDER BY seq DESC LIMIT 1", [], |r| {
                r.get(0)
            })
            .optional()?
            .map_or(Lookup::Unknown, Lookup::Found));
    }
    if text.is_empty() {
        return Ok(Lookup::Unknown);
    }
    let exact: Option<String> = conn
        .prepare_cached("SELECT id FROM runs WHERE id = ?1")?
        .query_row([text], |r| r.get(0))
        .optional()?;
    if let Some(id) = exact {
        return Ok(Lookup::Found(id));
    }
    // Ids are ASCII; the range [prefix, prefix + U+FFFF) holds every id
    // that starts with it, and uses the index.
    let mut statement = conn.prepare_cached(
        "SELECT id FROM runs WHERE id >= ?1 AND id < ?1 || char(65535) ORDER BY id LIMIT 6",
    )?;
    let ids: Vec<String> = statement
        .query_map([text], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(match ids.len() {
        0 => Lookup::Unknown,
        1 => Lookup::Found(ids.into_iter().next().unwrap_or_default()),
        _ => Lookup::Ambiguous(ids),
    })
}

/// A page of runs, newest first.
pub fn list(conn: &Connection, query: &Query, now: i64) -> rusqlite::Result<Page> {
    let mut conditions = Vec::new();
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let mut bind = |condition: &str, value: rusqlite::types::Value| {
        values.push(value);
        conditions.push(condition.replace('?', &format!("?{}", values.len())));
    };
    if let Some(Cursor(seq)) = query.before {
        bind("seq < ?", seq.into());
    }
    if let Some(pipeline) = &query.pipeline {
        bind("pipeline = ?", pipeline.clone().into());
    }
    if let Some(since) = query.since {
        bind("started_at >= ?", since.into());
    }
    if let Some(client) = &query.client {
        bind("client = ?", client.clone().into());
    }
    if let Some(text) = &query.text {
        let pattern = format!("%{}%", escape_like(text));
        bind(
            "(prompt LIKE ? ESCAPE '\\' OR answer LIKE ? ESCAPE '\\')",
            pattern.into(),
        );
    }
    let limit = query.limit.clamp(1, 10_000);
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let sql = format!(
        "SELECT seq, id, pipeline, status, deadline_at, kind, started_at, elapsed_ms, cost_usd,
                substr(prompt, 1, 400), summary, follow_up_of, resynthesis_of, owner, client
         FROM runs {filter} ORDER BY seq DESC LIMIT {}",
        limit + 1
    );
    let mut statement = conn.prepare(&sql)?;
    let rows: Vec<(i64, RunSummary)> = statement
        .query_map(params_from_iter(values), |row| {
            Ok((
                row.get(0)?,
                RunSummary {
                    run_id: row.get(1)?,
                    pipeline: row.get(2)?,
                    status: status(
                        &row.get::<_, String>(3)?,
                        row.get(4)?,
                        row.get::<_, Option<String>>(13)?.as_deref(),
                        now,
                    ),
                    kind: row
                        .get::<_, Option<String>>(5)?
                        .as_deref()
                        .and_then(AnswerKind::parse),
                    started_at: row.get(6)?,
                    elapsed_ms: row
                        .get::<_, Option<i64>>(7)?
                        .and_then(|e| u64::try_from(e).ok()),
                    cost_usd: row.get(8)?,
                    prompt: first_line(&row.get::<_, String>(9)?, PROMPT_LINE),
                    summary: row.get(10)?,
                    follow_up_of: row.get(11)?,
                    resynthesis_of: row.get(12)?,
                    client: row.get(14)?,
                },
            ))
        })?
        .collect::<Result<_, _>>()?;
    Ok(Page::of(rows, limit))
}
