//! A batch in which a row's events meet writes that row once, and what it
//! writes reads exactly as the same events written one at a time, column
//! by column.

use rusqlite::Connection;
use rusqlite::types::Value;

use super::{apply, retention, schema, texts};
use crate::store::tests::batches::events;
use crate::store::tests::fixture;

/// Every column of the run's row and of its calls' (their long texts read
/// where they are kept), but for the ids that differ between two runs.
fn rows(conn: &Connection, run_id: &str) -> Vec<Vec<(String, Value)>> {
    let read = |sql: &str| -> Vec<Vec<(String, Value)>> {
        let mut statement = conn.prepare(sql).unwrap();
        let names: Vec<String> = statement.column_names().map(str::to_owned).collect();
        statement
            .query_map([run_id], |row| {
                Ok(names
                    .iter()
                    .enumerate()
                    .filter(|(_, name)| {
                        !["seq", "id", "run_seq", "request_text", "reply_text"]
                            .contains(&name.as_str())
                    })
                    .map(|(i, name)| (name.clone(), row.get::<_, Value>(i).unwrap()))
                    .collect())
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let mut rows = read("SELECT * FROM runs WHERE id = ?1");
    rows.extend(read(&format!(
        "SELECT calls.*, calls.id AS call, {request} AS request_kept, {reply} AS reply_kept
         FROM calls JOIN runs ON runs.seq = calls.run_seq WHERE runs.id = ?1 ORDER BY calls.id",
        request = texts::select("request"),
        reply = texts::select("reply"),
    )));
    rows
}

#[test]
fn a_run_written_in_one_batch_reads_as_one_written_event_by_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    let mut conn = schema::open(&path).unwrap();
    // Long enough that the requests and replies are kept as long texts.
    let prompt = "why? ".repeat(texts::LONG / 4);
    let one_by_one = fixture(&prompt, "ask", 3);
    let batched = fixture(&prompt, "ask", 3);

    for event in events(&one_by_one) {
        let errors = apply::transaction(&mut conn, &path, &[event], u64::MAX).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
    }
    conn.execute_batch(
        "CREATE TEMP TABLE updates (row TEXT);
         CREATE TEMP TRIGGER runs_updated AFTER UPDATE ON main.runs BEGIN
             INSERT INTO updates VALUES ('run');
         END;
         CREATE TEMP TRIGGER calls_updated AFTER UPDATE ON main.calls BEGIN
             INSERT INTO updates VALUES ('call');
         END;",
    )
    .unwrap();
    let errors = apply::transaction(&mut conn, &path, &events(&batched), u64::MAX).unwrap();
    assert!(errors.is_empty(), "{errors:?}");

    let updates: Vec<String> = conn
        .prepare("SELECT row FROM updates")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        updates,
        ["run"],
        "each row written once, the run's at its end"
    );

    let expected = rows(&conn, one_by_one.id());
    assert_eq!(expected.len(), 4, "the run and its three calls");
    assert_eq!(rows(&conn, batched.id()), expected);

    // The size written with the run's end is what measuring it finds.
    let bytes = |conn: &Connection| -> i64 {
        conn.query_row(
            "SELECT bytes FROM runs WHERE id = ?1",
            [batched.id()],
            |row| row.get(0),
        )
        .unwrap()
    };
    let written = bytes(&conn);
    assert!(written > 6 * texts::LONG as i64, "{written}");
    let tx = conn.transaction().unwrap();
    retention::measure(&tx, batched.id()).unwrap();
    assert_eq!(bytes(&tx), written);
}
