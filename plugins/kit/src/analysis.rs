//! A structured analysis of a panel's answers — what they agree on, where
//! they disagree and who holds which side, insights only one has, likely
//! errors, blind spots, and how confident the analyst is — read leniently
//! from an analyst model's reply (JSON in prose or a fence, loose quoting,
//! other key names, missing fields), and shown in words: to a writer model
//! (answers by label) and to the user (answers by model).

use serde_json::{Map, Value, json};

/// The JSON shape an analyst is asked for, in its prompt.
pub const FORMAT: &str = r#"{
  "consensus": ["a point all or most answers make"],
  "disagreements": [
    {"point": "what they disagree about",
     "sides": [{"position": "one view", "held_by": ["A", "C"]},
               {"position": "another view", "held_by": ["B"]}]}
  ],
  "unique_insights": [{"insight": "something only some answers noticed", "held_by": ["D"]}],
  "likely_errors": [{"error": "a claim that is probably wrong, and why", "held_by": ["E"]}],
  "blind_spots": ["something important every answer missed"],
  "confidence": {"level": "low | medium | high", "score": 0.7, "why": "what the confidence rests on"}
}"#;

/// The name the analysis's schema goes by in a request.
pub const SCHEMA_NAME: &str = "panel_analysis";

/// `FORMAT` as a JSON Schema a provider can hold a reply to (structured
/// outputs, strict): every property required, no others, and `held_by`
/// limited to `labels`, so a strict model cannot cite an answer that is
/// not there.
pub fn schema(labels: &[String]) -> Value {
    use crate::formats::object;
    let text = json!({"type": "string"});
    let texts = json!({"type": "array", "items": text});
    let held_by = json!({"type": "array", "items": {"type": "string", "enum": labels}});
    let claims = |name: &str| {
        json!({
            "type": "array",
            "items": object(json!({ name: text, "held_by": held_by })),
        })
    };
    object(json!({
        "consensus": texts,
        "disagreements": {
            "type": "array",
            "items": object(json!({
                "point": text,
                "sides": claims("position"),
            })),
        },
        "unique_insights": claims("insight"),
        "likely_errors": claims("error"),
        "blind_spots": texts,
        "confidence": object(json!({
            "level": {"type": "string", "enum": ["low", "medium", "high"]},
            "score": {"type": "number"},
            "why": text,
        })),
    }))
}

/// Items shown per section in the user's notes (details keep them all).
const NOTE_ITEMS: usize = 5;
/// Characters of one item shown in a note.
const NOTE_CHARS: usize = 300;

/// An analysis read from the analyst's reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    Parsed(Analysis),
    /// The reply held no analysis in JSON: it is used as free text.
    FreeText(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysis {
    pub consensus: Vec<String>,
    pub disagreements: Vec<Disagreement>,
    pub unique_insights: Vec<Claim>,
    pub likely_errors: Vec<Claim>,
    pub blind_spots: Vec<String>,
    pub confidence: Option<Confidence>,
    /// The sections the reply lacked, left empty.
    pub missing: Vec<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    pub point: String,
    pub sides: Vec<Claim>,
}

/// A claim (a side, an insight, an error) and the answers that make it, by
/// their position among the labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub text: String,
    pub held_by: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Confidence {
    /// "low", "medium" or "high".
    pub level: &'static str,
    /// In [0, 1], when the analyst gave a number.
    pub score: Option<f64>,
    pub why: String,
}

/// Who wrote an answer: its label in the prompts, its model, its call id.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub label: String,
    pub model: String,
    pub call: Option<u32>,
}

const SECTIONS: [(&str, &[&str]); 6] = [
    (
        "consensus",
        &["consensus", "agreements", "agreement", "common_ground"],
    ),
    (
        "disagreements",
        &[
            "disagreements",
            "disagreement",
            "contradictions",
            "conflicts",
        ],
    ),
    (
        "unique_insights",
        &["unique_insights", "insights", "unique", "partial_coverage"],
    ),
    (
        "likely_errors",
        &["likely_errors", "errors", "mistakes", "likely_mistakes"],
    ),
    ("blind_spots", &["blind_spots", "gaps", "omissions"]),
    ("confidence", &["confidence", "confidence_level"]),
];

