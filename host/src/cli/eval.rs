//! `chorus eval DATASET.jsonl`: runs pipelines and models over a dataset,
//! with a progress bar on stderr, and prints what each scored — a table,
//! or JSON with `--json` — and draws accuracy against cost with `--chart`.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::app::Chorus;
use crate::eval::{self, Settings, Target, dataset, report};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub gateway: super::gateway::Gateway,
    /// The questions: JSON Lines, each `{"question": …, "expected": …}`
    /// (or `"answer"`) with optional `id`, `grader` (contains, exact, regex,
    /// numeric, judge, choice), `tolerance`, `rubric` and `choices`. With
    /// --from-runs, the file to write them to (it must not exist).
    dataset: PathBuf,
    /// Build the dataset from kept runs: questions whose answer was rated
    /// on the good side of a metric, or preferred by a shadow experiment's
    /// judge, each graded by --judge against that answer.
    #[arg(long)]
    from_runs: bool,
    /// With --from-runs: the metric whose ratings vouch for an answer
    /// (default: the only one declared).
    #[arg(long, value_name = "NAME", requires = "from_runs")]
    metric: Option<String>,
    /// With --from-runs: runs started this long ago at most.
    #[arg(
        long,
        value_name = "AGE",
        default_value = "7days",
        requires = "from_runs"
    )]
    since: humantime::Duration,
    /// With --from-runs: at most this many questions.
    #[arg(long, value_name = "N", default_value_t = 200, requires = "from_runs")]
    max_questions: usize,
    /// What to evaluate, comma-separated: pipeline names, and `model:ID`
    /// for one model asked directly. Default: the default pipeline.
    #[arg(long, short = 'p', value_delimiter = ',', value_name = "LIST")]
    pipelines: Vec<String>,
    /// The model that grades questions whose grader is `judge`.
    #[arg(long, value_name = "MODEL")]
    judge: Option<String>,
    /// Questions asked at once.
    #[arg(long, short = 'j', default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// Where each outcome is kept as it arrives, so a stopped evaluation
    /// resumes. Default: DATASET with `.results.jsonl` in place of its extension.
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Ask every question again, ignoring the journal.
    #[arg(long)]
    fresh: bool,
    /// Print the results as JSON (every outcome and the summaries).
    #[arg(long)]
    json: bool,
    /// Draw accuracy against cost per question into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    chart: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Reuse the answer to every request already answered identically
    /// (the response cache, sampled requests included), and keep new ones
    /// — for `[cache] responses`, or 24h when it is not set. A rerun that
    /// changes only the synthesizer asks the panel nothing.
    #[arg(long)]
    pub cached: bool,
}

/// `--cached`: the response cache on for this evaluation, for every
/// identical request (the user's explicit opt-in, sampled ones included).
pub fn cache_everything(loaded: &mut crate::config::Loaded) {
    let cache = &mut loaded.config.cache;
    cache
        .responses
        .get_or_insert(crate::respcache::EVAL_LIFETIME);
    cache.responses_sampled = true;
}

