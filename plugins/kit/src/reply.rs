//! Reading model replies: JSON anywhere in prose, lists in any common
//! form, answers reduced to what a vote compares.

use serde_json::Value;

/// Opening brackets tried before giving up: keeps a reply full of
/// brackets from costing more than a few linear scans.
const JSON_STARTS: usize = 64;

/// The first JSON value (object or array) in `text`, wherever it sits:
/// each opening bracket is tried in turn, parsing just one value from it.
pub fn extract_json(text: &str) -> Option<Value> {
    let text = text.trim();
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    text.char_indices()
        .filter(|(_, c)| *c == '{' || *c == '[')
        .take(JSON_STARTS)
        .find_map(|(start, _)| {
            serde_json::Deserializer::from_str(&text[start..])
                .into_iter::<Value>()
                .next()?
                .ok()
        })
}

/// The first JSON object in `text`, read leniently: inside prose or a code
/// fence, and — when strict JSON finds none — with single-quoted strings,
/// trailing commas and Python's `True`/`False`/`None` accepted. `None`
/// when there is no object at all (the reply is free text).
pub fn extract_object(text: &str) -> Option<serde_json::Map<String, Value>> {
    let first = |text: &str| {
        text.char_indices()
            .filter(|(_, c)| *c == '{')
            .take(JSON_STARTS)
            .find_map(|(start, _)| {
                match serde_json::Deserializer::from_str(&text[start..])
                    .into_iter::<Value>()
                    .next()?
                    .ok()?
                {
                    Value::Object(map) => Some(map),
                    _ => None,
                }
            })
    };
    first(text).or_else(|| {
        let start = text.find('{')?;
        first(&relax(&text[start..]))
    })
}

/// JSON as models loosely write it, made strict: 'single' -> "double"
/// quoted strings, trailing commas dropped, True/False/None -> JSON.
fn relax(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push('"');
                while let Some(c) = chars.next() {
                    out.push(c);
                    match c {
                        '\\' => out.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                out.push('"');
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some('\'') => out.push('\''),
                            Some(next) => {
                                out.push('\\');
                                out.push(next);
                            }
                            None => {}
                        },
                        '"' => out.push_str("\\\""),
                        '\'' => break,
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            ',' => {
                let rest = chars.clone().find(|c| !c.is_whitespace());
                if !matches!(rest, Some('}' | ']')) {
                    out.push(',');
                }
            }
            c if c.is_alphabetic() => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if !next.is_alphanumeric() && next != '_' {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                out.push_str(match word.as_str() {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    other => other,
                });
            }
            c => out.push(c),
        }
    }
    out
}

/// A list of items from a reply: a JSON array of strings (or of objects
/// with a `question` field), else a numbered or bulleted list.
pub fn extract_list(text: &str) -> Vec<String> {
    let from_json = match extract_json(text) {
        Some(Value::Array(items)) => items,
        Some(Value::Object(map)) => map
            .into_iter()
            .find_map(|(_, v)| v.as_array().cloned())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let items: Vec<String> = from_json
        .iter()
        .filter_map(|item| match item {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => ["question", "sub_question", "text"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_owned)),
            _ => None,
        })
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if !items.is_empty() {
        return items;
    }
    text.lines().filter_map(list_item).collect()
}

/// `value` with every object's keys in order.
pub(crate) fn canonical(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut pairs: Vec<(String, Value)> = map.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(pairs.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// `1. x`, `2) x`, `- x`, `* x` -> `x`.
fn list_item(line: &str) -> Option<String> {
    let line = line.trim();
    let rest = if let Some(rest) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) {
        rest
    } else {
        let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return None;
        }
        line[digits..]
            .strip_prefix('.')
            .or_else(|| line[digits..].strip_prefix(')'))?
    };
    let item = rest.trim().trim_matches('*').trim();
    (!item.is_empty()).then(|| item.to_owned())
}

/// An answer reduced to what a vote should compare: the text after a
/// final "answer:" marker if there is one, lowercased, punctuation and
/// extra whitespace removed. A JSON object or array (a structured
/// output) is compared as JSON, exactly: written compactly, keys in
/// order, nothing lowercased — `{"a":"X"}` and `{"a":"x"}` differ.
pub fn normalise(answer: &str) -> String {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(answer.trim())
        && (json.is_object() || json.is_array())
    {
        return canonical(json).to_string();
    }
    let lower = answer.to_lowercase();
    let tail = ["final answer:", "answer:"]
        .iter()
        .find_map(|marker| lower.rfind(marker).map(|at| &lower[at + marker.len()..]))
        .unwrap_or(&lower);
    let words: Vec<String> = tail
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_owned())
        .filter(|w| !w.is_empty())
        .collect();
    words.join(" ")
}

/// The numbers an answer states, as written after normalising ("70",
/// "8849", "3.5"), sorted and deduplicated: two answers that state
/// different numbers do not agree, however many words they share.
pub fn numbers(answer: &str) -> Vec<String> {
    let lower = answer.to_lowercase();
    let mut found: Vec<String> = lower
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
        .map(|token| token.replace(',', ""))
        .map(|token| token.trim_matches('.').to_owned())
        .filter(|token| token.chars().any(|c| c.is_ascii_digit()))
        .map(|token| match token.split_once('.') {
            // 70.0 and 70 are the same number.
            Some((whole, fraction)) if fraction.chars().all(|c| c == '0') => whole.to_owned(),
            _ => token,
        })
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// Word-set similarity in [0, 1] (Jaccard), for convergence checks.
pub fn similarity(a: &str, b: &str) -> f64 {
    use std::collections::BTreeSet;
    let words = |s: &str| {
        normalise(s)
            .split(' ')
            .map(str::to_owned)
            .collect::<BTreeSet<_>>()
    };
    let (a, b) = (words(a), words(b));
    let union = a.union(&b).count();
    if union == 0 {
        1.0
    } else {
        a.intersection(&b).count() as f64 / union as f64
    }
}
