//! `chorus ask`: one run from the terminal. Live progress on stderr (which
//! model answered, how long it took, which failed and why — each distinct
//! failure in full once), the answer on stdout, or the whole record with
//! `--json`. Ctrl-C cancels the run. A first run that cannot work at all
//! (no usable key, no reachable provider) says why in one line.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::app::Chorus;
use crate::client::Client;
use crate::events::Event;
use crate::record::{AnswerKind, CallRecord, RunRecord, show_usd};

mod attach;

#[derive(clap::Args)]
pub struct Args {
    /// The question. Read from stdin when left out or `-`.
    prompt: Option<String>,
    /// The pipeline to run. Default: the config's default_pipeline.
    #[arg(long, short, env = crate::config::PIPELINE_ENV)]
    pub pipeline: Option<String>,
    #[command(flatten)]
    pub panel: super::Panel,
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
    /// Show what the run would send — the selector's plan, every request
    /// with its full messages, the synthesizer's own requests given
    /// placeholder answers, the worst-case cost — without calling any model.
    #[arg(long)]
    dry_run: bool,
    /// Attach a file: an image (PNG, JPEG, WebP, GIF), a PDF, audio, or a
    /// text file (repeatable). `-` reads the bytes from stdin (give the
    /// prompt as an argument then, and its type with --attach-type).
    #[arg(long, value_name = "FILE")]
    attach: Vec<std::path::PathBuf>,
    /// The media type of the `--attach -` bytes, e.g. `image/png`: checked
    /// against what the bytes are.
    #[arg(long, value_name = "MIME")]
    attach_type: Option<String>,
    /// A pipeline option, e.g. `-o agents=8` (repeatable; see `chorus check`).
    #[arg(long = "option", short = 'o', value_name = "NAME=VALUE", value_parser = parse_option)]
    options: Vec<(String, serde_json::Value)>,
    /// Let each panel member search the web (the `web_search` option); the
    /// answer ends with the numbered sources they cited.
    #[arg(long)]
    web: bool,
}

/// `NAME=VALUE`; the value is JSON when it parses as JSON (`8`, `true`),
/// else a string. The pipeline checks it against the option's type.
fn parse_option(text: &str) -> Result<(String, serde_json::Value), String> {
    let (name, value) = text.split_once('=').ok_or("expected NAME=VALUE")?;
    let value =
        serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
    Ok((name.trim().to_owned(), value))
}

