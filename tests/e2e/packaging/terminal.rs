//! `chorus ask` on a terminal: the merge's text is printed as the
//! synthesizer model writes it (contract 0.5's `complete-answer`), while
//! the same command into a pipe prints the answer whole. The terminal is a
//! real pseudo-terminal, made by util-linux's `script` (Debian's bsdutils,
//! which every Debian system has).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::support::*;

/// `s` quoted for `sh -c`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread")]
async fn chorus_ask_on_a_terminal_prints_the_merge_as_it_is_written() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    let gate = Gate::default();
    mock.script(SYNTH, [Step::stream_gated("The merged ", &gate, "answer.")]);
    let config = write_config(&config(&mock, ""));
    let line = [
        chorus_bin(),
        "--config",
        config.path.to_str().unwrap(),
        "ask",
        "--quiet",
        "q",
    ]
    .iter()
    .map(|a| quoted(a))
    .collect::<Vec<_>>()
    .join(" ")
        // Progress and logs go to stderr: kept off the terminal's text.
        + " 2>/dev/null";
    // `command` sets the environment every CLI test gets; `script` runs
    // the line on a pseudo-terminal and copies what it prints.
    let mut command = command(&[]);
    let std = command.as_std_mut();
    let program = std::process::Command::new("script");
    let mut script = tokio::process::Command::from(program);
    script
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .envs(std.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let mut child = script.spawn().expect("util-linux `script` runs");
    let mut stdout = child.stdout.take().unwrap();
    let mut printed = Vec::new();
    let arrived = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buffer = [0u8; 1024];
        while !String::from_utf8_lossy(&printed).contains("The merged ") {
            match stdout.read(&mut buffer).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => printed.extend_from_slice(&buffer[..n]),
            }
        }
        true
    })
    .await
    .unwrap_or(false);
    assert!(
        arrived,
        "the merge's first words were not printed while the synthesizer was held: {:?}",
        String::from_utf8_lossy(&printed)
    );
    gate.open();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_to_end(&mut printed))
        .await
        .expect("chorus finished")
        .unwrap();
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status}");
    let printed = String::from_utf8_lossy(&printed).replace("\r\n", "\n");
    assert_eq!(printed, "The merged answer.\n");

    // Into a pipe, the same run's answer is printed whole, once.
    for model in PANEL {
        mock.script(model, [Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::stream("The merged answer.")]);
    let (code, stdout, stderr) = run_cli(&[
        "--config",
        config.path.to_str().unwrap(),
        "ask",
        "--quiet",
        "q",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "The merged answer.\n");
}
