//! `store::tasks` in PostgreSQL: the owner is an instance, lost when its
//! lease has lapsed; a cancel request is a flag and a `NOTIFY` on
//! [`CHANNEL`], which every instance `LISTEN`s to on a connection of its
//! own (reconnecting each second while the database is away).

use std::time::Duration;

use futures::future::poll_fn;
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, GenericClient, NoTls, Row};

use super::{Failure, LEASE, NOW_MS};
use crate::store::tasks::{StoredTask, TaskRow};

/// The channel cancel requests are announced on; the payload is the task id.
pub const CHANNEL: &str = "chorus_task_cancel";

pub async fn put(client: &impl GenericClient, row: &TaskRow) -> Result<bool, Failure> {
    client
        .execute(
            &format!("DELETE FROM tasks WHERE expires_at < {NOW_MS}"),
            &[],
        )
        .await?;
    let found = client
        .query_one(
            &format!(
                "INSERT INTO tasks (id, client, owner, run_id, status, detail, updated_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, {NOW_MS}, $7)
                 ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id,
                     status = excluded.status, detail = excluded.detail,
                     updated_at = excluded.updated_at, expires_at = excluded.expires_at
                 RETURNING cancel_requested"
            ),
            &[
                &row.id,
                &row.client,
                &row.owner,
                &row.run_id,
                &row.status,
                &row.detail,
                &row.expires_at,
            ],
        )
        .await?;
    Ok(found.get(0))
}

pub async fn get(client: &impl GenericClient, id: &str) -> Result<Option<StoredTask>, Failure> {
    let row = client
        .query_opt(
            &format!(
                "SELECT id, client, owner, run_id, status, detail, expires_at, cancel_requested,
                     status = 'working' AND NOT EXISTS (SELECT 1 FROM instances
                         WHERE instances.id = tasks.owner
                           AND instances.heartbeat_at > {NOW_MS} - {lease})
                 FROM tasks WHERE id = $1 AND expires_at >= {NOW_MS}",
                lease = LEASE.as_millis()
            ),
            &[&id],
        )
        .await?;
    Ok(row.map(|r: Row| StoredTask {
        row: TaskRow {
            id: r.get(0),
            client: r.get(1),
            owner: r.get(2),
            run_id: r.get(3),
            status: r.get(4),
            detail: r.get(5),
            expires_at: r.get(6),
        },
        cancel_requested: r.get(7),
        lost: r.get(8),
    }))
}

pub async fn request_cancel(client: &impl GenericClient, id: &str) -> Result<(), Failure> {
    client
        .execute(
            "UPDATE tasks SET cancel_requested = TRUE WHERE id = $1",
            &[&id],
        )
        .await?;
    client
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &id])
        .await?;
    Ok(())
}

/// Listens for cancel requests until the runtime stops, passing each task
/// id to `cancels`; a lost connection is made again a second later.
pub async fn listen(config: tokio_postgres::Config, cancels: broadcast::Sender<String>) {
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let heard = cancels.clone();
                let driver = tokio::spawn(async move {
                    while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
                        match message {
                            Ok(AsyncMessage::Notification(n)) => {
                                let _ = heard.send(n.payload().to_owned());
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::debug!(
                                    "the task cancel listener's connection failed: {e}"
                                );
                                break;
                            }
                        }
                    }
                });
                match client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                    Ok(()) => {
                        let _ = driver.await;
                    }
                    Err(e) => {
                        tracing::debug!("cannot listen for task cancels: {e}");
                        driver.abort();
                    }
                }
            }
            Err(e) => tracing::debug!("cannot connect to listen for task cancels: {e}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
