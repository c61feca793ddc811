//! `chorus experiments [NAME]`: where each experiment of the configuration
//! stands, read from the run store — per variant its share of new runs,
//! runs, failures, cost per run, p95 time and mean rating with its
//! anytime-valid interval; the status (`running`, `winner: X`, a variant
//! stopped by a guardrail and why); and the share of runs over time.
//! `--json` prints the same as JSON.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::app::Chorus;
use crate::app::experiments::Shown;
use crate::experiment::Verdict;
use crate::experiment::shadow::Standing;
use crate::experiment::timeline;

/// Windows the timeline is cut into.
const WINDOWS: usize = 10;

#[derive(clap::Args)]
pub struct Args {
    /// The experiment (`[experiments.NAME]`); every one when left out.
    name: Option<String>,
    /// As JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(chorus: Arc<Chorus>, args: Args) -> ExitCode {
    let names = match &args.name {
        Some(name) => vec![name.clone()],
        None => chorus.experiment_names(),
    };
    if names.is_empty() {
        eprintln!(
            "chorus: the configuration has no experiment: add one, e.g. [experiments.ask] variants = {{ ask = 1, self-moa = 1 }} (docs/experiments.md)"
        );
        return ExitCode::from(2);
    }
    let mut shown = Vec::new();
    for name in &names {
        match chorus.experiment(name).await {
            None => {
                eprintln!(
                    "chorus: no experiment `{name}`: the configuration has {}",
                    list(&chorus.experiment_names())
                );
                return ExitCode::from(2);
            }
            Some(Err(e)) => {
                eprintln!("chorus: the run store could not be read: {e}");
                return ExitCode::from(1);
            }
            Some(Ok(one)) => shown.push(one),
        }
    }
    if args.json {
        let all: Vec<Value> = shown.iter().map(as_json).collect();
        let out = if args.name.is_some() {
            all.into_iter().next().unwrap_or(Value::Null)
        } else {
            Value::Array(all)
        };
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        let text: Vec<String> = shown.iter().map(as_text).collect();
        print!("{}", text.join("\n"));
    }
    ExitCode::SUCCESS
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One experiment as JSON: a variants experiment's verdict, its status in
/// words and its timeline; a shadow experiment's standing.
pub fn as_json(shown: &Shown) -> Value {
    match shown {
        Shown::Variants { verdict, timeline } => {
            let mut value = serde_json::to_value(&**verdict).unwrap_or_else(|_| json!({}));
            value["kind"] = json!("variants");
            value["status_line"] = json!(verdict.status_line());
            value["timeline"] = json!(timeline::windows(timeline, WINDOWS));
            value
        }
        Shown::Shadow(standing) => {
            let mut value = serde_json::to_value(standing).unwrap_or_else(|_| json!({}));
            value["kind"] = json!("shadow");
            value
        }
    }
}

/// One experiment as a table.
pub fn as_text(shown: &Shown) -> String {
    match shown {
        Shown::Variants { verdict, timeline } => variants_text(verdict, timeline),
        Shown::Shadow(standing) => shadow_text(standing),
    }
}

fn shadow_text(s: &Standing) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "experiment {} · shadow of {} · candidate {} · judge {} · {:.0}% of runs · {}",
        s.name,
        s.pipeline,
        s.synthesizer,
        s.judge,
        s.share * 100.0,
        s.status
    );
    let _ = writeln!(
        out,
        "  judged {} · wins {} · losses {} · ties {}",
        s.judged, s.wins, s.losses, s.ties
    );
    if let (Some(rate), Some([low, high])) = (s.win_rate, s.interval) {
        let _ = writeln!(
            out,
            "  win rate {rate:.3} [{low:.3}, {high:.3}] (a tie counts half; {:.0} % anytime-valid)",
            s.confidence * 100.0
        );
    }
    let cost = |c: Option<f64>| c.map_or_else(|| "-".to_owned(), |c| format!("${c:.4}"));
    let _ = writeln!(
        out,
        "  cost per run: {}'s merge {} · the candidate's {} · the judge {}",
        s.pipeline,
        cost(s.baseline_cost_per_run_usd),
        cost(s.candidate_cost_per_run_usd),
        cost(s.judge_cost_per_run_usd)
    );
    let _ = writeln!(
        out,
        "  spent today ${:.4} of ${} a day",
        s.spent_today_usd, s.budget_usd_per_day
    );
    out
}

fn variants_text(verdict: &Verdict, points: &[crate::store::experiments::Point]) -> String {
    let mut out = String::new();
    let metric = verdict
        .metric
        .as_deref()
        .map_or_else(|| "no metric".to_owned(), |m| format!("metric {m}"));
    let mode = if verdict.adaptive {
        format!(
            "adaptive, {:.0} % anytime-valid",
            verdict.confidence * 100.0
        )
    } else {
        "fixed weights".to_owned()
    };
    let _ = writeln!(
        out,
        "experiment {} · {metric} · {mode} · {}",
        verdict.name,
        verdict.status_line()
    );
    let _ = writeln!(
        out,
        "  {:<16} {:>6} {:>6} {:>7} {:>10} {:>8} {:>6} {:>8}  interval",
        "variant", "share", "runs", "failed", "cost/run", "p95", "rated", "mean"
    );
    for v in &verdict.variants {
        let _ = writeln!(
            out,
            "  {:<16} {:>5.0}% {:>6} {:>7} {:>10} {:>8} {:>6} {:>8}  {}",
            v.name,
            v.share * 100.0,
            v.runs,
            v.failure_rate
                .map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", r * 100.0)),
            v.cost_per_run_usd
                .map_or_else(|| "-".to_owned(), |c| format!("${c:.4}")),
            v.p95_ms.map_or_else(
                || "-".to_owned(),
                |ms| format!("{:.1} s", ms as f64 / 1000.0)
            ),
            v.rated,
            v.mean.map_or_else(|| "-".to_owned(), |m| format!("{m:.3}")),
            v.interval
                .map_or_else(|| "-".to_owned(), |[l, h]| format!("[{l:.3}, {h:.3}]")),
        );
    }
    if let crate::experiment::Status::Winner { said, .. } = &verdict.status {
        let _ = writeln!(out, "  {said}");
    }
    for v in &verdict.variants {
        if let Some(reason) = &v.stopped {
            let _ = writeln!(out, "  {} stopped: {reason}", v.name);
        }
    }
    for note in &verdict.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    let windows = timeline::windows(points, WINDOWS);
    if !windows.is_empty() {
        let _ = writeln!(
            out,
            "  share of runs over time ({} runs, oldest first):",
            points.len()
        );
        for window in &windows {
            let shares: Vec<String> = verdict
                .variants
                .iter()
                .map(|v| {
                    format!(
                        "{} {:.0}%",
                        v.name,
                        window.shares.get(&v.name).copied().unwrap_or(0.0) * 100.0
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "    {} · {:>4} runs · {}",
                crate::record::format_time(window.from),
                window.runs,
                shares.join(" · ")
            );
        }
    }
    out
}
