//! The store where things stand in its way — a file where its directory
//! should be, a store another process is writing (reading must not wait
//! or write), a store file open to other users, a full disk — and what the
//! writer must not do twice.

use std::sync::Arc;

use serde_json::json;

use super::{READERS, Sqlite, apply, schema, texts};
use crate::plugins::Request;
use crate::record::{AnswerKind, CallRecord, RunRecord, Totals};
use crate::store::event::{Begin, End, Msg};
use crate::store::{Query, Retention, Store, StoreError};

fn retention() -> Retention {
    Retention {
        max_runs: 1000,
        max_age: None,
        max_bytes: 1 << 30,
    }
}

#[test]
fn a_file_where_the_directory_should_be_is_named_and_not_taken_for_no_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, "not a directory").unwrap();
    let path = file.join("runs.sqlite3");

    let error = Store::open_at(&path, retention())
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains(&format!("{} is a file, not a directory", file.display())),
        "{error}"
    );
    let error = Store::open_reading_at(path).err().unwrap();
    assert!(!matches!(error, StoreError::NotFound(_)), "{error}");
    assert!(
        error.to_string().contains("is a file, not a directory"),
        "{error}"
    );
}

#[tokio::test]
async fn reading_a_store_neither_writes_nor_waits_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    drop(Store::open_at(&path, retention()).unwrap());
    // Another process is in the middle of a write.
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer
        .execute_batch("BEGIN IMMEDIATE; UPDATE runs SET bytes = 0;")
        .unwrap();

    let store = Store::open_reading_at(path.clone()).unwrap();
    assert!(store.list(&Query::default()).unwrap().runs.is_empty());
    let sqlite = store.sqlite();
    let reader = sqlite.readers.take().unwrap();
    assert!(reader.is_readonly(rusqlite::MAIN_DB).unwrap());
    writer.execute_batch("COMMIT").unwrap();
}

impl Store {
    fn open_reading_at(path: std::path::PathBuf) -> Result<Self, StoreError> {
        Ok(Self::on(Sqlite::open_reading(path)?))
    }

    fn sqlite(&self) -> &Sqlite {
        self.backend.as_any().downcast_ref().expect("on disk")
    }
}

#[test]
fn reads_share_a_bounded_pool_of_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    let store = Store::open_at(&path, retention()).unwrap();
    let sqlite = store.sqlite();
    // Every connection busy (READERS readers at once): the next read
    // waits for one to come back instead of opening more.
    let held: Vec<_> = (0..READERS)
        .map(|_| sqlite.readers.take().unwrap())
        .collect();
    assert_eq!(sqlite.readers_open(), READERS);
    let reader = store.clone();
    let (done, finished) = std::sync::mpsc::channel();
    let waiting = std::thread::spawn(move || {
        let listed = reader.list(&Query::default()).map(|page| page.runs.len());
        let _ = done.send(());
        listed
    });
    assert!(
        finished
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err(),
        "a read past the pool's size waits"
    );
    let mut held = held.into_iter();
    sqlite.readers.give_back(held.next().unwrap());
    assert_eq!(waiting.join().unwrap().unwrap(), 0);
    assert_eq!(sqlite.readers_open(), READERS, "no connection more");
    for conn in held {
        sqlite.readers.give_back(conn);
    }
}

#[cfg(unix)]
#[test]
fn a_store_file_open_to_other_users_is_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = Store::open_at(&path, retention()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(store);
}

#[test]
fn a_full_disk_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    let mut conn = schema::open(&path).unwrap();
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    // The file may grow by two pages more: as full as a disk can be.
    conn.pragma_update(None, "max_page_count", pages + 2)
        .unwrap();
    let batch = [
        Msg::Begin(begin("x".repeat(1 << 20))),
        Msg::Begin(begin("short".into())),
    ];
    let error = apply::transaction(&mut conn, &path, &batch, u64::MAX).unwrap_err();
    assert!(error.contains("full"), "{error}");
    let runs: i64 = conn
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 0, "nothing half-written");
}

