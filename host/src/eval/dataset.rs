//! An evaluation dataset: JSON Lines, one question per line, each with what
//! a right answer looks like and how to tell (`grader`). Blank lines and
//! lines starting with `#` are skipped; a bad line is an error naming it.

use std::path::Path;

use serde::Deserialize;

use super::grade::Grader;

/// One question of a dataset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// Names the question in reports and the journal; default: its line.
    #[serde(default)]
    pub id: String,
    pub question: String,
    /// The right answer (for `regex`, the pattern; for `judge`, a reference
    /// answer the judge may use).
    pub expected: String,
    /// `contains` (the default), `exact`, `regex`, `numeric` or `judge`.
    #[serde(default)]
    pub grader: Grader,
    /// For `numeric`: how far the answer may be from `expected`.
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// For `judge`: what a right answer must do.
    #[serde(default)]
    pub rubric: Option<String>,
}

/// The largest dataset file read, in bytes.
const MAX_DATASET_BYTES: u64 = 64 << 20;

/// Reads a dataset, or says which line is wrong and why.
pub fn read(path: &Path) -> Result<Vec<Item>, String> {
    let text = crate::config::read_regular_file(path, MAX_DATASET_BYTES)
        .map_err(|e| format!("cannot read the dataset {}: {e}", path.display()))
        .and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| format!("the dataset {} is not UTF-8 text", path.display()))
        })?;
    parse(&text).map_err(|e| format!("{}:{e}", path.display()))
}

/// Parses JSON Lines; errors read `LINE: what is wrong`.
pub fn parse(text: &str) -> Result<Vec<Item>, String> {
    let mut items: Vec<Item> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut item: Item = serde_json::from_str(line).map_err(|e| {
            format!(
                "{number}: {e} (each line is an object with `question`, `expected`, and optionally `id`, `grader`, `tolerance`, `rubric`)"
            )
        })?;
        if item.id.is_empty() {
            item.id = format!("line-{number}");
        }
        if item.question.trim().is_empty() {
            return Err(format!("{number}: `question` is empty"));
        }
        item.grader
            .check(&item)
            .map_err(|e| format!("{number}: {e}"))?;
        if items.iter().any(|other| other.id == item.id) {
            return Err(format!("{number}: the id `{}` is used twice", item.id));
        }
        items.push(item);
    }
    if items.is_empty() {
        return Err("0: the dataset has no questions".to_owned());
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_defaults_and_errors_name_the_line() {
        let items = parse(
            "# capitals\n{\"question\": \"Capital of France?\", \"expected\": \"Paris\"}\n\n\
             {\"id\": \"pi\", \"question\": \"Pi to 2 places?\", \"expected\": \"3.14\", \"grader\": \"numeric\", \"tolerance\": 0.005}\n",
        )
        .unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].id, "line-2");
        assert_eq!(items[0].grader, Grader::Contains);
        assert_eq!(items[1].grader, Grader::Numeric);

        let error = parse("{\"question\": \"q\"}").unwrap_err();
        assert!(error.starts_with("1: missing field `expected`"), "{error}");
        let error =
            parse("{\"question\": \"q\", \"expected\": \"x\", \"grader\": \"fuzzy\"}").unwrap_err();
        assert!(error.contains("unknown variant `fuzzy`"), "{error}");
        let error =
            parse("{\"question\": \"q\", \"expected\": \"(\", \"grader\": \"regex\"}").unwrap_err();
        assert!(error.contains("not a regular expression"), "{error}");
        let error = parse(
            "{\"id\": \"a\", \"question\": \"q\", \"expected\": \"x\"}\n{\"id\": \"a\", \"question\": \"q\", \"expected\": \"x\"}",
        )
        .unwrap_err();
        assert!(error.starts_with("2: the id `a` is used twice"), "{error}");
        assert!(parse("\n# nothing\n").is_err());
    }
}
