//! Whether the check agrees with the answer. Answers that are the same once
//! normalised agree. Otherwise the check model judges: one short call,
//! asked for a JSON verdict (with the response format where its model
//! takes one), because models word the same answer differently far more
//! often than they differ in substance, and word overlap misses a changed
//! number or a "not". Without a verdict — judging turned off, no call left,
//! the answers too long for the judge's window, a failed or unreadable
//! reply — the words decide: enough overlap and the same numbers, and the
//! notes say so.

use kit::wit::host;
use kit::wit::types::{Completion, FormatSent, Role, Sampling};
use serde_json::{Value, json};

const JUDGE: &str = "You compare two answers to the same question. Decide whether they reach \
the same conclusion: the same facts, numbers, choices or recommendation, even if they are worded \
differently or one gives more detail. If they contradict each other on anything the question \
asks about, they are different. Do not judge which one is right.";

const VERDICT: &str = "Reply with only a JSON object: {\"same\": true or false, \"why\": \"one \
short sentence\"}";

/// What is compared, and how.
pub struct Compare<'a> {
    pub question: &'a str,
    pub answer: &'a str,
    pub check: &'a str,
    /// The model that judges (the check's), or `None` to let the words decide.
    pub judge: Option<&'a str>,
    /// Word overlap below this is a disagreement when the words decide.
    pub threshold: f64,
}

/// Who decided.
pub enum By {
    /// The same answer once normalised.
    Identical,
    Judge {
        model: String,
        call: Option<u32>,
        format: FormatSent,
    },
    Words,
}

pub struct Verdict {
    pub agree: bool,
    pub by: By,
    /// Word overlap (Jaccard) in [0, 1], whoever decided.
    pub overlap: f64,
    /// What the judge said, or what the words showed.
    pub why: String,
    /// Said to the user when a judge was wanted but the words decided.
    pub fallback: Option<String>,
    /// The judge's call, for the spend; `None` when none was made.
    pub judged: Option<Completion>,
}

impl Verdict {
    pub fn details(&self) -> Value {
        let by = match &self.by {
            By::Identical => json!({"by": "identical"}),
            By::Judge {
                model,
                call,
                format,
            } => json!({
                "by": "judge",
                "model": model,
                "call": call,
                "format": match format {
                    FormatSent::JsonSchema => "json-schema",
                    FormatSent::JsonObject => "json-object",
                    FormatSent::None => "none",
                },
            }),
            By::Words => json!({"by": "words"}),
        };
        let mut details = by;
        details["agree"] = json!(self.agree);
        details["why"] = json!(self.why);
        details
    }
}

pub fn decide(compare: &Compare<'_>) -> Verdict {
    let overlap = if kit::normalise(compare.answer) == kit::normalise(compare.check) {
        1.0
    } else {
        kit::similarity(compare.answer, compare.check)
    };
    if overlap >= 1.0 && kit::numbers(compare.answer) == kit::numbers(compare.check) {
        return Verdict {
            agree: true,
            by: By::Identical,
            overlap,
            why: "the same answer".into(),
            fallback: None,
            judged: None,
        };
    }
    let fallback = match compare.judge {
        None => None,
        Some(model) => match judge(compare, model) {
            Judged::Verdict(verdict) => return Verdict { overlap, ..verdict },
            Judged::Not(why) => Some(format!(
                "{model} could not judge whether the answers agree ({why}), so their words decided."
            )),
        },
    };
    let (agree, why) = by_words(compare.answer, compare.check, overlap, compare.threshold);
    Verdict {
        agree,
        by: By::Words,
        overlap,
        why,
        fallback,
        judged: None,
    }
}

/// Overlap at or above `threshold`, and the same numbers.
fn by_words(answer: &str, check: &str, overlap: f64, threshold: f64) -> (bool, String) {
    let (a, b) = (kit::numbers(answer), kit::numbers(check));
    if a != b {
        let list = |n: &[String]| {
            if n.is_empty() {
                "none".to_owned()
            } else {
                n.join(", ")
            }
        };
        return (
            false,
            format!("they state different numbers: {} vs {}", list(&a), list(&b)),
        );
    }
    let agree = overlap >= threshold;
    let relation = if agree { "at or above" } else { "below" };
    (
        agree,
        format!("word overlap {overlap:.2}, {relation} {threshold}"),
    )
}