/// The prompt from `input` (stdin), read no further than `limit` bytes and
/// one more: an endless or huge input stops there with the limit's name,
/// instead of being read whole into memory first.
fn read_prompt(input: impl Read, limit: usize) -> Result<String, String> {
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    input
        .take(cap)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
    if bytes.len() > limit {
        return Err(format!(
            "the prompt on stdin is over the limit of {limit} bytes (limits.max_prompt_bytes); \
             shorten it, or raise the limit in the configuration"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "the prompt on stdin is not UTF-8 text (at byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

pub async fn run(chorus: Arc<Chorus>, mut args: Args) -> ExitCode {
    let prompt = match args.prompt.as_deref() {
        Some(p) if p != "-" => p.to_owned(),
        _ => {
            let limit = chorus.runner().loaded.config.limits.max_prompt_bytes;
            match read_prompt(std::io::stdin().lock(), limit) {
                Ok(text) => text,
                Err(message) => {
                    eprintln!("chorus: {message}");
                    return ExitCode::from(2);
                }
            }
        }
    };
    let limits = chorus.runner().loaded.config.limits.attachments();
    let attachments = match attach::read(&args, &limits) {
        Ok(attachments) => attachments,
        Err(message) => {
            eprintln!("chorus: {message}");
            return ExitCode::from(2);
        }
    };
    let question = crate::pipeline::Question {
        text: prompt,
        attachments,
        ..Default::default()
    };
    let runner = chorus.runner();
    let Some(pipeline) = args
        .pipeline
        .as_deref()
        .or_else(|| runner.loaded.default_pipeline())
    else {
        let names: Vec<_> = runner.pipelines().map(|(n, _)| n.as_str()).collect();
        eprintln!(
            "chorus: choose a pipeline with --pipeline (available: {})",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    if args.web {
        let web = crate::pipeline::options::WEB_SEARCH.to_owned();
        args.options.push((web, serde_json::Value::Bool(true)));
    }
    if args.dry_run {
        if args.follow_up.is_some() {
            eprintln!("chorus: --dry-run cannot show a follow-up yet; leave out --follow-up");
            return ExitCode::from(2);
        }
        let options = args.options.into_iter().collect();
        return super::dry_run::run(&chorus, pipeline, question, options, args.json).await;
    }
    if let Some(code) = first_contact(&chorus).await {
        return code;
    }
    // On a terminal the merge's text is printed as its model writes it.
    let streaming = super::answer::Streaming::for_terminal(args.json);
    let progress = match &streaming {
        Some(streaming) => streaming.watcher(progress(args.quiet)),
        None => progress(args.quiet),
    };
    let mut options: serde_json::Map<String, serde_json::Value> =
        args.options.into_iter().collect();
    if let Some(run) = args.follow_up {
        options.insert(crate::pipeline::options::FOLLOW_UP_OF.into(), run.into());
    }
    let local = Client::local();
    let outcome = tokio::select! {
        outcome = chorus.run(&local, pipeline, question, options, progress) => outcome,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("chorus: cancelled");
            return ExitCode::from(130);
        }
    };
    match outcome {
        Ok(result) => print(&result, args.json, args.quiet, streaming.as_deref()),
        Err(e) => {
            eprintln!("chorus: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Fails at once, in one line per cause, when no call of the run could
/// work: every provider the models use lacks a usable key, or cannot be
/// connected to (seen when its model list is fetched).
async fn first_contact(chorus: &Chorus) -> Option<ExitCode> {
    let runner = chorus.runner();
    let llm = &runner.llm;
    let models = llm.models();
    let mut used: Vec<&str> = models.values().map(|m| m.provider.as_str()).collect();
    used.sort_unstable();
    used.dedup();
    if used.is_empty() {
        return None;
    }
    let problems = llm.key_problems();
    if used
        .iter()
        .all(|p| problems.iter().any(|k| k.provider == *p))
    {
        for problem in problems
            .iter()
            .filter(|k| used.contains(&k.provider.as_str()))
        {
            eprintln!("chorus: {problem}");
        }
        return Some(ExitCode::from(2));
    }
    for problem in &problems {
        tracing::warn!("{problem}; its calls will fail");
    }
    let statuses = llm.load_catalogs(false).await;
    let unreachable: Vec<_> = statuses
        .iter()
        .filter(|s| matches!(&s.result, Err(e) if e.unreachable))
        .collect();
    if used
        .iter()
        .all(|p| unreachable.iter().any(|s| s.provider == *p))
    {
        for status in unreachable {
            let host = llm.host_of(&status.provider).unwrap_or_default();
            let why = status
                .result
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            eprintln!(
                "chorus: cannot reach provider `{}` at {host} (providers.{}.base_url): {why}",
                status.provider, status.provider
            );
        }
        return Some(ExitCode::from(1));
    }
    None
}

/// What a terminal run reports as it goes: nothing when `quiet`, else
/// the live progress below.
pub(super) fn progress(quiet: bool) -> crate::events::Progress {
    if quiet {
        return crate::events::ignore();
    }
    let renderer = Renderer::new(std::io::stderr().is_terminal());
    Arc::new(move |event| renderer.render(event))
}

/// Live progress on stderr. On a terminal, a status line counts the
/// tokens streaming in; elsewhere each call's first token gets a line.
/// A failure already shown in full is referred to, not repeated.
struct Renderer {
    terminal: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Calls in flight: who, since when, tokens so far.
    calls: HashMap<u32, (String, Instant, u32)>,
    /// Failures shown so far, with the first call that had each.
    failures: Vec<(String, String)>,
    status_line: bool,
}

impl Renderer {
    fn new(terminal: bool) -> Self {
        Self {
            terminal,
            state: Mutex::new(State::default()),
        }
    }

    fn render(&self, event: Event) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let line = match event {
            Event::Stage(stage) => format!("… {}", stage.as_str()),
            Event::FanOut { calls } => format!("  {calls} requests in flight"),
            Event::CallStarted { id, stage, request } => {
                let who = who(&request.model, &stage);
                state.calls.insert(id, (who, Instant::now(), 0));
                return;
            }
            Event::CallTokens { id, tokens } => {
                let Some(call) = state.calls.get_mut(&id) else {
                    return;
                };
                let first = call.2 == 0;
                call.2 = tokens;
                if self.terminal {
                    self.status(&mut state);
                    return;
                }
                if !first {
                    return;
                }
                let secs = call.1.elapsed().as_secs_f64();
                format!("  ▸ {:<40} {secs:>6.2}s  first token", call.0)
            }
            Event::CallFinished(call) => {
                state.calls.remove(&call.id);
                finished(&mut state, &call)
            }
            Event::Note { plugin, message } => format!("  · {plugin}: {message}"),
            Event::Fallback { id, from, to, why } => {
                format!("  · chorus: call {id}: {from} failed ({why}); asking its fallback {to}")
            }
            Event::Started(_)
            | Event::CallRetrying { .. }
            | Event::Planned(_)
            | Event::CallQueued { .. }
            | Event::AnswerText { .. }
            | Event::PluginCalled { .. }
            | Event::PluginReturned { .. } => return,
        };
        if state.status_line {
            eprint!("\r\x1b[K");
            state.status_line = false;
        }
        eprintln!("{line}");
        if self.terminal && !state.calls.is_empty() {
            self.status(&mut state);
        }
    }

    /// Redraws the status line: tokens so far per call in flight.
    fn status(&self, state: &mut State) {
        let mut calls: Vec<&(String, Instant, u32)> = state.calls.values().collect();
        calls.sort_by_key(|c| c.1);
        let parts: Vec<String> = calls
            .iter()
            .take(6)
            .map(|(who, _, tokens)| {
                if *tokens == 0 {
                    format!("{who} …")
                } else {
                    format!("{who} {tokens}")
                }
            })
            .collect();
        let more = calls.len().saturating_sub(6);
        let mut line = format!("  ⋯ {}", parts.join(" · "));
        if more > 0 {
            line.push_str(&format!(" · {more} more"));
        }
        let line: String = line.chars().take(160).collect();
        eprint!("\r\x1b[K{line}");
        state.status_line = true;
    }
}

fn who(model: &str, stage: &str) -> String {
    if stage == "fan-out" {
        model.to_owned()
    } else {
        format!("{model} [{stage}]")
    }
}

/// A call's line; a failure seen before is referred to, not repeated.
fn finished(state: &mut State, call: &CallRecord) -> String {
    let who = who(&call.model, &call.stage);
    let secs = f64::from(call.latency_ms) / 1000.0;
    let Some(error) = &call.error else {
        let cost = call
            .cost_usd
            .map(|c| {
                let mark = if call.cost_estimated { "~" } else { "" };
                format!("  {mark}{}", show_usd(c))
            })
            .unwrap_or_default();
        let guessed = if call.tokens_estimated { "~" } else { "" };
        return format!(
            "  ✓ {who:<40} {secs:>6.2}s  {guessed}{} tokens{cost}",
            call.completion_tokens.unwrap_or(0)
        );
    };
    let mark = match call.status.as_str() {
        "cut" => "✂",
        "skipped" => "–",
        _ => "✗",
    };
    let text = error.to_string();
    if let Some((_, first)) = state.failures.iter().find(|(t, _)| *t == text) {
        return format!("  {mark} {who:<40} {secs:>6.2}s  (the same as {first})");
    }
    state.failures.push((text.clone(), who.clone()));
    format!("  {mark} {who:<40} {secs:>6.2}s  {text}")
}

/// Notes saying "MODEL failed: WHY" with the same WHY become one note
/// naming every model; other notes are kept as they are, in order.
fn grouped(notes: &[String]) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for note in notes {
        let failure = note
            .split_once(" failed: ")
            .filter(|(model, _)| !model.is_empty() && !model.contains(' '));
        match failure {
            Some((model, why)) => match out.iter_mut().find(|(w, m)| !m.is_empty() && w == why) {
                Some((_, models)) => models.push(model.to_owned()),
                None => out.push((why.to_owned(), vec![model.to_owned()])),
            },
            None => out.push((note.clone(), Vec::new())),
        }
    }
    out.into_iter()
        .map(|(text, models)| {
            if models.is_empty() {
                text
            } else {
                format!("{} failed: {text}", models.join(", "))
            }
        })
        .collect()
}

/// Prints the run's answer (what completes it, when it streamed), then its
/// summary and notes on stderr.
pub(super) fn print(
    result: &RunRecord,
    json: bool,
    quiet: bool,
    streamed: Option<&super::answer::Streaming>,
) -> ExitCode {
    let written = if json {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_string_pretty(result)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(stdout, "{text}"))
    } else if streamed.is_some_and(|s| s.finish(&result.answer)) {
        Ok(())
    } else {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", result.answer.trim_end())
    };
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("chorus: cannot write the answer: {e}");
        return ExitCode::FAILURE;
    }
    if !quiet && !json {
        let cost = match result.usage.cost_usd {
            Some(usd) if usd > 0.0 => {
                let estimated = if result.usage.cost_estimated {
                    " (estimated in part)"
                } else {
                    ""
                };
                format!(", {}{estimated}", show_usd(usd))
            }
            Some(_) => String::new(),
            None => ", cost unknown (the provider reported none, and the models have no prices)"
                .to_owned(),
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
        for note in grouped(&result.notes) {
            eprintln!("  note: {note}");
        }
    }
    if result.kind == AnswerKind::None {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::read_prompt;

    #[test]
    fn an_endless_stdin_stops_at_the_limit_with_its_name() {
        let error = read_prompt(std::io::repeat(b'y'), 1024).unwrap_err();
        assert!(error.contains("limits.max_prompt_bytes"), "{error}");
    }

    #[test]
    fn a_prompt_at_the_limit_is_read_whole() {
        let text = "é".repeat(512);
        assert_eq!(read_prompt(text.as_bytes(), 1024).unwrap(), text);
        assert!(
            read_prompt(&b"\xff\xfe"[..], 1024)
                .unwrap_err()
                .contains("UTF-8")
        );
    }
}
