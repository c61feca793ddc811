//! Memory for big responses (run with `cargo bench --bench memory`): the
//! real `chorus serve` against the mock, measured from /proc — the rise of
//! the peak (VmHWM, reset before each case) over the resident size before
//! the call, and what stays resident (VmRSS) a second after five runs:
//! - an 8 MB JSON body made of 300,000 content parts (the issue's case);
//! - an 8 MB answer streamed as server-sent events, cut to fit the
//!   synthesizer's context window (the response's own cost, plus the
//!   synthesizer plugin's copy of it);
//! - the same, merged whole by a synthesizer with a 1M-token window (the
//!   answer is then also sent on to the synthesizer model).

#[path = "../../tests/support/mock.rs"]
#[allow(dead_code)]
mod mock;

use std::path::Path;
use std::time::Duration;

use mock::{Mock, Step};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

fn config(base_url: &str, cache_dir: &Path, synth_window: u32) -> String {
    format!(
        r#"
[cache]
dir = "{cache_dir}"
[providers.mock]
base_url = "{base_url}"
max_response_bytes = 16777216
[models.big]
context_window = 1000000
[models.small]
context_window = 1000000
[models.synth]
context_window = {synth_window}
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["big", "small"], synthesizers = ["synth"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
[pipelines.ask]
description = "bench"
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        cache_dir = cache_dir.display()
    )
}

/// VmRSS and VmHWM of `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Session {
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Session {
    async fn send(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    /// Calls `ask` and waits for its result; returns the response's size.
    async fn ask(&mut self) -> usize {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ask","arguments":{{"prompt":"q"}}}}}}"#
        ))
        .await;
        loop {
            let line = self.lines.next_line().await.unwrap().expect("a response");
            if line.contains(&format!("\"id\":{id}")) {
                assert!(
                    line.contains("\"kind\""),
                    "{}",
                    &line[..line.len().min(500)]
                );
                return line.len();
            }
        }
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let parts = || Step::BigParts {
            parts: 300_000,
            part_bytes: 1,
        };
        let streamed = || Step::Big { bytes: 8 << 20 };
        measure(
            16_000,
            vec![
                ("8 MB JSON body, 300,000 content parts", parts(), 8.1),
                (
                    "8 MB answer, streamed (SSE), cut to fit the synthesizer",
                    streamed(),
                    8.6,
                ),
            ],
        )
        .await;
        measure(
            1_000_000,
            vec![("8 MB answer, streamed (SSE), merged whole", streamed(), 8.6)],
        )
        .await;
    });
}

/// Runs each case five times on one `chorus serve` whose synthesizer has
/// a window of `synth_window` tokens, and prints what memory did.
async fn measure(synth_window: u32, cases: Vec<(&str, Step, f64)>) {
    {
        let mock = Mock::start().await;
        mock.script("small", [Step::answer("a small answer")]);
        mock.script("synth", [Step::answer("the synthesis")]);
        let cache_dir = tempfile::tempdir().unwrap();
        let file = cache_dir.path().join("bench.toml");
        std::fs::write(
            &file,
            config(&mock.base_url, cache_dir.path(), synth_window),
        )
        .unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_chorus"))
            .args(["serve", "--config", file.to_str().unwrap()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let mut session = Session {
            stdin: child.stdin.take().unwrap(),
            lines: BufReader::new(child.stdout.take().unwrap()).lines(),
            next_id: 1,
        };
        session
            .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#)
            .await;
        session
            .lines
            .next_line()
            .await
            .unwrap()
            .expect("initialize answered");
        session
            .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;

        // Warm up: the first run allocates what every run reuses.
        mock.script("big", [Step::answer("warm-up")]);
        session.ask().await;
        session.ask().await;

        for (label, step, body_mb) in cases {
            mock.script("big", [step]);
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (before, _) = memory(pid);
            // Reset the peak to the current size (Linux: clear_refs 5).
            let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
            let mut peak_rise = 0;
            for round in 0..5 {
                session.ask().await;
                let (_, peak) = memory(pid);
                peak_rise = peak_rise.max(peak.saturating_sub(before));
                if round == 0 {
                    println!("{label}");
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (after, _) = memory(pid);
            let mb = |kib: u64| kib as f64 / 1024.0;
            println!(
                "  resident before {:>7.1} MB   peak rise {:>6.1} MB ({:.1}x the {body_mb} MB response)   retained after 5 runs {:>+6.1} MB",
                mb(before),
                mb(peak_rise),
                mb(peak_rise) / body_mb,
                mb(after) - mb(before),
            );
        }
        drop(session);
        let _ = child.wait().await;
    }
}
