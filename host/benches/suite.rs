//! The benchmark suite: `cargo bench --bench suite` prints a table and
//! writes `docs/benchmarks.md` with the machine and the command.
//!
//! chorus runs as a real `chorus serve` child driven over MCP stdio by a
//! raw JSON-RPC client, against a zero-latency provider in this process (a
//! minimal HTTP/1.1 keep-alive server: it parses nothing but the request
//! head and the body's length, so it is never the bottleneck). Measured
//! (see `suite/measure.rs`):
//! - added latency at concurrency 1: a run's time minus the same six calls
//!   (five in parallel, then one) made by a bare reqwest client, in the
//!   same process and run;
//! - chorus's CPU per MCP round trip alone (an unknown tool);
//! - throughput and chorus's CPU per run at concurrency 16 and 64;
//! - RSS after thousands of runs, and memory per in-flight run (2,000
//!   runs in flight against a slow model);
//! - idle RSS after `initialize`;
//! - spawn → `initialize`, with a cold and a warm compile cache;
//! - new upstream connections per 1,000 runs after warm-up;
//! - instantiate + call p50/p99 per shipped strategy plugin, in process.
//!
//! Compare mode: `cargo bench --bench suite -- --baseline PATH/TO/chorus`
//! measures this build and another chorus binary in turns (`--rounds N`,
//! default 2, the order swapped each round so drift hits both alike) and
//! prints each figure's range for both and their ratio. It writes no file.
//!
//! History mode: `cargo bench --bench suite -- history` measures what a
//! kept history costs — start, reads, pruning — at 10,000 and 1,000,000
//! runs, on SQLite (`suite/history.rs`) and PostgreSQL
//! (`suite/history_pg.rs`), and writes nothing. `history --binary PATH`
//! measures another chorus binary (say a release build, without building
//! the bench in release) against the store this build writes.
//!
//! `CHORUS_BENCH_QUICK=1` runs fewer iterations (for a smoke test).

#[path = "suite/history.rs"]
mod history;
#[path = "suite/history_pg.rs"]
mod history_pg;
#[path = "suite/measure.rs"]
mod measure;
#[path = "suite/plugin_calls.rs"]
mod plugin_calls;
#[path = "../../tests/support/postgres.rs"]
mod postgres;
#[path = "suite/server.rs"]
mod server;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use measure::{Figure, percentile};

struct Args {
    baseline: Option<PathBuf>,
    rounds: usize,
    history: bool,
    /// The binary `history` measures (this build's by default).
    binary: Option<PathBuf>,
}

/// `cargo bench` adds `--bench`; anything else unknown is an error.
fn args() -> Args {
    let mut args = Args {
        baseline: None,
        rounds: 2,
        history: false,
        binary: None,
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        match arg.as_str() {
            "--bench" => {}
            "history" => args.history = true,
            "--baseline" | "--binary" => {
                let path = given
                    .next()
                    .unwrap_or_else(|| panic!("{arg} takes a path to a chorus binary"));
                let path = PathBuf::from(path);
                assert!(path.is_file(), "{arg} {}: no such file", path.display());
                if arg == "--binary" {
                    args.binary = Some(path);
                } else {
                    args.baseline = Some(path);
                }
            }
            "--rounds" => {
                args.rounds = given
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--rounds takes a positive number");
            }
            other => {
                panic!(
                    "unknown argument {other:?}: the suite takes --baseline PATH, --rounds N, or history [--binary PATH]"
                )
            }
        }
    }
    args
}

fn main() {
    let args = args();
    let quick = std::env::var_os("CHORUS_BENCH_QUICK").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if args.history {
        let binary = args.binary.as_deref().unwrap_or(this_build());
        println!("{}", runtime.block_on(history::run(binary, quick)));
        return;
    }
    match args.baseline {
        Some(baseline) => {
            let table = runtime.block_on(compare(&baseline, args.rounds, quick));
            println!("{table}");
        }
        None => {
            let table = runtime.block_on(single(quick));
            println!("{table}");
            if !quick {
                let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks.md");
                let analysis = std::fs::read_to_string(&doc)
                    .ok()
                    .and_then(|old| old.find(ANALYSIS).map(|at| old[at..].to_owned()))
                    .unwrap_or_default();
                std::fs::write(&doc, document(&table) + "\n" + &analysis).unwrap();
                println!("written to {}", doc.display());
            }
        }
    }
}

fn this_build() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_chorus"))
}