/// Reads the analyst's `reply`; answers are named by `labels` ("A", "B").
pub fn read(reply: &str, labels: &[String]) -> Reading {
    let Some(mut object) = crate::extract_object(reply).map(normalised_keys) else {
        return Reading::FreeText(reply.trim().to_owned());
    };
    // {"analysis": {...}} is the same analysis, wrapped.
    if !has_any(&object)
        && let Some(Value::Object(inner)) = object.get("analysis")
    {
        object = normalised_keys(inner.clone());
    }
    if !has_any(&object) {
        return Reading::FreeText(reply.trim().to_owned());
    }
    let section = |name: &str| {
        let (_, aliases) = SECTIONS.iter().find(|(n, _)| *n == name).expect("known");
        aliases.iter().find_map(|a| object.get(*a))
    };
    let missing = SECTIONS
        .iter()
        .filter(|(name, _)| section(name).is_none())
        .map(|(name, _)| *name)
        .collect();
    let texts = |name| section(name).map(strings).unwrap_or_default();
    let claims = |name, keys: &[&str]| {
        section(name)
            .map(|v| items(v).iter().map(|i| claim(i, keys, labels)).collect())
            .unwrap_or_default()
    };
    let disagreements = section("disagreements")
        .map(|v| items(v).iter().map(|i| disagreement(i, labels)).collect())
        .unwrap_or_default();
    let why = ["confidence_why", "confidence_reason", "why"]
        .iter()
        .find_map(|k| object.get(*k).and_then(Value::as_str));
    Reading::Parsed(Analysis {
        consensus: texts("consensus"),
        disagreements,
        unique_insights: claims("unique_insights", &["insight", "text", "point", "claim"]),
        likely_errors: claims("likely_errors", &["error", "text", "claim", "point"]),
        blind_spots: texts("blind_spots"),
        confidence: section("confidence").and_then(|v| confidence(v, why)),
        missing,
    })
}

fn has_any(object: &Map<String, Value>) -> bool {
    SECTIONS
        .iter()
        .any(|(_, aliases)| aliases.iter().any(|a| object.contains_key(*a)))
}

/// Keys lowercased, spaces and dashes as underscores: "Blind Spots" ->
/// "blind_spots".
fn normalised_keys(object: Map<String, Value>) -> Map<String, Value> {
    object
        .into_iter()
        .map(|(k, v)| (k.trim().to_lowercase().replace([' ', '-'], "_"), v))
        .collect()
}

/// A list, whatever the reply made of it: an array, or one item.
fn items(value: &Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        Value::String(s) if s.trim().is_empty() => Vec::new(),
        other => vec![other.clone()],
    }
}

/// The text of an item: itself if a string, else its first text field.
fn text_of(item: &Value, keys: &[&str]) -> String {
    match item {
        Value::String(s) => s.trim().to_owned(),
        Value::Object(o) => keys
            .iter()
            .chain(&["text", "description", "summary"])
            .find_map(|k| o.get(*k).and_then(Value::as_str))
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|| item.to_string()),
        other => other.to_string(),
    }
}

fn strings(value: &Value) -> Vec<String> {
    items(value)
        .iter()
        .map(|i| text_of(i, &["point", "insight", "claim"]))
        .filter(|s| !s.is_empty())
        .collect()
}

const HOLDER_KEYS: [&str; 8] = [
    "held_by",
    "answers",
    "holders",
    "by",
    "who",
    "models",
    "supporters",
    "sources",
];

