//! How the writer's messages become SQL in the PostgreSQL store: one
//! transaction per batch, a statement or a few per event, the same rows as
//! the SQLite writer's. Events of one row that meet in a batch (a run's
//! start and plan, a call's start and end) are one statement, as there.

use std::sync::Arc;

use serde_json::Value;
use tokio_postgres::Transaction;

use super::{Failure, retention};
use crate::llm::ChatRequest;
use crate::plugins::{Plan, plan_json};
use crate::record::CallRecord;
use crate::store::event::{Begin, End, Msg, Part, pair, request_json};

/// One transaction for the batch; attachment bytes kept within
/// `max_bytes` (`[store] max_bytes`).
pub async fn transaction(
    client: &mut tokio_postgres::Client,
    batch: &[Msg],
    owner: &str,
    max_bytes: u64,
) -> Result<(), Failure> {
    let tx = client.transaction().await?;
    let parts = pair(batch);
    for (msg, part) in batch.iter().zip(&parts) {
        match part {
            Part::Alone => apply(&tx, msg, owner, max_bytes).await?,
            Part::With(later) => apply_pair(&tx, msg, &batch[*later], owner, max_bytes).await?,
            Part::Written => {}
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Two events of one row, as one statement.
async fn apply_pair(
    tx: &Transaction<'_>,
    first: &Msg,
    later: &Msg,
    owner: &str,
    max_bytes: u64,
) -> Result<(), Failure> {
    match (first, later) {
        (Msg::Begin(begin), Msg::Plan { plan, .. }) => {
            insert_run(tx, begin, Some(plan), owner, max_bytes).await
        }
        (
            Msg::CallStarted {
                run_id,
                request,
                at,
                ..
            },
            Msg::CallFinished { call, .. },
        ) => upsert_call(tx, run_id, call, Some((request, *at)), false).await,
        _ => {
            apply(tx, first, owner, max_bytes).await?;
            apply(tx, later, owner, max_bytes).await
        }
    }
}

/// Text as PostgreSQL takes it: it refuses NUL characters in `TEXT`.
pub(super) fn text(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains('\0') {
        value.replace('\0', "\u{FFFD}").into()
    } else {
        value.into()
    }
}

fn big(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

async fn apply(
    tx: &Transaction<'_>,
    msg: &Msg,
    owner: &str,
    max_bytes: u64,
) -> Result<(), Failure> {
    match msg {
        Msg::Begin(begin) => insert_run(tx, begin, None, owner, max_bytes).await,
        Msg::Plan { run_id, plan } => {
            tx.execute(
                "UPDATE runs SET plan = $1 WHERE id = $2",
                &[&plan_json(plan), run_id],
            )
            .await?;
            Ok(())
        }
        Msg::CallStarted {
            run_id,
            id,
            stage,
            request,
            at,
        } => {
            tx.execute(
                "INSERT INTO calls (run_seq, id, stage, label, model, status, started_at, request)
                 SELECT seq, $2, $3, $4, $5, 'running', $6, $7 FROM runs WHERE id = $1
                 ON CONFLICT (run_seq, id) DO NOTHING",
                &[
                    run_id,
                    &i64::from(*id),
                    &&**stage,
                    &request.label,
                    &request.model,
                    at,
                    &request_json(request),
                ],
            )
            .await?;
            Ok(())
        }
        Msg::CallFinished { run_id, call } => upsert_call(tx, run_id, call, None, false).await,
        Msg::End {
            begin,
            plan,
            end,
            lost_events,
            at,
            ..
        } => {
            insert_run(tx, begin, None, owner, max_bytes).await?;
            let run_id = &begin.request.run_id;
            if let Some(plan) = plan {
                tx.execute(
                    "UPDATE runs SET plan = $1 WHERE id = $2 AND plan IS NULL",
                    &[&plan_json(plan), run_id],
                )
                .await?;
            }
            let elapsed = at.saturating_sub(begin.started_at);
            let lost = i64::from(*lost_events);
            match end {
                End::Done(record) => {
                    for call in &record.calls {
                        upsert_call(tx, run_id, call, None, true).await?;
                    }
                    tx.execute(
                        "UPDATE runs SET status = 'done', finished_at = $2, kind = $3, summary = $4,
                             answer = $5, notes = $6, details = $7, elapsed_ms = $8,
                             prompt_tokens = $9, completion_tokens = $10, cost_usd = $11,
                             lost_events = $12, cost_estimated = $13
                         WHERE id = $1",
                        &[
                            run_id,
                            at,
                            &record.kind.as_str(),
                            &text(&record.summary),
                            &text(&record.answer),
                            &Value::from(record.notes.clone()).to_string(),
                            &record.details.as_ref().map(Value::to_string),
                            &big(record.elapsed_ms),
                            &big(record.usage.prompt_tokens),
                            &big(record.usage.completion_tokens),
                            &record.usage.cost_usd,
                            &lost,
                            &record.usage.cost_estimated,
                        ],
                    )
                    .await?;
                }
                End::Failed(error) => {
                    tx.execute(
                        "UPDATE runs SET status = 'failed', finished_at = $2, error = $3,
                             elapsed_ms = $4, lost_events = $5
                         WHERE id = $1",
                        &[run_id, at, &text(error), &elapsed, &lost],
                    )
                    .await?;
                    sum_usage(tx, run_id).await?;
                }
                End::Cancelled => {
                    tx.execute(
                        "UPDATE runs SET status = 'cancelled', finished_at = $2, elapsed_ms = $3,
                             lost_events = $4
                         WHERE id = $1 AND status = 'running'",
                        &[run_id, at, &elapsed, &lost],
                    )
                    .await?;
                    sum_usage(tx, run_id).await?;
                }
            }
            retention::measure(tx, run_id).await
        }
        Msg::Flush(_) | Msg::Shutdown => Ok(()),
    }
}

/// The run's first row — with its plan, when that came in the same batch —
/// and its attachments (once: the end of a run whose start was written
/// finds its row there).
async fn insert_run(
    tx: &Transaction<'_>,
    begin: &Begin,
    plan: Option<&Arc<Plan>>,
    owner: &str,
    max_bytes: u64,
) -> Result<(), Failure> {
    let request = &begin.request;
    let inserted = tx
        .execute(
            "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options,
                           follow_up_of, resynthesis_of, owner, client, attachments, plan)
         VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (id) DO NOTHING",
            &[
                &request.run_id,
                &request.pipeline,
                &begin.started_at,
                &begin.deadline_at,
                &text(&request.prompt),
                &request.options.to_string(),
                &begin.follow_up_of,
                &begin.resynthesis_of,
                &owner,
                &begin.client,
                &begin.attachments,
                &plan.map(|plan| plan_json(plan)),
            ],
        )
        .await?;
    if inserted > 0
        && let Some(assignment) = &begin.experiment
    {
        super::experiments::assign(tx, &request.run_id, assignment).await?;
    }
    if inserted > 0 && !begin.files.is_empty() {
        super::attachments::keep(tx, begin, max_bytes).await?;
    }
    Ok(())
}

/// Writes a call's outcome — and its request, when its start is written
/// with it (`started`: the request and when it was sent); with
/// `only_if_unfinished`, a call already on record with its outcome is left
/// as it is.
async fn upsert_call(
    tx: &Transaction<'_>,
    run_id: &str,
    call: &CallRecord,
    started: Option<(&ChatRequest, i64)>,
    only_if_unfinished: bool,
) -> Result<(), Failure> {
    let condition = if only_if_unfinished {
        "WHERE calls.status = 'running'"
    } else {
        ""
    };
    let reply = call.reply.as_deref().map(|r| text(r));
    let error_message = call.error.as_ref().map(|e| text(&e.message));
    tx.execute(
        &format!(
            "INSERT INTO calls (run_seq, id, stage, label, model, status, latency_ms,
                 attempts, prompt_tokens, completion_tokens, cost_usd, error_kind, error_status,
                 error_message, reply, reused_from_run, reused_from_call, reasoning_tokens,
                 cost_estimated, format_sent, fallback_from, cached_tokens, cache_write_tokens,
                 citations, queued_ms, ttft_ms, cached_from_run, cached_from_call, started_at,
                 request, tokens_estimated)
             SELECT seq, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                    $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31
             FROM runs WHERE id = $1
             ON CONFLICT (run_seq, id) DO UPDATE SET status = excluded.status,
                 model = excluded.model, latency_ms = excluded.latency_ms,
                 attempts = excluded.attempts, prompt_tokens = excluded.prompt_tokens,
                 completion_tokens = excluded.completion_tokens, cost_usd = excluded.cost_usd,
                 error_kind = excluded.error_kind, error_status = excluded.error_status,
                 error_message = excluded.error_message, reply = excluded.reply,
                 reasoning_tokens = excluded.reasoning_tokens,
                 cost_estimated = excluded.cost_estimated, format_sent = excluded.format_sent,
                 fallback_from = excluded.fallback_from,
                 cached_tokens = excluded.cached_tokens,
                 cache_write_tokens = excluded.cache_write_tokens,
                 citations = excluded.citations,
                 queued_ms = excluded.queued_ms, ttft_ms = excluded.ttft_ms,
                 cached_from_run = excluded.cached_from_run,
                 cached_from_call = excluded.cached_from_call,
                 tokens_estimated = excluded.tokens_estimated
             {condition}"
        ),
        &[
            &run_id,
            &i64::from(call.id),
            &call.stage,
            &call.label,
            &call.model,
            &call.status,
            &i64::from(call.latency_ms),
            &i64::from(call.attempts),
            &call.prompt_tokens.map(i64::from),
            &call.completion_tokens.map(i64::from),
            &call.cost_usd,
            &call.error.as_ref().map(|e| e.kind.as_str()),
            &call.error.as_ref().and_then(|e| e.status).map(i64::from),
            &error_message.as_deref(),
            &reply.as_deref(),
            &call.reused_from.as_ref().map(|r| r.run_id.as_str()),
            &call.reused_from.as_ref().map(|r| i64::from(r.call)),
            &call.reasoning_tokens.map(i64::from),
            &call.cost_estimated,
            &call.format_sent,
            &(!call.fallback_from.is_empty())
                .then(|| serde_json::to_string(&call.fallback_from).unwrap_or_default()),
            &call.cached_tokens.map(i64::from),
            &call.cache_write_tokens.map(i64::from),
            &(!call.citations.is_empty())
                .then(|| serde_json::to_string(&call.citations).unwrap_or_default()),
            &call.queued_ms.map(i64::from),
            &call.ttft_ms.map(i64::from),
            &call.cached_from.as_ref().map(|r| r.run_id.as_str()),
            &call.cached_from.as_ref().map(|r| i64::from(r.call)),
            &started.map(|(_, at)| at),
            &started.map(|(request, _)| request_json(request)),
            &call.tokens_estimated,
        ],
    )
    .await?;
    Ok(())
}

/// A run that ended without a record: its totals from the calls on record.
async fn sum_usage(tx: &Transaction<'_>, run_id: &str) -> Result<(), Failure> {
    tx.execute(
        "UPDATE runs SET
             prompt_tokens = (SELECT SUM(prompt_tokens) FROM calls WHERE run_seq = runs.seq),
             completion_tokens = (SELECT SUM(completion_tokens) FROM calls WHERE run_seq = runs.seq),
             cost_usd = (SELECT SUM(cost_usd) FROM calls WHERE run_seq = runs.seq),
             cost_estimated = COALESCE((SELECT bool_or(cost_estimated) FROM calls
                               WHERE run_seq = runs.seq AND cost_usd IS NOT NULL), FALSE)
         WHERE id = $1",
        &[&run_id],
    )
    .await?;
    Ok(())
}
