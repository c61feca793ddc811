//! Benchmarks that print numbers (run with `cargo bench --bench pipeline`):
//! - one full run against the mock provider, 200 ms per panel model and
//!   200 ms for the synthesizer (ideal: ~400 ms — the fan-out is parallel);
//! - loading the plugins cold (compiling) and from the compile cache;
//! - the CPU time (user + system, this process) per run, over 200 quick runs
//!   (mock answers at once): run it once as is (pooling instance allocator)
//!   and once with `CHORUS_INSTANCE_ALLOCATOR=on-demand` to compare;
//! - the resident memory of an idle `chorus serve`.

#[path = "../../tests/support/mock.rs"]
#[allow(dead_code)]
mod mock;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chorus::app::Chorus;
use chorus::client::Client;
use chorus::config::Loaded;
use chorus::events;
use chorus::plugins::Registry;
use mock::{Mock, Step};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PANEL: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];

fn config(base_url: &str, cache_dir: &Path, cache: bool) -> String {
    let models: String = PANEL
        .iter()
        .chain(&["synth"])
        .map(|m| format!("[models.{m}]\n"))
        .collect();
    format!(
        r#"
[cache]
enabled = {cache}
dir = "{cache_dir}"
[store]
path = "{cache_dir}/runs.sqlite3"
[providers.mock]
base_url = "{base_url}"
{models}
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3", "m4", "m5"], synthesizers = ["synth"] }}
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

fn stats(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<44} n={:<3} min {:>8.2} ms  median {:>8.2} ms  max {:>8.2} ms",
        samples.len(),
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1])
    );
}

/// This process's CPU time so far (user + system), from /proc.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime: fields 14 and 15 of the line (from 1), 11 and 12 here.
    let hz = 100; // USER_HZ on Linux
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / hz)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mock = Mock::start().await;
        for model in PANEL {
            mock.script(model, [Step::answer_after(200, &format!("{model}: an answer of moderate length. ").repeat(20))]);
        }
        mock.script("synth", [Step::answer_after(200, "the synthesis")]);
        let cache_dir = tempfile::tempdir().unwrap();
        let parse = |cache: bool| {
            Loaded::parse(&config(&mock.base_url, cache_dir.path(), cache), "bench.toml", ".".into()).unwrap()
        };

        // Plugin loading: three plugins, cold (compiled) and cached. (Every
        // plugin, as `chorus check` loads them: a run loads a shipped
        // built-in when it first needs it.)
        let cold = (0..3).map(|_| {
            let started = Instant::now();
            Registry::load(&parse(false)).unwrap();
            started.elapsed()
        });
        stats("load 3 plugins, cold (compile)", cold.collect());
        Registry::load(&parse(true)).unwrap(); // fills the cache
        let cached = (0..10).map(|_| {
            let started = Instant::now();
            Registry::load(&parse(true)).unwrap();
            started.elapsed()
        });
        stats("load 3 plugins, from the compile cache", cached.collect());

        // A full run: select, prompt, 5 x 200 ms in parallel, 200 ms synthesis.
        let chorus = Arc::new(Chorus::load(parse(true)).unwrap());
        chorus.run(&Client::local(), "ask", "warm-up".into(), Default::default(), events::ignore()).await.unwrap();
        let mut runs = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            let result = chorus.run(&Client::local(), "ask", "q".into(), Default::default(), events::ignore()).await.unwrap();
            runs.push(started.elapsed());
            assert_eq!(result.summary, "Synthesis of 5 of 5 answers.");
        }
        stats("full run, 5 x 200 ms panel + 200 ms synth", runs);

        // CPU per run, with answers at once: what chorus itself costs.
        for model in PANEL {
            mock.script(model, [Step::answer(&format!("{model}: an answer of moderate length. ").repeat(20))]);
        }
        mock.script("synth", [Step::answer("the synthesis")]);
        chorus.run(&Client::local(), "ask", "warm-up".into(), Default::default(), events::ignore()).await.unwrap();
        let (runs, before) = (200u32, cpu_time());
        let started = Instant::now();
        for _ in 0..runs {
            chorus.run(&Client::local(), "ask", "q".into(), Default::default(), events::ignore()).await.unwrap();
        }
        let (cpu, wall) = (cpu_time() - before, started.elapsed());
        let allocator = std::env::var("CHORUS_INSTANCE_ALLOCATOR").unwrap_or_else(|_| "pooling".into());
        println!(
            "{:<44} {:.2} ms CPU per run (user+sys, mock included), {:.2} ms wall per run, {runs} runs",
            format!("cpu per run, {allocator} allocator"),
            cpu.as_secs_f64() * 1000.0 / f64::from(runs),
            wall.as_secs_f64() * 1000.0 / f64::from(runs),
        );

        // Idle RSS of the real binary after an MCP handshake.
        let file = cache_dir.path().join("bench.toml");
        std::fs::write(&file, config(&mock.base_url, cache_dir.path(), true)).unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_chorus"))
            .args(["serve", "--config", file.to_str().unwrap()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
        stdin.write_all(format!("{init}\n").as_bytes()).await.unwrap();
        lines.next_line().await.unwrap().expect("initialize answered");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id().unwrap())).unwrap_or_default();
        let rss = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: unavailable");
        println!("{:<44} {}", "idle `chorus serve` after initialize", rss.trim_start_matches("VmRSS:").trim());
        drop(stdin);
        let _ = child.wait().await;
    });
}
