//! The PostgreSQL store where only a real server can show it: a database
//! of a newer schema, retention taken by another instance, and the
//! database going away and coming back while runs go on. (What both
//! backends do alike is tested on both in `store::tests`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{LOCK_PRUNE, LOCK_RETENTION};
use crate::plugins::Request;
use crate::record::{AnswerKind, RunRecord, RunStatus, Totals};
use crate::store::pg_cluster::{Cluster, shared};
use crate::store::{Links, Lookup, Retention, Store, StoreError, Target};

fn retention() -> Retention {
    Retention {
        max_runs: 1000,
        max_age: None,
        max_bytes: 1 << 30,
    }
}

fn open(url: &str) -> Result<Store, StoreError> {
    Store::open_database(Target::new(url, None).unwrap(), retention())
}

/// Records a run whose only event is its start, and its end.
async fn run(store: &Store, prompt: &str) -> (String, Result<(), String>) {
    let run_id = uuid::Uuid::now_v7().to_string();
    let mut recorder = store.recorder(Links::default(), Duration::from_secs(60));
    let watch = recorder.watcher();
    watch(crate::events::Event::Started(Arc::new(Request {
        run_id: run_id.clone(),
        pipeline: "ask".into(),
        prompt: prompt.into(),
        options: json!({}),
        attachments: Vec::new(),
        tools: None,
    })));
    let record = Arc::new(RunRecord {
        experiment: None,
        run_id: run_id.clone(),
        pipeline: "ask".into(),
        kind: AnswerKind::Synthesis,
        summary: "s".into(),
        answer: format!("the answer to {prompt}"),
        notes: vec![],
        usage: Totals::default(),
        calls: vec![],
        elapsed_ms: 1,
        details: None,
        follow_up_of: None,
        resynthesis_of: None,
        sources: Vec::new(),
        attachments: Vec::new(),
    });
    let written = recorder.finish(Ok(&record)).await;
    (run_id, written)
}

#[tokio::test]
async fn a_database_of_a_newer_schema_is_refused_and_names_both_versions() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    drop(open(&url).unwrap());
    let db = url.rsplit('/').next().unwrap();
    cluster.psql(db, "UPDATE schema_version SET version = 99");
    for error in [
        open(&url).err().unwrap(),
        super::Postgres::open_reading(Target::new(&url, None).unwrap())
            .err()
            .unwrap(),
    ] {
        let error = error.to_string();
        assert!(error.contains("schema version 99"), "{error}");
        assert!(
            error.contains(&format!("this chorus knows ({})", super::schema::version())),
            "{error}"
        );
        assert!(error.contains("[store] url"), "{error}");
    }
}

