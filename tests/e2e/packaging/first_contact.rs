//! First contact: a missing key or an unreachable host fails in one line
//! naming the variable or the host, not once per model; identical failures
//! are grouped; and a config that names a directory, a device or a FIFO,
//! or absurd values, fails at once with file:line:key.

use std::time::Duration;

use crate::support::*;

async fn run(args: &[&str]) -> (i32, String, String) {
    let output = tokio::time::timeout(Duration::from_secs(30), command(args).output())
        .await
        .expect("chorus finished within 30 s: nothing blocks")
        .expect("chorus ran");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Lines of chorus's own messages (not log lines).
fn said(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("chorus: "))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_key_is_one_line_naming_the_variable_and_where_it_comes_from() {
    let mock = Mock::start().await;
    let text = config(&mock, "").replace(KEY_VAR, "CHORUS_TEST_UNSET_KEY");
    let file = write_config(&text);
    let (code, stdout, stderr) = run(&["ask", "--config", file.path.to_str().unwrap(), "q"]).await;
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert_eq!(
        said(&stderr),
        [
            "chorus: provider `mock` needs an API key in the environment variable CHORUS_TEST_UNSET_KEY, which is not set; \
          set it in the environment chorus runs in (for an MCP client, the server's `env` setting)"
        ],
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("CHORUS_TEST_UNSET_KEY").count(),
        1,
        "{stderr}"
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_host_is_one_line_naming_it() {
    let mock = Mock::start().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let text = config(&mock, "").replace(&mock.base_url, &format!("http://127.0.0.1:{port}/v1"));
    let file = write_config(&text);
    let (code, _, stderr) = run(&["ask", "--config", file.path.to_str().unwrap(), "q"]).await;
    assert_eq!(code, 1);
    let lines = said(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(&format!(
            "chorus: cannot reach provider `mock` at 127.0.0.1:{port} (providers.mock.base_url): connection: cannot connect to 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn identical_failures_are_told_once() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::status(403, "Your region is not supported")]);
    }
    let file = write_config(&config(&mock, ""));
    let (code, _, stderr) = run(&["ask", "--config", file.path.to_str().unwrap(), "q"]).await;
    assert_eq!(code, 1);
    assert_eq!(
        stderr.matches("Your region is not supported").count(),
        3,
        "once live, once in the summary, once in the notes: {stderr}"
    );
    assert!(
        stderr.contains(
            "note: m1, m2, m3, m4, m5 failed: HTTP error (HTTP 403): Your region is not supported"
        ),
        "{stderr}"
    );
    // The calls fail at once, in any order: the first shown is told in
    // full, the other four refer to it.
    let first = PANEL
        .iter()
        .find(|model| {
            stderr.lines().any(|l| {
                l.contains(&format!("✗ {model} ")) && l.ends_with("Your region is not supported")
            })
        })
        .unwrap_or_else(|| panic!("one failure in full: {stderr}"));
    for model in PANEL.iter().filter(|m| *m != first) {
        assert!(
            stderr.lines().any(|l| l.contains(&format!("✗ {model} "))
                && l.ends_with(&format!("(the same as {first})"))),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains(
            "No answer: all 5 model calls failed. Every one: http-status (HTTP 403): Your region is not supported"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn devices_fifos_and_directories_fail_at_once() {
    let mock = Mock::start().await;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("plugin.wasm");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (path, says) in [
        (fifo.display().to_string(), "not a regular file"),
        ("/dev/zero".to_owned(), "not a regular file"),
        (dir.path().display().to_string(), "a directory"),
    ] {
        let extra = format!(
            "\n[plugins.odd]\npath = \"{path}\"\n\n[pipelines.odd]\ndescription = \"d\"\nselector = \"odd\"\nprompter = \"passthrough\"\nsynthesizer = \"synthesize\"\n"
        );
        let file = write_config(&config(&mock, &extra));
        let (code, _, stderr) = run(&["check", "--config", file.path.to_str().unwrap()]).await;
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains("`plugins.odd.path`") && stderr.contains(says),
            "{path}: {stderr}"
        );
        let (code, _, stderr) = run(&["check", "--config", &path]).await;
        assert_eq!(code, 2);
        assert!(
            stderr.contains("cannot read the config file") && stderr.contains(says),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn absurd_values_fail_the_check_with_file_line_and_key() {
    let mock = Mock::start().await;
    for (from, to, key) in [
        (
            "run_timeout = \"20s\"",
            "run_timeout = \"18446744073709551615s\"",
            "limits.run_timeout",
        ),
        (
            "connect_timeout = \"2s\"",
            "connect_timeout = \"2s\"\nmax_concurrency = 9223372036854775807",
            "providers.mock.max_concurrency",
        ),
    ] {
        let file = write_config(&config(&mock, "").replace(from, to));
        let (code, _, stderr) = run(&["check", "--config", file.path.to_str().unwrap()]).await;
        assert_eq!(code, 2, "{stderr}");
        let line = said(&stderr)[0];
        assert!(
            line.starts_with(&format!("chorus: {}:", file.path.display()))
                && line.contains(&format!("`{key}`")),
            "{line}"
        );
    }
}