fn claim(item: &Value, keys: &[&str], labels: &[String]) -> Claim {
    let held_by = match item {
        Value::Object(o) => HOLDER_KEYS
            .iter()
            .find_map(|k| o.get(*k))
            .map(|v| holders(v, labels))
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    Claim {
        text: text_of(item, keys),
        held_by,
    }
}

fn disagreement(item: &Value, labels: &[String]) -> Disagreement {
    let point = text_of(item, &["point", "topic", "issue", "question"]);
    let sides = match item {
        Value::Object(o) => match ["sides", "positions", "views", "camps"]
            .iter()
            .find_map(|k| o.get(*k))
        {
            // {"A": "one view", "B": "another"} or {"one view": ["A"]}.
            Some(Value::Object(map)) => map
                .iter()
                .map(|(key, value)| match label_index(key, labels) {
                    Some(i) => Claim {
                        text: text_of(value, &["position", "view"]),
                        held_by: vec![i],
                    },
                    None => Claim {
                        text: key.clone(),
                        held_by: holders(value, labels),
                    },
                })
                .collect(),
            Some(sides) => items(sides)
                .iter()
                .map(|s| claim(s, &["position", "view", "side", "claim", "stance"], labels))
                .collect(),
            None => Vec::new(),
        },
        _ => Vec::new(),
    };
    Disagreement { point, sides }
}

/// Answer positions named in `value`: ["A", "C"], "A and C", "Answer B".
fn holders(value: &Value, labels: &[String]) -> Vec<usize> {
    let mut found = Vec::new();
    let mut add = |text: &str| {
        for token in text.split(|c: char| !c.is_alphanumeric()) {
            if let Some(i) = label_index(token, labels)
                && !found.contains(&i)
            {
                found.push(i);
            }
        }
    };
    match value {
        Value::Array(items) => items.iter().for_each(|i| match i {
            Value::String(s) => add(s),
            other => add(&other.to_string()),
        }),
        Value::String(s) => add(s),
        _ => {}
    }
    found
}

fn label_index(token: &str, labels: &[String]) -> Option<usize> {
    let token = token.trim();
    labels.iter().position(|l| l == token)
}

fn confidence(value: &Value, why: Option<&str>) -> Option<Confidence> {
    let (level, score, own_why) = match value {
        Value::Number(n) => (None, n.as_f64(), None),
        Value::String(s) => match s.trim().trim_end_matches('%').parse::<f64>() {
            Ok(n) => (None, Some(n), None),
            Err(_) => (level_in(s), None, None),
        },
        Value::Object(o) => {
            let get = |keys: &[&str]| keys.iter().find_map(|k| o.get(*k));
            let score = get(&["score", "value", "probability"]).and_then(|v| {
                v.as_f64()
                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            });
            let level = get(&["level", "rating", "confidence"])
                .and_then(Value::as_str)
                .and_then(level_in);
            let why = get(&["why", "reason", "rationale", "because", "explanation"])
                .and_then(Value::as_str);
            (level, score, why)
        }
        _ => (None, None, None),
    };
    // 0-100 read as a percentage; anything else outside [0, 1] is dropped.
    let score = score
        .map(|s| if s > 1.0 && s <= 100.0 { s / 100.0 } else { s })
        .filter(|s| (0.0..=1.0).contains(s));
    let level = level.or_else(|| {
        score.map(|s| match s {
            s if s < 0.4 => "low",
            s if s < 0.7 => "medium",
            _ => "high",
        })
    })?;
    Some(Confidence {
        level,
        score,
        why: own_why.or(why).unwrap_or_default().trim().to_owned(),
    })
}

fn level_in(text: &str) -> Option<&'static str> {
    let text = text.to_lowercase();
    ["high", "medium", "low"]
        .into_iter()
        .find(|l| text.contains(l))
        .or_else(|| text.contains("moderate").then_some("medium"))
}

impl Reading {
    /// The analysis as the writer reads it: answers by label.
    pub fn brief(&self, labels: &[String]) -> String {
        let who = |held: &[usize]| names(held, |i| labels.get(i).cloned());
        match self {
            Reading::FreeText(text) => format!("Analysis of the answers (free text):\n{text}"),
            Reading::Parsed(a) => {
                let mut out = String::from("Analysis of the answers:\n");
                let mut section = |title: &str, lines: Vec<String>| {
                    if !lines.is_empty() {
                        out.push_str(&format!("{title}:\n"));
                        for line in lines {
                            out.push_str(&format!("- {line}\n"));
                        }
                    }
                };
                section("Consensus", a.consensus.clone());
                section(
                    "Disagreements",
                    a.disagreements.iter().map(|d| d.line(&who)).collect(),
                );
                section(
                    "Unique insights",
                    a.unique_insights.iter().map(|c| c.line(&who)).collect(),
                );
                section(
                    "Likely errors",
                    a.likely_errors.iter().map(|c| c.line(&who)).collect(),
                );
                section("Blind spots", a.blind_spots.clone());
                if let Some(c) = &a.confidence {
                    out.push_str(&format!("Confidence: {}\n", c.line()));
                }
                out
            }
        }
    }