fn begin(prompt: String) -> Begin {
    Begin {
        experiment: None,
        request: Arc::new(Request {
            run_id: uuid::Uuid::now_v7().to_string(),
            pipeline: "ask".into(),
            prompt,
            options: json!({}),
            attachments: Vec::new(),
            tools: None,
        }),
        follow_up_of: None,
        resynthesis_of: None,
        client: None,
        started_at: 0,
        deadline_at: i64::MAX,
        attachments: None,
        files: Default::default(),
        bytes_let_go: None,
    }
}

#[test]
fn the_end_of_a_run_does_not_write_a_long_reply_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    let mut conn = schema::open(&path).unwrap();
    let begin = begin("q".into());
    let run_id = begin.request.run_id.clone();
    let call = CallRecord {
        id: 0,
        stage: "fan-out".into(),
        label: "panel".into(),
        model: "m".into(),
        status: "ok".into(),
        latency_ms: 1,
        attempts: 1,
        reply: Some(Arc::new("r".repeat(texts::LONG))),
        ..CallRecord::default()
    };
    let first = [
        Msg::Begin(begin.clone()),
        Msg::CallFinished {
            run_id: run_id.clone(),
            call: Arc::new(call.clone()),
        },
    ];
    assert!(
        apply::transaction(&mut conn, &path, &first, u64::MAX)
            .unwrap()
            .is_empty()
    );
    conn.execute_batch(
        "CREATE TEMP TABLE written (n INTEGER); INSERT INTO written VALUES (0);
         CREATE TEMP TRIGGER count_texts AFTER INSERT ON main.texts BEGIN
             UPDATE written SET n = n + 1;
         END;",
    )
    .unwrap();
    let record = RunRecord {
        experiment: None,
        run_id: run_id.clone(),
        pipeline: "ask".into(),
        kind: AnswerKind::Single,
        summary: "one answer".into(),
        answer: "r".into(),
        notes: vec![],
        usage: Totals::of(std::slice::from_ref(&call)),
        calls: vec![call],
        elapsed_ms: 1,
        details: None,
        follow_up_of: None,
        resynthesis_of: None,
        sources: Vec::new(),
        attachments: Vec::new(),
    };
    let end = [Msg::End {
        begin,
        plan: None,
        end: End::Done(Arc::new(record)),
        lost_events: 0,
        at: 2,
        ack: None,
    }];
    assert!(
        apply::transaction(&mut conn, &path, &end, u64::MAX)
            .unwrap()
            .is_empty()
    );
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT n FROM written"), 0, "no text written again");
    assert_eq!(count("SELECT COUNT(*) FROM texts"), 1);
    assert_eq!(count("SELECT COUNT(*) FROM runs WHERE status = 'done'"), 1);
}

#[test]
fn a_follow_up_chain_reads_only_prompts_and_answers_and_stops_where_runs_are_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    let mut conn = schema::open(&path).unwrap();
    let mut ids: Vec<String> = Vec::new();
    for (i, parent) in [None, Some("pruned-long-ago"), None, None]
        .into_iter()
        .enumerate()
    {
        let mut start = begin(format!("question {i}"));
        start.follow_up_of = parent.map(str::to_owned).or_else(|| ids.last().cloned());
        ids.push(start.request.run_id.clone());
        apply::transaction(&mut conn, &path, &[Msg::Begin(start)], u64::MAX).unwrap();
        conn.execute(
            "UPDATE runs SET answer = ?1 WHERE id = ?2",
            (format!("answer {i}"), &ids[i]),
        )
        .unwrap();
    }
    drop(conn);
    let store = Store::open_at(&path, retention()).unwrap();
    let chain = store.exchanges(&ids[3], 10).unwrap();
    let prompts: Vec<&str> = chain.iter().map(|e| e.prompt.as_str()).collect();
    assert_eq!(prompts, ["question 3", "question 2", "question 1"]);
    assert_eq!(chain[0].answer.as_deref(), Some("answer 3"));
    assert_eq!(chain[2].follow_up_of.as_deref(), Some("pruned-long-ago"));
    assert_eq!(store.exchanges(&ids[3], 2).unwrap().len(), 2);
    assert!(store.exchanges("unknown", 10).unwrap().is_empty());
}
