//! `chorus ask`: one run from the terminal. Live progress on stderr (which
//! model answered, how long it took, which failed and why), the answer on
//! stdout, or the whole record with `--json`. Ctrl-C cancels the run.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use crate::app::Chorus;
use crate::pipeline::Event;
use crate::record::{AnswerKind, RunRecord};

#[derive(clap::Args)]
pub struct Args {
    /// The question. Read from stdin when left out or `-`.
    prompt: Option<String>,
    /// The pipeline to run. Default: the config's default_pipeline.
    #[arg(long, short)]
    pipeline: Option<String>,
    /// Print the full structured result as JSON instead of the answer.
    #[arg(long)]
    json: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// Follow up an earlier run (its id, a unique prefix, or `last`): the
    /// models see its question and answer first.
    #[arg(long, value_name = "RUN")]
    follow_up: Option<String>,
    /// A pipeline option, e.g. `-o agents=8` (repeatable; see `chorus check`).
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE", value_parser = parse_option)]
    options: Vec<(String, serde_json::Value)>,
}

/// `NAME=VALUE`; the value is JSON when it parses as JSON (`8`, `true`),
/// else a string. The pipeline checks it against the option's type.
fn parse_option(text: &str) -> Result<(String, serde_json::Value), String> {
    let (name, value) = text.split_once('=').ok_or("expected NAME=VALUE")?;
    let value =
        serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
    Ok((name.trim().to_owned(), value))
}

pub async fn run(chorus: Arc<Chorus>, args: Args) -> ExitCode {
    let prompt = match args.prompt.as_deref() {
        Some(p) if p != "-" => p.to_owned(),
        _ => {
            let mut text = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut text) {
                eprintln!("chorus: cannot read the prompt from stdin: {e}");
                return ExitCode::from(2);
            }
            text
        }
    };
    let Some(pipeline) = args
        .pipeline
        .as_deref()
        .or_else(|| chorus.loaded().default_pipeline())
    else {
        let names: Vec<_> = chorus.runner.pipelines().map(|(n, _)| n.as_str()).collect();
        eprintln!(
            "chorus: choose a pipeline with --pipeline (available: {})",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let progress: crate::pipeline::Progress = if args.quiet {
        crate::pipeline::events::ignore()
    } else {
        Arc::new(render)
    };
    let mut options: serde_json::Map<String, serde_json::Value> =
        args.options.into_iter().collect();
    if let Some(run) = args.follow_up {
        options.insert(crate::pipeline::options::FOLLOW_UP_OF.into(), run.into());
    }
    let outcome = tokio::select! {
        outcome = chorus.run(pipeline, prompt, options, progress) => outcome,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("chorus: cancelled");
            return ExitCode::from(130);
        }
    };
    match outcome {
        Ok(result) => print(&result, args.json, args.quiet),
        Err(e) => {
            eprintln!("chorus: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(super) fn render(event: Event) {
    let line = match event {
        Event::Stage(stage) => format!("… {}", stage.as_str()),
        Event::FanOut { calls } => format!("  {calls} requests in flight"),
        Event::CallFinished(call) => {
            let who = if call.stage == "fan-out" {
                call.model.clone()
            } else {
                format!("{} [{}]", call.model, call.stage)
            };
            let secs = f64::from(call.latency_ms) / 1000.0;
            match &call.error {
                None => format!(
                    "  ✓ {who:<40} {secs:>6.2}s  {} tokens",
                    call.completion_tokens.unwrap_or(0)
                ),
                Some(error) => format!("  ✗ {who:<40} {secs:>6.2}s  {error}"),
            }
        }
        Event::Note { plugin, message } => format!("  · {plugin}: {message}"),
        Event::Started(_) | Event::Planned(_) | Event::CallStarted { .. } => return,
    };
    eprintln!("{line}");
}

pub(super) fn print(result: &RunRecord, json: bool, quiet: bool) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        serde_json::to_string_pretty(result)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(stdout, "{text}"))
    } else {
        writeln!(stdout, "{}", result.answer.trim_end())
    };
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("chorus: cannot write the answer: {e}");
        return ExitCode::FAILURE;
    }
    if !quiet && !json {
        let cost = if result.usage.cost_usd > 0.0 {
            format!(", ${:.4}", result.usage.cost_usd)
        } else {
            String::new()
        };
        let rule = if std::io::stderr().is_terminal() {
            "─".repeat(60)
        } else {
            "---".to_owned()
        };
        eprintln!(
            "{rule}\n{} ({:.1}s{cost})",
            result.summary,
            result.elapsed_ms as f64 / 1000.0
        );
        for note in &result.notes {
            eprintln!("  note: {note}");
        }
    }
    if result.kind == AnswerKind::None {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
