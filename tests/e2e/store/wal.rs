//! The run store's write-ahead log after a clean exit (issue 39): whether
//! the server stops on SIGTERM (HTTP) or its client closes stdin (stdio),
//! every connection closes and SQLite removes the `-wal` file, so the next
//! start has no log to read, however much was written. (That the log stays
//! bounded while a server runs under steady reads is
//! `store::sqlite::checkpoint`'s test.)

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::support::http::{HttpServer, TOKEN, messages, tool_call};
use crate::support::*;

fn with_store(mock: &Mock, dir: &Path) -> String {
    config(
        mock,
        &format!(
            "[store]\npath = \"{}\"\n",
            dir.join("runs.sqlite3").display()
        ),
    )
}

fn answering(mock: &Mock) {
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
}

fn log_of(dir: &Path) -> std::path::PathBuf {
    dir.join("runs.sqlite3-wal")
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_leaves_no_write_ahead_log() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(&with_store(&mock, dir.path()));
    let mut server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    for id in 0..3 {
        let answered = messages(
            server
                .post(Some(TOKEN), &tool_call(id, "ask", "q"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(answered.last().unwrap().to_string().contains("merged"));
    }
    assert!(
        log_of(dir.path()).exists(),
        "runs were written through the log"
    );
    let status = server.terminate().await;
    assert!(status.success(), "{status}");
    assert!(
        !log_of(dir.path()).exists(),
        "a clean stop leaves no -wal file"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_stdin_leaves_no_write_ahead_log() {
    let mock = Mock::start().await;
    answering(&mock);
    let dir = tempfile::tempdir().unwrap();
    let mut raw = Raw::start(&with_store(&mock, dir.path())).await;
    raw.initialize(json!({})).await;
    raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "ask", "arguments": {"prompt": "q"}}}))
        .await;
    let (answered, _) = raw.response(&json!(1)).await;
    assert!(answered.to_string().contains("merged"), "{answered}");
    raw.close_stdin();
    let status = tokio::time::timeout(Duration::from_secs(20), raw.child.wait())
        .await
        .expect("chorus ends when its client closes stdin")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(
        !log_of(dir.path()).exists(),
        "a clean end leaves no -wal file"
    );
}
