//! `chorus runs`: the run history in the terminal. With no subcommand, the
//! recent runs; `show`, `answer` and `export` one run, named by its id, a
//! unique prefix of it, or `last`; `prune`; `resynthesize`, which
//! merges a run's answers again without asking its panel again; and
//! `feedback`, a rating of a run on a metric the configuration declares.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use chrono::{Local, NaiveDate, NaiveDateTime, TimeZone};
use clap::Subcommand;

use crate::client::Client;
use crate::config::Loaded;
use crate::pipeline::Merger;
use crate::record::{RunStatus, StoredRun};
use crate::store::{Cursor, Lookup, Query, Retention, Store, StoreError, now_ms};

mod render;
use crate::text::show_bytes;
use render::{dollars, local_time, short_id_width, show, to_json};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    list: ListArgs,
    /// The runs of this PostgreSQL store (postgres://user@host:5432/db)
    /// instead of the configured one; its password from $PGPASSWORD or
    /// [store] password_env.
    #[arg(long, global = true, env = crate::config::STORE_URL_ENV, value_name = "URL")]
    store_url: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// The recent runs, newest first (what `chorus runs` shows).
    List(ListArgs),
    /// One run: its prompt, every call, notes and the answer.
    Show {
        /// A run id, a unique prefix of one, or `last`.
        id: String,
        /// The run as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A run's answer alone, as `chorus ask` prints it.
    Answer {
        /// A run id, a unique prefix of one, or `last`.
        id: String,
    },
    /// Everything kept about a run as JSON, every request sent included,
    /// and its attachments' bytes (base64, as `data`) where they are kept.
    Export {
        /// A run id, a unique prefix of one, or `last`.
        id: String,
        /// Leave the attachments' bytes out (their names, types, sizes and
        /// hashes stay).
        #[arg(long)]
        no_attachments: bool,
    },
    /// Removes old runs now: past [store] max_runs, max_age or max_bytes, or
    /// the limits given here.
    Prune(PruneArgs),
    /// Merges a run's answers again, without asking its panel again.
    Resynthesize(ResynthesizeArgs),
    /// Rates a run on a metric of the configuration's [metrics] (a second
    /// rating of the same run and metric replaces the first).
    Feedback(FeedbackArgs),
}

#[derive(clap::Args)]
struct FeedbackArgs {
    /// A run id, a unique prefix of one, or `last`.
    id: String,
    /// A metric of [metrics] (`helpful`).
    metric: String,
    /// `true`/`false` for a boolean metric, a number for a float one.
    value: String,
    /// Why, in a few words.
    #[arg(long)]
    comment: Option<String>,
}

#[derive(clap::Args)]
struct ListArgs {
    /// Only runs of this pipeline.
    #[arg(long, short)]
    pipeline: Option<String>,
    /// Only runs whose prompt or answer contains this text.
    #[arg(long, short)]
    text: Option<String>,
    /// Only runs started since then: a time ago (`2h`, `7days`) or a date
    /// and time (`2026-05-01`, `2026-05-01 09:30`, RFC 3339).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    since: Option<i64>,
    /// Only runs made by this client (`[[http.clients]]` name, or the
    /// local user for runs made on stdio or the command line).
    #[arg(long, value_name = "NAME")]
    client: Option<String>,
    /// How many runs to show.
    #[arg(long, short = 'n', default_value_t = 20)]
    limit: usize,
    /// Runs older than this cursor (printed after a full page).
    #[arg(long, value_name = "CURSOR")]
    before: Option<Cursor>,
    /// The page as JSON: `{"runs": [...], "next": CURSOR}`.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct PruneArgs {
    /// Keep at most this many runs.
    #[arg(long)]
    max_runs: Option<u64>,
    /// Remove runs older than this (`30days`, `12h`).
    #[arg(long, value_parser = humantime_serde::re::humantime::parse_duration)]
    max_age: Option<Duration>,
    /// Keep at most this many bytes of run data.
    #[arg(long)]
    max_bytes: Option<u64>,
}

#[derive(clap::Args)]
struct ResynthesizeArgs {
    /// A run id, a unique prefix of one, or `last`.
    id: String,
    /// Merge with this synthesizer plugin instead of the run's own.
    #[arg(long, conflicts_with = "pipeline")]
    synthesizer: Option<String>,
    /// Merge the way this pipeline does (its synthesizer and options).
    #[arg(long)]
    pipeline: Option<String>,
    /// Print the full structured result as JSON instead of the answer.
    #[arg(long)]
    json: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    quiet: bool,
}

