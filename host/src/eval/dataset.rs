//! An evaluation dataset: JSON Lines, one question per line, each with what
//! a right answer looks like and how to tell (`grader`). Blank lines and
//! lines starting with `#` are skipped; a bad line is an error naming it.
//! The common shapes of public datasets read as they are: the reference
//! may be named `answer` (GSM8K's `… #### 72` keeps the part after `####`
//! and is graded as a number), and a multiple-choice item lists `choices`
//! with the right one as an index (MMLU's 0-based `answer`), a letter or
//! its text; its question is asked with the choices lettered after it.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::grade::{Grader, Reference, choice};

/// One question of a dataset.
#[derive(Debug, Clone)]
pub struct Item {
    /// Names the question in reports and the journal; default: its line.
    pub id: String,
    /// As asked: with its choices, lettered, when it has some.
    pub question: String,
    /// The right answer (for `regex`, the pattern; for `judge`, a reference
    /// answer the judge may use; for `choice`, the right choice's letter).
    pub expected: String,
    pub grader: Grader,
    /// For `numeric`: how far the answer may be from `expected`.
    pub tolerance: Option<f64>,
    /// For `judge`: what a right answer must do.
    pub rubric: Option<String>,
    /// For `choice`: the choices, in order.
    pub choices: Vec<String>,
    /// For `regex`: `expected`, compiled once when the dataset is read.
    pub pattern: Option<regex::Regex>,
    /// Files (relative to the dataset's folder) or https URLs the question
    /// comes with, read when the item is asked.
    pub attachments: Vec<String>,
}

impl Item {
    /// What grading an answer to this item needs.
    pub fn reference(&self) -> Reference<'_> {
        Reference {
            question: &self.question,
            expected: &self.expected,
            tolerance: self.tolerance,
            rubric: self.rubric.as_deref(),
            choices: &self.choices,
            pattern: self.pattern.as_ref(),
        }
    }
}

/// A line as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    id: String,
    question: String,
    expected: Option<Value>,
    answer: Option<Value>,
    grader: Option<Grader>,
    tolerance: Option<f64>,
    rubric: Option<String>,
    choices: Option<Vec<String>>,
    #[serde(default)]
    attachments: Vec<String>,
}

/// The largest dataset file read, in bytes.
const MAX_DATASET_BYTES: u64 = 64 << 20;

const SHAPE: &str = "each line is an object with `question`, `expected` (or `answer`), \
                     and optionally `id`, `grader`, `tolerance`, `rubric`, `choices`, `attachments`";

/// Reads a dataset, or says which line is wrong and why.
pub fn read(path: &Path) -> Result<Vec<Item>, String> {
    let text = crate::config::read_regular_file(path, MAX_DATASET_BYTES)
        .map_err(|e| format!("cannot read the dataset {}: {e}", path.display()))
        .and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| format!("the dataset {} is not UTF-8 text", path.display()))
        })?;
    let mut items = parse(&text).map_err(|e| format!("{}:{e}", path.display()))?;
    // Attachments are named relative to the dataset's folder.
    let folder = path.parent().unwrap_or(Path::new("."));
    for item in &mut items {
        for attachment in &mut item.attachments {
            if !attachment.starts_with("https://") {
                *attachment = folder.join(&*attachment).display().to_string();
            }
        }
    }
    Ok(items)
}

/// Parses JSON Lines; errors read `LINE: what is wrong`.
pub fn parse(text: &str) -> Result<Vec<Item>, String> {
    // Editors on Windows start UTF-8 files with a byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut items: Vec<Item> = Vec::new();
    let mut ids: HashSet<String> = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line: Line =
            serde_json::from_str(line).map_err(|e| format!("{number}: {e} ({SHAPE})"))?;
        let item = item(line, number).map_err(|e| format!("{number}: {e}"))?;
        if !ids.insert(item.id.clone()) {
            return Err(format!("{number}: the id `{}` is used twice", item.id));
        }
        items.push(item);
    }
    if items.is_empty() {
        return Err("0: the dataset has no questions".to_owned());
    }
    Ok(items)
}

fn item(line: Line, number: usize) -> Result<Item, String> {
    if line.question.trim().is_empty() {
        return Err("`question` is empty".to_owned());
    }
    let reference = match (line.expected, line.answer) {
        (Some(_), Some(_)) => {
            return Err("both `expected` and `answer` are given: keep one".to_owned());
        }
        (Some(value), None) | (None, Some(value)) => value,
        (None, None) => {
            return Err(format!(
                "missing field `expected` (or its alias `answer`): the right answer ({SHAPE})"
            ));
        }
    };
    let choices = line.choices.unwrap_or_default();
    let (expected, grader, question) = if choices.is_empty() {
        let (expected, gsm8k) = plain(&reference)?;
        let default = if gsm8k {
            Grader::Numeric
        } else {
            Grader::default()
        };
        (expected, line.grader.unwrap_or(default), line.question)
    } else {
        let index = choice::resolve(&reference, &choices)?;
        let question = choice::ask(&line.question, &choices)?;
        (
            choice::letter(index).to_string(),
            line.grader.unwrap_or(Grader::Choice),
            question,
        )
    };
    let mut item = Item {
        id: if line.id.is_empty() {
            format!("line-{number}")
        } else {
            line.id
        },
        question,
        expected,
        grader,
        tolerance: line.tolerance,
        rubric: line.rubric,
        choices,
        pattern: None,
        attachments: line.attachments,
    };
    item.pattern = item.grader.check(&item.reference())?;
    Ok(item)
}

/// The reference of an item without choices: a text or a number. A
/// GSM8K answer (`reasoning … #### 72`) gives its final answer, and says so.
fn plain(value: &Value) -> Result<(String, bool), String> {
    match value {
        Value::String(text) => match text.rsplit_once("####") {
            Some((_, last)) if !last.trim().is_empty() => Ok((last.trim().to_owned(), true)),
            _ => Ok((text.clone(), false)),
        },
        Value::Number(n) => Ok((n.to_string(), false)),
        other => Err(format!(
            "`expected` must be a text or a number, not {other}"
        )),
    }
}

#[cfg(test)]
mod tests;