    /// The analysis as notes for the user, answers by model: one line per
    /// item, the first a few of each section (`details` has them all).
    pub fn notes(&self, analyst: &str, holders: &[Holder]) -> Vec<String> {
        let who = |held: &[usize]| names(held, |i| holders.get(i).map(|h| h.model.clone()));
        let a = match self {
            Reading::FreeText(text) => {
                return vec![format!(
                    "The analyst {analyst} did not reply in the structured form asked for, so its analysis was used as free text: {}",
                    short(text)
                )];
            }
            Reading::Parsed(a) => a,
        };
        let mut notes = vec![match &a.confidence {
            Some(c) => format!("Confidence: {}.", c.line()),
            None => format!("Confidence: {analyst} gave none."),
        }];
        if !a.consensus.is_empty() {
            let points: Vec<String> = a
                .consensus
                .iter()
                .take(NOTE_ITEMS)
                .map(|c| short(c))
                .collect();
            notes.push(format!("Consensus: {}.", points.join("; ")));
        }
        let mut each = |title: &str, lines: Vec<String>| {
            notes.extend(
                lines
                    .into_iter()
                    .take(NOTE_ITEMS)
                    .map(|l| format!("{title}: {}", short(&l))),
            );
        };
        each(
            "Disagreement",
            a.disagreements.iter().map(|d| d.line(&who)).collect(),
        );
        each(
            "Unique insight",
            a.unique_insights.iter().map(|c| c.line(&who)).collect(),
        );
        each(
            "Likely error",
            a.likely_errors.iter().map(|c| c.line(&who)).collect(),
        );
        each("Blind spot", a.blind_spots.clone());
        if !a.missing.is_empty() {
            notes.push(format!(
                "The analysis left out {}; shown as empty.",
                a.missing.join(", ").replace('_', " ")
            ));
        }
        notes
    }

    /// The analysis as JSON for the result's details: holders with their
    /// label, model and call id.
    pub fn details(&self, holders: &[Holder]) -> Value {
        let who = |held: &[usize]| -> Vec<Value> {
            held.iter()
                .filter_map(|&i| holders.get(i))
                .map(|h| json!({"answer": h.label, "model": h.model, "call": h.call}))
                .collect()
        };
        let claims = |claims: &[Claim], key: &str| -> Vec<Value> {
            claims
                .iter()
                .map(|c| json!({key: c.text, "held_by": who(&c.held_by)}))
                .collect()
        };
        match self {
            Reading::FreeText(text) => json!({"parsed": false, "text": text}),
            Reading::Parsed(a) => json!({
                "parsed": true,
                "consensus": a.consensus,
                "disagreements": a.disagreements.iter().map(|d| json!({
                    "point": d.point,
                    "sides": claims(&d.sides, "position"),
                })).collect::<Vec<_>>(),
                "unique_insights": claims(&a.unique_insights, "insight"),
                "likely_errors": claims(&a.likely_errors, "error"),
                "blind_spots": a.blind_spots,
                "confidence": a.confidence.as_ref().map(|c| json!({
                    "level": c.level, "score": c.score, "why": c.why,
                })),
                "missing": a.missing,
            }),
        }
    }
}

impl Claim {
    fn line(&self, who: &impl Fn(&[usize]) -> String) -> String {
        match who(&self.held_by).as_str() {
            "" => self.text.clone(),
            names => format!("{} ({names})", self.text),
        }
    }
}

impl Disagreement {
    fn line(&self, who: &impl Fn(&[usize]) -> String) -> String {
        if self.sides.is_empty() {
            return self.point.clone();
        }
        let sides: Vec<String> = self
            .sides
            .iter()
            .map(|s| match who(&s.held_by).as_str() {
                "" => format!("\"{}\"", s.text),
                names => format!("\"{}\" ({names})", s.text),
            })
            .collect();
        format!("{} — {}", self.point, sides.join(" vs "))
    }
}

impl Confidence {
    fn line(&self) -> String {
        let score = self.score.map(|s| format!(" ({s:.2})")).unwrap_or_default();
        match self.why.as_str() {
            "" => format!("{}{score}", self.level),
            why => format!("{}{score} — {why}", self.level),
        }
    }
}

fn names(held: &[usize], name: impl Fn(usize) -> Option<String>) -> String {
    held.iter()
        .filter_map(|&i| name(i))
        .collect::<Vec<_>>()
        .join(", ")
}

fn short(text: &str) -> String {
    let text = text.trim().replace('\n', " ");
    match text.char_indices().nth(NOTE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}