pub async fn run(config: Option<&Path>, args: Args) -> ExitCode {
    let command = args.command.unwrap_or(Command::List(args.list));
    let loaded = match Loaded::discover(config) {
        Ok(mut loaded) => {
            if let Some(url) = args.store_url.filter(|u| !u.trim().is_empty()) {
                loaded.config.store.url = Some(url.trim().to_owned());
            }
            loaded
        }
        Err(e) => return fail(2, &e),
    };
    if let Command::Resynthesize(args) = command {
        return resynthesize(loaded, args).await;
    }
    if let Command::Feedback(args) = command {
        return feedback(loaded, args).await;
    }
    let store = match Store::open_for_reading(&loaded) {
        Ok(store) => store,
        Err(StoreError::NotFound(path)) if matches!(command, Command::List(_)) => {
            eprintln!("chorus: no runs yet ({} does not exist)", path.display());
            return ExitCode::SUCCESS;
        }
        Err(e) => return fail(2, &e),
    };
    let outcome = tokio::task::spawn_blocking(move || execute(&store, &loaded, command)).await;
    match outcome {
        Ok(Ok(code)) => code,
        Ok(Err(Failure::Io(e))) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Ok(Err(Failure::Io(e))) => fail(1, &e),
        Ok(Err(Failure::Store(e))) => fail(1, &e),
        Ok(Err(Failure::Usage(message))) => fail(2, &message),
        Err(e) => fail(1, &e),
    }
}