#[tokio::test]
async fn retention_is_applied_by_one_instance_at_a_time() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let store = open(&url).unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    // Another instance is in the middle of its retention pass.
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK_PRUNE])
        .await
        .unwrap();
    let prune = {
        let store = store.clone();
        move || store.prune(&retention())
    };
    let error = tokio::task::spawn_blocking(prune.clone())
        .await
        .unwrap()
        .err()
        .unwrap();
    assert!(error.to_string().contains("another chorus"), "{error}");
    client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_PRUNE])
        .await
        .unwrap();
    // A run with attachments starting (it holds the retention lock
    // shared) does not make a pass give up.
    client.batch_execute("BEGIN").await.unwrap();
    client
        .execute(
            "SELECT pg_advisory_xact_lock_shared($1)",
            &[&LOCK_RETENTION],
        )
        .await
        .unwrap();
    let pass = tokio::task::spawn_blocking(prune.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.batch_execute("COMMIT").await.unwrap();
    assert_eq!(pass.await.unwrap().unwrap().removed, 0);
    let pruned = tokio::task::spawn_blocking(prune).await.unwrap().unwrap();
    assert_eq!(pruned.removed, 0);
    drop(client);
    let _ = connection.await;
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_go_on_while_the_database_is_down_and_are_written_when_it_is_back() {
    // A cluster of its own: this test stops it.
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let url = cluster.database();
    let store = open(&url).unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let (id, written) = run(&store, &format!("before {i}")).await;
        written.unwrap();
        ids.push(id);
    }

    cluster.stop();
    for i in 0..3 {
        let started = Instant::now();
        let (id, written) = run(&store, &format!("while down {i}")).await;
        let error = written.unwrap_err();
        assert!(error.contains("cannot be reached"), "{error}");
        assert!(error.contains("written when it is back"), "{error}");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "the run was not held up"
        );
        ids.push(id);
    }
    assert!(
        store.describe().contains("unreachable"),
        "{}",
        store.describe()
    );
    // This instance still reads what ended meanwhile (a follow-up of it);
    // what was written before waits for the database.
    let (reader, down, up) = (store.clone(), ids[4].clone(), ids[0].clone());
    let (meanwhile, before) =
        tokio::task::spawn_blocking(move || (reader.find(&down, false), reader.find(&up, false)))
            .await
            .unwrap();
    match meanwhile.unwrap() {
        Lookup::Found(run) => {
            assert_eq!(run.answer.as_deref(), Some("the answer to while down 1"))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        before
            .unwrap_err()
            .to_string()
            .contains("cannot be reached")
    );

    cluster.start_again();
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.flush().await.is_err() {
        assert!(Instant::now() < deadline, "the store never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!store.describe().contains("unreachable"));
    let reader = store.clone();
    let found = tokio::task::spawn_blocking(move || {
        ids.iter()
            .map(|id| match reader.find(id, false).unwrap() {
                Lookup::Found(run) => (run.status, run.answer),
                other => panic!("{id}: {other:?}"),
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let answers: Vec<&str> = found
        .iter()
        .map(|(status, answer)| {
            assert_eq!(*status, RunStatus::Done);
            answer.as_deref().unwrap()
        })
        .collect();
    assert_eq!(
        answers,
        [
            "the answer to before 0",
            "the answer to before 1",
            "the answer to before 2",
            "the answer to while down 0",
            "the answer to while down 1",
            "the answer to while down 2",
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_instance_lost_its_lease_is_interrupted() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let db = url.rsplit('/').next().unwrap().to_owned();
    let store = open(&url).unwrap();
    let run_id = uuid::Uuid::now_v7().to_string();
    let recorder = store.recorder(Links::default(), Duration::from_secs(3600));
    recorder.watcher()(crate::events::Event::Started(Arc::new(Request {
        run_id: run_id.clone(),
        pipeline: "ask".into(),
        prompt: "a long one".into(),
        options: json!({}),
        attachments: Vec::new(),
        tools: None,
    })));
    // The process making it dies: its recorder never ends.
    std::mem::forget(recorder);
    store.flush().await.unwrap();
    let status = |store: &Store| {
        let (store, id) = (store.clone(), run_id.clone());
        move || match store.find(&id, false).unwrap() {
            Lookup::Found(run) => {
                let listed = store.list(&Default::default()).unwrap().runs[0].status;
                assert_eq!(listed, run.status, "listed as found");
                run.status
            }
            other => panic!("{other:?}"),
        }
    };
    let now = tokio::task::spawn_blocking(status(&store)).await.unwrap();
    assert_eq!(now, RunStatus::Running, "its instance's lease holds");
    assert_eq!(cluster.psql(&db, "SELECT COUNT(*) FROM instances"), "1");

    // Its heartbeat stops (as a killed process's does): past the lease,
    // every reader sees the run interrupted.
    cluster.psql(&db, "UPDATE instances SET heartbeat_at = 0");
    let reader = open(&url).unwrap();
    let seen = tokio::task::spawn_blocking(status(&reader)).await.unwrap();
    assert_eq!(seen, RunStatus::Interrupted);

    // An instance that stops on purpose gives its lease back.
    drop(store);
    drop(reader);
    assert_eq!(cluster.psql(&db, "SELECT COUNT(*) FROM instances"), "0");
}

/// A run whose events reach the writer in one batch (each row's events
/// paired: one statement for a call's start and end) reads back exactly as
/// one whose events came one at a time.
#[tokio::test]
async fn a_run_written_in_one_batch_reads_as_one_written_event_by_event() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let store = open(&url).unwrap();
    let (mut client, connection) = Target::new(&url, None)
        .unwrap()
        .config
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let one_by_one = crate::store::tests::fixture("why?", "ask", 3);
    let batched = crate::store::tests::fixture("why?", "ask", 3);
    for event in crate::store::tests::batches::events(&one_by_one) {
        super::apply::transaction(&mut client, &[event], "test", u64::MAX)
            .await
            .unwrap();
    }
    let events = crate::store::tests::batches::events(&batched);
    super::apply::transaction(&mut client, &events, "test", u64::MAX)
        .await
        .unwrap();
    let read = |run: &crate::store::tests::Fixture| {
        let Lookup::Found(found) = store.find(run.id(), true).unwrap() else {
            panic!("run {} not found", run.id());
        };
        let mut found = serde_json::to_value(found).unwrap();
        found["run_id"] = json!("");
        found
    };
    let expected = read(&one_by_one);
    assert_eq!(expected["calls"].as_array().unwrap().len(), 3);
    assert!(expected["calls"][2]["request"].is_object(), "{expected}");
    assert_eq!(read(&batched), expected);
}

/// A database that refuses writes for a passing reason — here read-only,
/// as after a failover; disk full, out of memory, serialization failures
/// and deadlocks alike — keeps the run's events for later: they are
/// written once it takes writes again, never dropped.
#[tokio::test(flavor = "multi_thread")]
async fn runs_refused_by_a_read_only_database_are_written_once_it_takes_writes() {
    // A cluster of its own: this test makes it read-only.
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let url = cluster.database();
    let store = open(&url).unwrap();
    let (before, written) = run(&store, "before").await;
    written.unwrap();

    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    // One statement a call: ALTER SYSTEM runs outside any transaction.
    for statement in [
        "ALTER SYSTEM SET default_transaction_read_only = on",
        "SELECT pg_reload_conf()",
    ] {
        admin.batch_execute(statement).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (during, written) = run(&store, "while read-only").await;
    let error = written.unwrap_err();
    assert!(error.contains("written when it is back"), "{error}");

    for statement in [
        "SET default_transaction_read_only = off",
        "ALTER SYSTEM RESET default_transaction_read_only",
        "SELECT pg_reload_conf()",
    ] {
        admin.batch_execute(statement).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.flush().await.is_err() {
        assert!(Instant::now() < deadline, "the run was never written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reader = store.clone();
    let found = tokio::task::spawn_blocking(move || {
        [before, during].map(|id| match reader.find(&id, false).unwrap() {
            Lookup::Found(run) => run.answer,
            other => panic!("{id}: {other:?}"),
        })
    })
    .await
    .unwrap();
    assert_eq!(
        found,
        [
            Some("the answer to before".to_owned()),
            Some("the answer to while read-only".to_owned())
        ]
    );
    drop(admin);
    let _ = connection.await;
}

/// Retention removes a long history in slices, walking each rule's index
/// from where the last slice stopped: every run past the bounds goes, the
/// newest stay, a live one among the old is kept, and the size bound's
/// walk (newest first) stops at what is kept.
#[tokio::test]
async fn retention_removes_a_long_history_in_slices() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let store = open(&url).unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    // 2,345 runs of 100 bytes, the 7th still running (its deadline far
    // off), each with a call.
    client
        .batch_execute(
            "INSERT INTO runs (id, pipeline, status, started_at, deadline_at, prompt, options, bytes)
             SELECT 'old-' || i, 'ask', CASE WHEN i = 7 THEN 'running' ELSE 'done' END, i,
                    CASE WHEN i = 7 THEN 9000000000000 ELSE i END, 'q', '{}', 100
             FROM generate_series(1, 2345) AS i;
             INSERT INTO calls (run_seq, id, stage, label, model, status)
             SELECT seq, 0, 'fan-out', 'm', 'm1', 'ok' FROM runs;",
        )
        .await
        .unwrap();
    let prune = |retention: Retention| {
        let store = store.clone();
        tokio::task::spawn_blocking(move || store.prune(&retention))
    };
    let pruned = prune(Retention {
        max_runs: 1200,
        ..retention()
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!((pruned.removed, pruned.kept), (2345 - 1201, 1201));
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(
        count("SELECT MIN(started_at) FROM runs WHERE id <> 'old-7'").await,
        1146
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM runs WHERE id = 'old-7'").await,
        1
    );
    assert_eq!(count("SELECT COUNT(*) FROM calls").await, 1201);
    // By size: 1,000 runs' worth from the newest, the live one kept.
    let pruned = prune(Retention {
        max_runs: 100_000,
        max_age: None,
        max_bytes: 100 * 1000,
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!((pruned.removed, pruned.kept), (200, 1001));
    assert_eq!(
        count("SELECT MIN(started_at) FROM runs WHERE id <> 'old-7'").await,
        1346
    );
    drop(client);
    let _ = connection.await;
}
