//! `chorus eval`: is the ensemble worth it? Runs pipelines and single
//! models over a dataset of questions with expected answers, grades each
//! answer, and reports accuracy, cost and latency per target.
//!
//! Every outcome is appended to a journal (JSON Lines) as it arrives, so an
//! interrupted evaluation resumes where it stopped: an outcome already in
//! the journal for the same question and target is not asked again. A
//! pipeline's outcome names its run, kept in the run store like any other
//! (`chorus runs show ID`).

pub mod dataset;
pub mod from_runs;
pub mod grade;
pub mod report;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::app::Chorus;
use crate::client::Client;
use crate::record::AnswerKind;
use dataset::Item;
use grade::Grade;

/// What is evaluated: a pipeline, or one model asked directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pipeline(String),
    Model(String),
}

impl Target {
    /// `NAME` is a pipeline, `model:ID` a model.
    pub fn parse(text: &str) -> Self {
        match text.trim().strip_prefix("model:") {
            Some(model) => Self::Model(model.trim().to_owned()),
            None => Self::Pipeline(text.trim().to_owned()),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Self::Pipeline(name) => name.clone(),
            Self::Model(model) => crate::pipeline::single_run_name(model),
        }
    }
}

/// One question asked of one target, graded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub item: String,
    pub target: String,
    /// Of the item's question, expected answer and grader: a journal entry
    /// for an item since edited is not reused.
    pub question_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Why there was no answer to grade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub grade: Grade,
    pub cost_usd: f64,
    #[serde(default)]
    pub cost_estimated: bool,
    pub latency_ms: u64,
}

/// How to run an evaluation.
pub struct Settings {
    pub targets: Vec<Target>,
    /// Questions asked at once.
    pub concurrency: usize,
    /// The model that grades `judge` items.
    pub judge: Option<String>,
    /// Where outcomes are kept as they arrive; `None` keeps nothing.
    pub journal: Option<PathBuf>,
    /// Ignore what the journal holds and ask everything again.
    pub fresh: bool,
}

/// The outcomes of every question for every target, and how many of them
/// came from the journal.
pub struct Evaluation {
    pub outcomes: Vec<Outcome>,
    pub resumed: usize,
    pub summaries: Vec<report::Summary>,
}

