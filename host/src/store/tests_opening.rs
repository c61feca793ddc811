//! The store where things stand in its way: a file where its directory
//! should be, a store another process is writing (reading must not wait
//! or write), a store file open to other users, a full disk.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::plugins::Request;

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
    let Backend::Disk(disk) = &store.backend else {
        panic!("on disk")
    };
    let reader = disk.reader.lock().unwrap();
    assert!(reader.is_readonly(rusqlite::MAIN_DB).unwrap());
    writer.execute_batch("COMMIT").unwrap();
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
    let begin = |prompt: String| {
        writer::Msg::Begin(writer::Begin {
            request: Arc::new(Request {
                run_id: uuid::Uuid::now_v7().to_string(),
                pipeline: "ask".into(),
                prompt,
                options: json!({}),
            }),
            follow_up_of: None,
            resynthesis_of: None,
            started_at: 0,
            deadline_at: 0,
        })
    };
    let batch = [begin("x".repeat(1 << 20)), begin("short".into())];
    let error = writer::transaction(&mut conn, &path, &batch).unwrap_err();
    assert!(error.contains("full"), "{error}");
    let runs: i64 = conn
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 0, "nothing half-written");
}