enum Failure {
    Io(std::io::Error),
    Store(StoreError),
    /// A wrong id or argument: the message says what to do.
    Usage(String),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

fn fail(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("chorus: {error}");
    ExitCode::from(code)
}

fn execute(store: &Store, loaded: &Loaded, command: Command) -> Result<ExitCode, Failure> {
    // What runs hold is other people's text (a tenant's prompt, a model's
    // answer): its control characters must not reach the terminal.
    let mut out = crate::text::Printable(std::io::stdout().lock());
    match command {
        Command::List(args) => list(store, args, &mut out)?,
        Command::Show { id, json } => {
            let run = find(store, &id, false)?;
            let stored = store.attachments(&run, false)?;
            let feedback = store.feedback_of(&run.run_id)?;
            if json {
                writeln!(out, "{}", to_json(&run, &stored, &feedback))?;
            } else {
                show(&run, &stored, &feedback, &mut out)?;
            }
        }
        Command::Answer { id } => {
            let run = find(store, &id, false)?;
            let Some(answer) = &run.answer else {
                let why = run.error.as_deref().unwrap_or(run.status.as_str());
                return Err(Failure::Usage(format!(
                    "run {} has no answer ({why})",
                    run.run_id
                )));
            };
            writeln!(out, "{}", answer.trim_end())?;
            if run.kind == Some(crate::record::AnswerKind::None) {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Export { id, no_attachments } => {
            let run = find(store, &id, true)?;
            let stored = store.attachments(&run, !no_attachments)?;
            let feedback = store.feedback_of(&run.run_id)?;
            writeln!(out, "{}", to_json(&run, &stored, &feedback))?;
        }
        Command::Prune(args) => {
            let configured = Retention::of(&loaded.config.store);
            let retention = Retention {
                max_runs: args.max_runs.unwrap_or(configured.max_runs),
                max_age: args.max_age.or(configured.max_age),
                max_bytes: args.max_bytes.unwrap_or(configured.max_bytes),
            };
            if retention.max_runs == 0 || retention.max_bytes == 0 {
                return Err(Failure::Usage(
                    "--max-runs and --max-bytes must be greater than zero".into(),
                ));
            }
            let pruned = store.prune(&retention)?;
            writeln!(
                out,
                "removed {} run(s) ({}); kept {} run(s) ({}) in {}",
                pruned.removed,
                show_bytes(pruned.removed_bytes),
                pruned.kept,
                show_bytes(pruned.kept_bytes),
                store.describe().trim_start_matches("the run store at ")
            )?;
        }
        Command::Resynthesize(_) | Command::Feedback(_) => {
            unreachable!("handled before the store is opened")
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The run `id` names, or a message saying why there is none.
fn find(store: &Store, id: &str, with_requests: bool) -> Result<StoredRun, Failure> {
    match store.find(id, with_requests)? {
        Lookup::Found(run) => Ok(run),
        Lookup::Unknown => Err(Failure::Usage(format!(
            "no run `{id}`: the id is unknown to {} (`chorus runs` lists them)",
            store.describe()
        ))),
        Lookup::Ambiguous(ids) => Err(Failure::Usage(format!(
            "`{id}` is the start of several runs' ids ({}, …): give more of it",
            ids.join(", ")
        ))),
    }
}

fn list(store: &Store, args: ListArgs, out: &mut impl Write) -> Result<(), Failure> {
    let query = Query {
        before: args.before,
        pipeline: args.pipeline,
        text: args.text,
        since: args.since,
        client: args.client,
        limit: args.limit.max(1),
    };
    let page = store.list(&query)?;
    if args.json {
        let value = serde_json::json!({
            "runs": page.runs,
            "next": page.next.map(|c| c.to_string()),
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )?;
        return Ok(());
    }
    if page.runs.is_empty() {
        eprintln!("chorus: no runs match in {}", store.describe());
        return Ok(());
    }
    let width = short_id_width(&page.runs);
    writeln!(
        out,
        "{:<16}  {:<width$}  {:<12}  {:<11}  {:>8}  PROMPT",
        "STARTED", "ID", "PIPELINE", "ANSWER", "COST"
    )?;
    for run in &page.runs {
        let answer = match (run.status, run.kind) {
            (RunStatus::Done, Some(kind)) => kind.as_str(),
            (status, _) => status.as_str(),
        };
        let cost = run.cost_usd.map_or("-".to_owned(), dollars);
        let mark = if run.resynthesis_of.is_some() {
            "⟲ "
        } else if run.follow_up_of.is_some() {
            "↳ "
        } else {
            ""
        };
        writeln!(
            out,
            "{:<16}  {:<width$}  {:<12}  {:<11}  {:>8}  {mark}{}",
            local_time(run.started_at, false),
            crate::text::cut_at_char_boundary(&run.run_id, width),
            run.pipeline,
            answer,
            cost,
            run.prompt,
        )?;
    }
    if let Some(next) = page.next {
        eprintln!("more: chorus runs --before {next}");
    }
    Ok(())
}

/// `--since`: a duration ago, or a local date/time, or RFC 3339.
fn parse_since(text: &str) -> Result<i64, String> {
    if let Ok(ago) = humantime_serde::re::humantime::parse_duration(text) {
        let ago = i64::try_from(ago.as_millis()).unwrap_or(i64::MAX);
        return Ok(now_ms().saturating_sub(ago));
    }
    if let Ok(time) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(time.timestamp_millis());
    }
    let local = |naive: NaiveDateTime| {
        Local
            .from_local_datetime(&naive)
            .earliest()
            .map(|t| t.timestamp_millis())
    };
    for format in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Some(ms) = NaiveDateTime::parse_from_str(text, format)
            .ok()
            .and_then(local)
        {
            return Ok(ms);
        }
    }
    if let Some(ms) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .and_then(local)
    {
        return Ok(ms);
    }
    Err(format!(
        "`{text}` is neither a time ago (`2h`, `7days`) nor a date (`2026-05-01`, `2026-05-01 09:30`)"
    ))
}

/// Rates a run as the local user, through the gate every door uses.
async fn feedback(loaded: Loaded, args: FeedbackArgs) -> ExitCode {
    let chorus = match crate::app::Chorus::load(loaded) {
        Ok(chorus) => chorus,
        Err(e) => return fail(2, &e),
    };
    // As typed: `true`, `false`, or a number; anything else is the
    // metric's to refuse, saying what it takes.
    let value = serde_json::from_str::<serde_json::Value>(args.value.trim())
        .ok()
        .filter(|v| v.is_boolean() || v.is_number())
        .unwrap_or(serde_json::Value::String(args.value));
    let rating = crate::app::feedback::Rating {
        run: args.id,
        metric: args.metric,
        value,
        comment: args.comment,
    };
    let outcome = chorus.give_feedback(&Client::local(), rating).await;
    chorus.store.flush().await.ok();
    match outcome {
        Ok(recorded) => {
            println!("{}", recorded.said());
            ExitCode::SUCCESS
        }
        Err(e @ crate::app::feedback::FeedbackError::Store(_)) => fail(1, &e),
        Err(e) => fail(2, &e),
    }
}

async fn resynthesize(loaded: Loaded, args: ResynthesizeArgs) -> ExitCode {
    let chorus = match crate::app::Chorus::load(loaded) {
        Ok(chorus) => chorus,
        Err(e) => return fail(2, &e),
    };
    let merger = match (args.synthesizer, args.pipeline) {
        (Some(name), _) => Merger::Synthesizer(name),
        (None, Some(name)) => Merger::Pipeline(name),
        (None, None) => Merger::AsBefore,
    };
    let progress = super::ask::progress(args.quiet);
    let local = Client::local();
    let outcome = tokio::select! {
        outcome = chorus.resynthesize(&local, &args.id, merger, progress) => outcome,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("chorus: cancelled");
            return ExitCode::from(130);
        }
    };
    match outcome {
        Ok(result) => {
            if !args.quiet && std::io::stderr().is_terminal() {
                eprintln!("re-synthesis of {}", args.id);
            }
            super::ask::print(&result, args.json, args.quiet, None)
        }
        Err(e) => {
            eprintln!("chorus: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::render::prompt_cache;
    use super::*;
    use crate::record::RunSummary;

    #[test]
    fn a_call_line_says_what_the_prompt_cache_did() {
        let call = |cached, written| crate::record::CallRecord {
            id: 0,
            stage: "fan-out".into(),
            label: "panel".into(),
            model: "anthropic/claude".into(),
            status: "ok".into(),
            latency_ms: 1,
            attempts: 1,
            prompt_tokens: Some(1000),
            completion_tokens: Some(10),
            cached_tokens: cached,
            cache_write_tokens: written,
            ..crate::record::CallRecord::default()
        };
        assert_eq!(
            prompt_cache(&call(Some(800), None)),
            "  (800 of 1000 prompt tokens cached)"
        );
        assert_eq!(
            prompt_cache(&call(Some(800), Some(150))),
            "  (800 of 1000 prompt tokens cached, 150 written to the cache)"
        );
        assert_eq!(prompt_cache(&call(Some(0), None)), "");
        assert_eq!(prompt_cache(&call(None, None)), "");
    }

    #[test]
    fn since_takes_durations_dates_and_times() {
        let now = now_ms();
        let two_hours_ago = parse_since("2h").unwrap();
        assert!((now - 7_200_000 - two_hours_ago).abs() < 5_000);
        assert_eq!(
            parse_since("2026-05-01T09:30:00Z").unwrap(),
            1_777_627_800_000
        );
        assert!(parse_since("2026-05-01").is_ok());
        assert!(parse_since("2026-05-01 09:30").is_ok());
        let error = parse_since("yesterday-ish").unwrap_err();
        assert!(error.contains("`7days`"), "{error}");
    }

    #[test]
    fn short_ids_tell_the_listed_runs_apart() {
        let run = |id: &str| RunSummary {
            run_id: id.into(),
            pipeline: "ask".into(),
            status: RunStatus::Done,
            kind: None,
            started_at: 0,
            elapsed_ms: None,
            cost_usd: None,
            prompt: String::new(),
            summary: None,
            follow_up_of: None,
            resynthesis_of: None,
            client: None,
        };
        let apart = [
            run("0196a1b2-c3d4-7000-8000-000000000001"),
            run("0196a1b2-c3d5-7000-8000-000000000002"),
        ];
        assert_eq!(short_id_width(&apart), 13);
        let close = [
            run("0196a1b2-c3d4-7000-8000-000000000001"),
            run("0196a1b2-c3d4-7a00-8000-000000000002"),
        ];
        assert_eq!(short_id_width(&close), 16);
        assert_eq!(short_id_width(&[run("abc")]), 3);
    }

    #[test]
    fn money_and_sizes_read_well() {
        assert_eq!(dollars(0.003), "$0.0030");
        assert_eq!(dollars(0.00001), "<$0.0001");
        assert_eq!(dollars(0.0), "$0.0000");
        assert_eq!(show_bytes(1536), "1.5 KiB");
        assert_eq!(show_bytes(12), "12 bytes");
    }
}