/// Checks that every target and the judge exist, before anything is spent.
pub fn check(chorus: &Chorus, items: &[Item], settings: &Settings) -> Result<(), String> {
    let mut problems = Vec::new();
    let runner = chorus.runner();
    let pipelines: Vec<&str> = runner.pipelines().map(|(n, _)| n.as_str()).collect();
    for target in &settings.targets {
        match target {
            Target::Pipeline(name) if !pipelines.contains(&name.as_str()) => {
                problems.push(format!(
                    "no pipeline `{name}` (pipelines: {}; a model is `model:ID`)",
                    pipelines.join(", ")
                ))
            }
            Target::Model(model) if runner.llm.model(model).is_none() => problems.push(format!(
                "no model `{model}` in the configuration's [models] table"
            )),
            _ => {}
        }
    }
    let judged = items.iter().filter(|i| i.grader.needs_judge()).count();
    match &settings.judge {
        None if judged > 0 => problems.push(format!(
            "{judged} question(s) are graded by a judge: name its model with --judge MODEL"
        )),
        Some(model) if runner.llm.model(model).is_none() => problems.push(format!(
            "no judge model `{model}` in the configuration's [models] table"
        )),
        _ => {}
    }
    if settings.targets.is_empty() {
        problems.push("nothing to evaluate: give --pipelines".to_owned());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Runs the evaluation; `on_outcome` hears of each outcome as it arrives
/// (resumed ones first).
pub async fn run(
    chorus: &Chorus,
    items: &[Item],
    settings: &Settings,
    on_outcome: impl Fn(&Outcome),
) -> Result<Evaluation, String> {
    check(chorus, items, settings)?;
    let mut kept = match (&settings.journal, settings.fresh) {
        (Some(path), false) => read_journal(path)?,
        _ => HashMap::new(),
    };
    let mut journal = match &settings.journal {
        Some(path) => Some(open_journal(path, settings.fresh)?),
        None => None,
    };
    let mut outcomes = Vec::new();
    let mut jobs = Vec::new();
    for target in &settings.targets {
        for item in items {
            let hash = question_hash(item);
            match kept.remove(&(item.id.clone(), target.name())) {
                Some(outcome) if outcome.question_hash == hash => {
                    on_outcome(&outcome);
                    outcomes.push(outcome);
                }
                _ => jobs.push((target, item, hash)),
            }
        }
    }
    let resumed = outcomes.len();
    let judge = settings.judge.as_deref();
    let mut running = futures::stream::iter(jobs)
        .map(|(target, item, hash)| ask(chorus, target, item, hash, judge))
        .buffer_unordered(settings.concurrency.max(1));
    while let Some(outcome) = running.next().await {
        if let (Some((file, path)), Ok(line)) = (&mut journal, serde_json::to_string(&outcome)) {
            writeln!(file, "{line}")
                .and_then(|()| file.flush())
                .map_err(|e| format!("cannot write the journal {}: {e}", path.display()))?;
        }
        on_outcome(&outcome);
        outcomes.push(outcome);
    }
    let names: Vec<String> = settings.targets.iter().map(Target::name).collect();
    let summaries = report::summarise(&names, &outcomes);
    Ok(Evaluation {
        outcomes,
        resumed,
        summaries,
    })
}

async fn ask(
    chorus: &Chorus,
    target: &Target,
    item: &Item,
    question_hash: String,
    judge: Option<&str>,
) -> Outcome {
    let mut outcome = Outcome {
        item: item.id.clone(),
        target: target.name(),
        question_hash,
        run_id: None,
        answer: None,
        error: None,
        grade: Grade {
            pass: false,
            why: String::new(),
        },
        cost_usd: 0.0,
        cost_estimated: false,
        latency_ms: 0,
    };
    let started = std::time::Instant::now();
    let question = item.question.clone();
    let ignore = crate::events::ignore;
    let attachments = match attachments(chorus, item).await {
        Ok(attachments) => attachments,
        Err(error) => {
            outcome.error = Some(error);
            outcome.grade.why = "no answer: its attachments could not be read".to_owned();
            return outcome;
        }
    };
    let run = match target {
        Target::Pipeline(name) => {
            chorus
                .run(
                    &Client::local(),
                    name,
                    crate::pipeline::Question {
                        text: question,
                        attachments,
                        ..Default::default()
                    },
                    serde_json::Map::new(),
                    ignore(),
                )
                .await
        }
        Target::Model(model) => {
            chorus
                .ask_model(
                    &Client::local(),
                    model,
                    crate::pipeline::Question {
                        text: question,
                        attachments,
                        ..Default::default()
                    },
                    ignore(),
                )
                .await
        }
    };
    match run {
        Ok(record) => {
            outcome.run_id = Some(record.run_id.clone());
            // An unknown cost is marked as a guess (`~`), never shown as
            // an exact $0.
            outcome.cost_usd = record.usage.cost_usd.unwrap_or(0.0);
            outcome.cost_estimated = record.usage.cost_estimated || record.usage.cost_usd.is_none();
            outcome.latency_ms = record.elapsed_ms;
            if record.kind == AnswerKind::None {
                outcome.error = Some(record.summary.clone());
            } else {
                outcome.answer = Some(record.answer.clone());
            }
        }
        Err(error) => {
            outcome.latency_ms = millis(started.elapsed());
            outcome.error = Some(error.to_string());
        }
    }
    outcome.grade = match (&outcome.answer, &outcome.error) {
        (Some(answer), _) => {
            let runner = chorus.runner();
            let judge = judge.map(|model| (&*runner.llm, model));
            item.grader.grade(&item.reference(), answer, judge).await
        }
        (None, error) => Grade {
            pass: false,
            why: format!("no answer: {}", error.as_deref().unwrap_or("none given")),
        },
    };
    outcome
}

/// An item's attachments, read (the dataset's author named them) and held
/// to the configured limits.
async fn attachments(chorus: &Chorus, item: &Item) -> Result<crate::attach::Attachments, String> {
    use crate::attach::{Access, Source, load};
    if item.attachments.is_empty() {
        return Ok(Default::default());
    }
    let sources: Vec<Source> = item
        .attachments
        .iter()
        .map(|named| match named.strip_prefix("https://") {
            Some(_) => Source::Url {
                url: named.clone(),
                mime: None,
                name: None,
            },
            None => Source::Path(named.into()),
        })
        .collect();
    let limits = chorus.runner().loaded.config.limits.attachments();
    tokio::task::spawn_blocking(move || load(sources, &Access::Anywhere, &limits))
        .await
        .map_err(|e| format!("reading the attachments failed: {e}"))?
}

fn millis(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

fn question_hash(item: &Item) -> String {
    let mut hasher = Sha256::new();
    for part in [
        item.question.as_str(),
        item.expected.as_str(),
        &format!("{:?}", item.grader),
        &format!("{:?}", item.tolerance),
        item.rubric.as_deref().unwrap_or(""),
        &item.attachments.join("\n"),
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    crate::text::hex(&hasher.finalize()[..8])
}

/// The journal's outcomes by (item, target); the last line for a pair wins.
/// A line that does not parse (a write cut short) is skipped.
fn read_journal(path: &Path) -> Result<HashMap<(String, String), Outcome>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(format!("cannot read the journal {}: {e}", path.display())),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Outcome>(line).ok())
        .map(|o| ((o.item.clone(), o.target.clone()), o))
        .collect())
}

fn open_journal(path: &Path, fresh: bool) -> Result<(std::fs::File, PathBuf), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(!fresh)
        .write(true)
        .truncate(fresh)
        .open(path)
        .map(|file| (file, path.to_owned()))
        .map_err(|e| format!("cannot open the journal {}: {e}", path.display()))
}
