//! `store::spend` in the SQLite file: one connection of its own, and an
//! immediate write transaction per admission, so processes sharing the
//! file admit a client's runs one at a time.

use rusqlite::{Connection, TransactionBehavior, params};

use crate::store::spend::{Ask, Verdict, sum_sql};

pub fn reserve(conn: &mut Connection, ask: &Ask) -> rusqlite::Result<Verdict> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute(
        "DELETE FROM spend WHERE client = ?1 AND at < ?2",
        params![ask.client, ask.forget_before()],
    )?;
    let mut spent = Vec::with_capacity(ask.periods.len());
    for period in &ask.periods {
        let sum: f64 = tx.query_row(&sum_sql('?'), params![ask.client, period.since], |row| {
            row.get(0)
        })?;
        spent.push(sum);
    }
    let verdict = ask.judge(spent);
    if matches!(verdict, Verdict::Admitted { .. }) {
        tx.execute(
            "INSERT INTO spend (id, client, at, reserved_usd) VALUES (?1, ?2, ?3, ?4)",
            params![ask.id, ask.client, ask.at, ask.worst_usd],
        )?;
    }
    tx.commit()?;
    Ok(verdict)
}

pub fn settle(conn: &Connection, id: &str, cost_usd: f64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE spend SET cost_usd = ?2 WHERE id = ?1",
        params![id, cost_usd],
    )?;
    Ok(())
}