pub async fn run(chorus: Arc<Chorus>, args: Args) -> ExitCode {
    if args.from_runs
        && let Err(e) = from_runs(&chorus, &args).await
    {
        eprintln!("chorus: {e}");
        return ExitCode::from(2);
    }
    let items = match dataset::read(&args.dataset) {
        Ok(items) => items,
        Err(e) => {
            eprintln!("chorus: {e}");
            return ExitCode::from(2);
        }
    };
    let mut targets: Vec<Target> = args
        .pipelines
        .iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| Target::parse(t))
        .collect();
    if targets.is_empty()
        && let Some(default) = chorus.runner().loaded.default_pipeline()
    {
        targets.push(Target::Pipeline(default.to_owned()));
    }
    let journal = args
        .journal
        .unwrap_or_else(|| args.dataset.with_extension("results.jsonl"));
    let settings = Settings {
        targets,
        concurrency: usize::from(args.concurrency),
        judge: args.judge,
        journal: Some(journal.clone()),
        fresh: args.fresh,
    };
    if let Err(e) = eval::check(&chorus, &items, &settings) {
        eprintln!("chorus: {e}");
        return ExitCode::from(2);
    }
    let total = (items.len() * settings.targets.len()) as u64;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} asked · {msg} · {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    let correct = std::sync::atomic::AtomicU64::new(0);
    let evaluation = tokio::select! {
        evaluation = eval::run(&chorus, &items, &settings, |outcome| {
            if outcome.grade.pass {
                correct.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            bar.inc(1);
            bar.set_message(format!(
                "{} right",
                correct.load(std::sync::atomic::Ordering::Relaxed)
            ));
        }) => evaluation,
        _ = tokio::signal::ctrl_c() => {
            bar.abandon();
            eprintln!(
                "chorus: stopped; what was answered is in {} (run the same command to resume)",
                journal.display()
            );
            return ExitCode::from(130);
        }
    };
    bar.finish_and_clear();
    let evaluation = match evaluation {
        Ok(evaluation) => evaluation,
        Err(e) => {
            eprintln!("chorus: {e}");
            return ExitCode::FAILURE;
        }
    };
    if evaluation.resumed > 0 && !args.quiet {
        eprintln!(
            "{} of {total} outcomes were resumed from {} (--fresh asks again)",
            evaluation.resumed,
            journal.display()
        );
    }
    if let Some(path) = &args.chart {
        let title = format!(
            "{}: accuracy against cost",
            args.dataset
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        if let Err(e) = std::fs::write(path, report::chart(&evaluation.summaries, &title)) {
            eprintln!("chorus: cannot write the chart {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if args.json {
        let value = serde_json::json!({
            "dataset": args.dataset,
            "summaries": evaluation.summaries,
            "outcomes": evaluation.outcomes,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    } else {
        print!("{}", report::table(&evaluation.summaries));
    }
    ExitCode::SUCCESS
}

/// Writes the dataset `args` names from the kept runs, and says what it
/// holds.
async fn from_runs(chorus: &Chorus, args: &Args) -> Result<(), String> {
    if args.dataset.exists() {
        return Err(format!(
            "{} exists: --from-runs writes a new dataset; name another file or remove it",
            args.dataset.display()
        ));
    }
    let metrics = &chorus.runner().loaded.config.metrics;
    let metric = match &args.metric {
        Some(name) => Some(metrics.get_key_value(name).ok_or_else(|| {
            format!(
                "no metric `{name}`: this chorus declares {}",
                if metrics.is_empty() {
                    "none".to_owned()
                } else {
                    metrics.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            )
        })?),
        None if metrics.len() == 1 => metrics.iter().next(),
        None if metrics.is_empty() => None,
        None => {
            return Err(format!(
                "this chorus declares several metrics ({}): say which vouches for an answer with --metric",
                metrics.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    };
    if let Some(why) = metric.and_then(|(name, m)| eval::from_runs::unusable(name, m)) {
        return Err(why);
    }
    let metric = metric.map(|(name, m)| (name.clone(), m.clone()));
    let since = crate::store::now_ms()
        .saturating_sub(i64::try_from(args.since.as_millis()).unwrap_or(i64::MAX));
    let most = args.max_questions;
    let built = chorus
        .store
        .off_runtime(move |store| {
            eval::from_runs::build(
                store,
                metric.as_ref().map(|(n, m)| (n.as_str(), m)),
                since,
                most,
            )
        })
        .await
        .map_err(|e| format!("the run store could not be read: {e}"))?;
    if built.lines.is_empty() {
        return Err(format!(
            "no kept run since {} has a rating on the good side{} or a shadow judge's pick: nothing to build a dataset of ({} rated on the bad side)",
            args.since,
            args.metric
                .as_deref()
                .map(|m| format!(" of `{m}`"))
                .unwrap_or_default(),
            built.rated_bad
        ));
    }
    let text: String = built.lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&args.dataset, text)
        .map_err(|e| format!("cannot write {}: {e}", args.dataset.display()))?;
    if !args.quiet {
        eprintln!(
            "chorus: wrote {} questions to {}: {} from rated runs, {} from shadow judgements ({} rated on the bad side and {} asked again left out)",
            built.lines.len(),
            args.dataset.display(),
            built.rated,
            built.judged,
            built.rated_bad,
            built.repeated
        );
    }
    Ok(())
}