enum Judged {
    Verdict(Verdict),
    /// No verdict, and why.
    Not(String),
}

fn judge(compare: &Compare<'_>, model: &str) -> Judged {
    if host::budget().calls_left == 0 {
        return Judged::Not("the run has no call left".into());
    }
    let fitted = match kit::guest::fit_for(
        model,
        &[compare.answer, compare.check],
        &[JUDGE, compare.question, VERDICT],
        None,
    ) {
        Ok(fitted) => fitted,
        Err(small) => return Judged::Not(format!("too small for the answers: {small}")),
    };
    let prompt = format!(
        "Question:\n{}\n\n--- Answer 1 ---\n{}\n\n--- Answer 2 ---\n{}\n\n{VERDICT}",
        compare.question, fitted.texts[0], fitted.texts[1]
    );
    let mut request = kit::guest::request(
        "cascade: agreement",
        model,
        vec![
            kit::guest::message(Role::System, JUDGE),
            kit::guest::message(Role::User, prompt),
        ],
        Sampling {
            temperature: Some(0.0),
            ..kit::guest::NO_SAMPLING
        },
    );
    request.response_format = Some(kit::formats::json_schema(
        "agreement",
        &kit::formats::object(json!({
            "same": {"type": "boolean"},
            "why": {"type": "string"},
        })),
    ));
    host::progress(&format!("{model} is judging whether the answers agree"));
    let Some(completion) = host::complete(&[request]).pop() else {
        return Judged::Not("the host returned no outcome".into());
    };
    let read = match &completion.outcome {
        Ok(reply) => read_verdict(&reply.content).ok_or_else(|| {
            format!(
                "its reply was neither same nor different: {}",
                excerpt(&reply.content)
            )
        }),
        Err(_) => Err(kit::guest::text_of(&completion).unwrap_err()),
    };
    match read {
        Ok((agree, why)) => Judged::Verdict(Verdict {
            agree,
            by: By::Judge {
                model: model.to_owned(),
                call: completion.id,
                format: completion
                    .outcome
                    .as_ref()
                    .map_or(FormatSent::None, |r| r.format_sent),
            },
            overlap: 0.0,
            why: if why.is_empty() {
                format!(
                    "{model} judged them {}",
                    if agree { "the same" } else { "different" }
                )
            } else {
                why
            },
            fallback: None,
            judged: Some(completion),
        }),
        Err(why) => Judged::Not(why),
    }
}

/// `{"same": bool, "why": "…"}`, read leniently: in prose or a fence,
/// `agree` for `same`, `"true"` for `true`, or a bare first word.
fn read_verdict(reply: &str) -> Option<(bool, String)> {
    if let Some(object) = kit::extract_object(reply) {
        let same = ["same", "agree", "agrees", "equivalent"]
            .iter()
            .find_map(|key| object.get(*key))
            .and_then(|value| match value {
                Value::Bool(b) => Some(*b),
                Value::String(s) => yes_or_no(s),
                _ => None,
            });
        if let Some(same) = same {
            let why = object
                .get("why")
                .or_else(|| object.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_owned();
            return Some((same, why));
        }
    }
    yes_or_no(&kit::normalise(reply)).map(|same| (same, String::new()))
}

fn yes_or_no(text: &str) -> Option<bool> {
    let first = text.split_whitespace().next()?.to_lowercase();
    match first.trim_matches(|c: char| !c.is_alphanumeric()) {
        "same" | "true" | "yes" | "agree" | "agrees" => Some(true),
        "different" | "false" | "no" | "disagree" | "disagrees" => Some(false),
        _ => None,
    }
}

/// The start of a reply, for a note.
fn excerpt(text: &str) -> String {
    const MAX: usize = 120;
    let text = text.trim();
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