/// One pass over this build, and the per-plugin timings.
async fn single(quick: bool) -> String {
    let provider = server::provider().await;
    let dir = tempfile::tempdir().unwrap();
    let config = server::config(&provider.url, dir.path(), server::Flavor::Full);
    eprintln!("this build…");
    let figures = measure::pass(this_build(), &config, &provider, quick).await;
    let mut out =
        String::from("| measure | measured | target | met |\n| --- | --- | --- | --- |\n");
    for f in &figures {
        let measured = match &f.detail {
            Some(detail) => format!("{} ({detail})", f.unit.show(f.value)),
            None => f.unit.show(f.value),
        };
        let _ = writeln!(
            out,
            "| {} | {measured} | {} | {} |",
            f.what,
            f.target_text(),
            met(f.met())
        );
    }
    eprintln!("instantiate + call, per plugin…");
    let cache = tempfile::tempdir().unwrap();
    let samples = if quick { 15 } else { 300 };
    for timed in plugin_calls::measure(cache.path(), samples).await {
        let measured = match &timed.samples {
            Ok(samples) => format!(
                "{:.0} µs / {:.0} µs",
                percentile(samples, 50).as_secs_f64() * 1e6,
                percentile(samples, 99).as_secs_f64() * 1e6
            ),
            Err(e) => format!("failed: {e}"),
        };
        let _ = writeln!(
            out,
            "| `{}` ({}): instantiate + call, p50 / p99 | {measured} | – | – |",
            timed.plugin, timed.kind
        );
    }
    out
}

/// This build and `baseline`, measured in turns; a table of ranges and
/// ratios.
async fn compare(baseline: &Path, rounds: usize, quick: bool) -> String {
    let provider = server::provider().await;
    let dir = tempfile::tempdir().unwrap();
    let ours = measure::config_for(this_build(), &provider, dir.path()).await;
    let theirs = measure::config_for(baseline, &provider, dir.path()).await;
    let mut passes: [Vec<Vec<Figure>>; 2] = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let (binary, (flavor, config)) = if which == 0 {
                (this_build(), &ours)
            } else {
                (baseline, &theirs)
            };
            eprintln!(
                "round {}/{rounds}: {} ({flavor:?} config)…",
                round + 1,
                binary.display()
            );
            passes[which].push(measure::pass(binary, config, &provider, quick).await);
        }
    }
    let mut out = format!(
        "this build: {}\nbaseline:   {} ({:?} config)\n{rounds} rounds each, interleaved\n\n\
         | measure | this build | baseline | ratio (this ÷ baseline) | target | met |\n\
         | --- | --- | --- | --- | --- | --- |\n",
        this_build().display(),
        baseline.display(),
        theirs.0,
    );
    let [ours, theirs] = &passes;
    for (i, first) in ours[0].iter().enumerate() {
        let values = |passes: &[Vec<Figure>]| -> Vec<f64> {
            passes
                .iter()
                .filter_map(|p| p.get(i).map(|f| f.value))
                .collect()
        };
        let (a, b) = (values(ours), values(theirs));
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let range = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if v.len() > 1 {
                format!("{} – {}", first.unit.show(lo), first.unit.show(hi))
            } else {
                first.unit.show(lo)
            }
        };
        let ratio = if mean(&b) > 0.0 {
            format!("{:.2}", mean(&a) / mean(&b))
        } else {
            "–".into()
        };
        let judged = Figure {
            what: String::new(),
            value: mean(&a),
            unit: first.unit,
            target: first.target,
            detail: None,
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {ratio} | {} | {} |",
            first.what,
            range(&a),
            range(&b),
            first.target_text(),
            met(judged.met())
        );
    }
    out
}

fn met(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "–",
    }
}

/// Where the hand-written analysis of docs/benchmarks.md begins: kept
/// when the suite writes the file anew.
const ANALYSIS: &str = "<!-- analysis: kept when the suite rewrites this file -->";

fn document(table: &str) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "# Benchmarks\n\n\
         Produced by `cargo bench --bench suite` (release build) on {cores} cores of {cpu}, \
         Linux {kernel_trimmed}. chorus runs as `chorus serve`, driven over MCP stdio by a raw \
         JSON-RPC client, against a zero-latency provider in the bench process (a minimal \
         HTTP/1.1 keep-alive server); the default `ask` pipeline: five panel calls and one \
         merge. The run store is on (a temporary SQLite file), as in real use.\n\n\
         {table}\n\
         Added latency is a run's round trip through chorus minus the same six calls (five \
         in parallel, then one) made by a bare reqwest client in the bench process, \
         interleaved with the runs. CPU per run is chorus's user + system time \
         (`/proc/PID/stat`) over the runs at that concurrency; CPU per MCP round trip is the \
         same over `tools/call`s of a tool that does not exist. Memory per in-flight run is \
         the peak RSS growth while the runs wait on slow models, divided by their number. \
         Instantiate + call is one call of each plugin of the default plugins.toml on a fresh \
         sandbox, in the bench process, with the models it asks for answering at once.\n",
        kernel_trimmed = kernel.trim(),
    )
}
