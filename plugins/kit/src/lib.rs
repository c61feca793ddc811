//! Helpers shared by chorus's Rust strategy plugins. Plain Rust, no WIT
//! types: each plugin keeps its own bindings and passes strings in.
//!
//! Model replies are outside data: every parser here accepts what models
//! actually write (code fences, prose around JSON, numbered lists) and
//! returns `None` rather than guessing when it finds nothing usable.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses a plugin's settings, with a message that says what was expected.
pub fn settings<T: DeserializeOwned>(json: &str, expected: &str) -> Result<T, String> {
    serde_json::from_str(if json.trim().is_empty() { "{}" } else { json })
        .map_err(|e| format!("bad settings: {e} (expected {expected})"))
}

/// An integer option from the request's options object, if present.
pub fn option_u32(options: &str, name: &str) -> Option<u32> {
    let value: Value = serde_json::from_str(options).ok()?;
    value
        .get(name)?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}

/// Opening brackets tried before giving up: keeps a reply full of
/// brackets from costing more than a few linear scans.
const JSON_STARTS: usize = 64;

/// A count: the call's option `name`, else the plugin's setting, else
/// `default`; refused outside `range` with a message that says so.
pub fn count(
    options: &str,
    name: &str,
    setting: Option<u32>,
    default: u32,
    range: std::ops::RangeInclusive<u32>,
) -> Result<u32, String> {
    let value = option_u32(options, name).or(setting).unwrap_or(default);
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(format!(
            "{name} must be between {} and {}, got {value}",
            range.start(),
            range.end()
        ))
    }
}

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
/// extra whitespace removed.
pub fn normalise(answer: &str) -> String {
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

/// A deterministic permutation of `0..n` seeded by `seed` (the run id), so
/// a run can be replayed and every run is shuffled differently.
pub fn shuffle(seed: &str, n: usize) -> Vec<usize> {
    let mut state = seed.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut next = || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// "A", "B", … "Z", "AA", …: anonymous names for candidates.
pub fn letter(i: usize) -> String {
    let mut n = i;
    let mut name = String::new();
    loop {
        name.insert(0, (b'A' + (n % 26) as u8) as char);
        if n < 26 {
            return name;
        }
        n = n / 26 - 1;
    }
}

/// Characters per token we assume when we cannot tokenize: deliberately low.
const CHARS_PER_TOKEN: u64 = 3;
/// Tokens kept free for the instructions, the question and the reply.
const RESERVED_TOKENS: u64 = 8_192;

/// Cuts texts to a common length when together they would not fit a
/// context window. Returns them and, if anything was cut, a sentence
/// saying how much.
pub fn fit(texts: &[&str], context_window: Option<u32>) -> (Vec<String>, Option<String>) {
    let whole = || texts.iter().map(|t| (*t).to_owned()).collect();
    let Some(window) = context_window else {
        return (whole(), None);
    };
    let budget = (u64::from(window).saturating_sub(RESERVED_TOKENS) * CHARS_PER_TOKEN) as usize;
    let total: usize = texts.iter().map(|t| t.chars().count()).sum();
    if total <= budget {
        return (whole(), None);
    }
    let share = budget / texts.len().max(1);
    let fitted = texts
        .iter()
        .map(|t| {
            if t.chars().count() <= share {
                (*t).to_owned()
            } else {
                let mut cut: String = t.chars().take(share).collect();
                cut.push_str("\n[… cut to fit the context window]");
                cut
            }
        })
        .collect();
    let kept: usize = texts.iter().map(|t| t.chars().count().min(share)).sum();
    (
        fitted,
        Some(format!(
            "the answers were cut to {kept} of {total} characters"
        )),
    )
}

/// A failure as people read it: `kind` is the WIT enum's Debug name.
pub fn describe_failure(kind: &str, status: Option<u16>, message: &str) -> String {
    let kind = kind.rsplit("::").next().unwrap_or(kind);
    let words = match kind {
        "HttpStatus" => "HTTP error".to_owned(),
        "Connection" => "connection failed".to_owned(),
        "MissingApiKey" => "missing API key".to_owned(),
        // Split CamelCase: RateLimited -> rate limited; also kinds added
        // to the contract after this plugin was built.
        other => {
            let mut words = String::new();
            for (i, c) in other.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    words.push(' ');
                }
                words.extend(c.to_lowercase());
            }
            words
        }
    };
    match status {
        Some(status) => format!("{words} (HTTP {status}): {message}"),
        None => format!("{words}: {message}"),
    }
}

/// A model and a text about it: its answer, or its error.
pub type ModelText = (String, String);

/// Tries `models` in order until `call` succeeds. Returns the model and
/// its text, and every earlier model's error, so nothing is hidden.
pub fn first_success(
    models: &[String],
    mut call: impl FnMut(&str) -> Result<String, String>,
) -> (Option<ModelText>, Vec<ModelText>) {
    let mut errors = Vec::new();
    for model in models {
        match call(model) {
            Ok(text) if !text.trim().is_empty() => return (Some((model.clone(), text)), errors),
            Ok(_) => errors.push((model.clone(), "empty reply".to_owned())),
            Err(e) => errors.push((model.clone(), e)),
        }
    }
    (None, errors)
}

/// Notes for a fallback chain's earlier failures.
pub fn fallback_notes(role: &str, errors: &[(String, String)], used: Option<&str>) -> Vec<String> {
    errors
        .iter()
        .map(|(model, error)| match used {
            Some(used) => format!("{role} {model} failed ({error}); fell back to {used}."),
            None => format!("{role} {model} failed: {error}"),
        })
        .collect()
}

/// Answers side by side under their models' names: what a result carries
/// when merging them failed.
pub fn side_by_side(answers: &[(&str, &str)]) -> String {
    answers
        .iter()
        .map(|(model, text)| format!("## {model}\n\n{}", text.trim()))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests;

/// WIT-typed helpers, expanded inside a plugin crate whose bindings were
/// generated at its root (`wit_bindgen::generate!` in `lib.rs`): every
/// world imports the same `host` and `types`, so one text serves all.
/// `crate::` is deliberate: it names the calling plugin's bindings.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! guest_helpers {
    () => {
        #[allow(dead_code)]
        mod guest {
            use crate::chorus::strategy::host;
            use crate::chorus::strategy::types::{
                Answer, AnswerKind, ChatRequest, Completion, Failure, Message, Plan, Role,
                Sampling, Seat,
            };

            pub const NO_SAMPLING: Sampling = Sampling {
                temperature: None,
                top_p: None,
                max_tokens: None,
                seed: None,
            };

            pub fn message(role: Role, content: impl Into<String>) -> Message {
                Message {
                    role,
                    content: content.into(),
                }
            }

            pub fn request(
                label: &str,
                model: &str,
                messages: Vec<Message>,
                sampling: Sampling,
            ) -> ChatRequest {
                ChatRequest {
                    label: label.to_owned(),
                    model: model.to_owned(),
                    messages,
                    sampling,
                }
            }

            /// Runs requests at once; each outcome as text or a described failure.
            pub fn complete(requests: &[ChatRequest]) -> Vec<Result<String, String>> {
                host::complete(requests).iter().map(text_of).collect()
            }

            /// One call: system + user message to `model`.
            pub fn ask(
                label: &str,
                model: &str,
                system: &str,
                user: &str,
                sampling: Sampling,
            ) -> Result<String, String> {
                let messages = vec![message(Role::System, system), message(Role::User, user)];
                complete(&[request(label, model, messages, sampling)])
                    .pop()
                    .unwrap_or_else(|| Err("the host returned no outcome".to_owned()))
            }

            pub fn text_of(completion: &Completion) -> Result<String, String> {
                match &completion.outcome {
                    Ok(reply) if !reply.content.trim().is_empty() => Ok(reply.content.clone()),
                    Ok(_) => Err("empty answer".to_owned()),
                    Err(failure) => Err(describe(failure)),
                }
            }

            pub fn describe(failure: &Failure) -> String {
                $crate::describe_failure(
                    &format!("{:?}", failure.kind),
                    failure.status,
                    &failure.message,
                )
            }

            /// The completions that answered: (index, completion, text).
            pub fn answered(completions: &[Completion]) -> Vec<(u32, &Completion, &str)> {
                completions
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| match &c.outcome {
                        Ok(reply) if !reply.content.trim().is_empty() => {
                            Some((i as u32, c, reply.content.as_str()))
                        }
                        _ => None,
                    })
                    .collect()
            }

            /// One note per completion that did not answer.
            pub fn failure_notes(completions: &[Completion]) -> Vec<String> {
                completions
                    .iter()
                    .filter_map(|c| text_of(c).err().map(|e| format!("{} failed: {e}", c.model)))
                    .collect()
            }

            /// A merge that succeeded: who merged, the text, what to tell the user.
            pub struct Merged {
                pub model: String,
                pub text: String,
                pub notes: Vec<String>,
            }

            /// Merges `answers` (heading, text) with the first of
            /// `synthesizers` that succeeds, fitting them to its context
            /// window. `Err` carries every synthesizer's own error.
            pub fn merge(
                question: &str,
                answers: &[(String, String)],
                synthesizers: &[String],
                instructions: &str,
                sampling: Sampling,
            ) -> Result<Merged, Vec<(String, String)>> {
                let mut cut_note = None;
                let (found, errors) = $crate::first_success(synthesizers, |model| {
                    let texts: Vec<&str> = answers.iter().map(|(_, t)| t.as_str()).collect();
                    let (texts, cut) = $crate::fit(&texts, context_window(model));
                    cut_note = cut.map(|c| format!("To fit {model}'s context window, {c}."));
                    let mut prompt = format!("Question:\n{question}\n\n");
                    for ((heading, _), text) in answers.iter().zip(&texts) {
                        prompt.push_str(&format!("--- {heading} ---\n{}\n\n", text.trim()));
                    }
                    prompt.push_str("Write the best answer to the question.");
                    host::progress(&format!("merging {} answers with {model}", answers.len()));
                    ask("synthesis", model, instructions, &prompt, sampling)
                });
                match found {
                    Some((model, text)) => {
                        let mut notes =
                            $crate::fallback_notes("Synthesizer", &errors, Some(&model));
                        notes.extend(cut_note);
                        Ok(Merged { model, text, notes })
                    }
                    None => Err(errors),
                }
            }

            /// A plan of model ids with default sampling; the synthesizers
            /// default to the first panel model.
            pub fn plan(panel: Vec<String>, synthesizers: Vec<String>, notes: Vec<String>) -> Plan {
                let synthesizers = if synthesizers.is_empty() {
                    panel.iter().take(1).cloned().collect()
                } else {
                    synthesizers
                };
                let panel = panel
                    .into_iter()
                    .map(|model| Seat {
                        model,
                        sampling: NO_SAMPLING,
                    })
                    .collect();
                Plan {
                    panel,
                    synthesizers,
                    notes,
                }
            }

            /// The answer when fewer than two completions answered: `none`
            /// with every failure, or the lone survivor verbatim as `single`
            /// (never a synthesis). `why` ends "Only M answered, so …".
            pub fn too_few(completions: &[Completion], why: &str) -> Option<Answer> {
                let answered = answered(completions);
                let mut notes = failure_notes(completions);
                let (kind, text, sources) = match answered.as_slice() {
                    [] => (
                        AnswerKind::None,
                        format!("No model answered ({} tried).", completions.len()),
                        vec![],
                    ),
                    [(index, completion, text)] => {
                        notes.insert(0, format!("Only {} answered, so {why}.", completion.model));
                        (AnswerKind::Single, (*text).to_owned(), vec![*index])
                    }
                    _ => return None,
                };
                Some(Answer {
                    kind,
                    text,
                    sources,
                    notes,
                    details: String::new(),
                })
            }

            /// The context window the catalog gives `model`, if any.
            pub fn context_window(model: &str) -> Option<u32> {
                host::models()
                    .into_iter()
                    .find(|m| m.id == model)
                    .and_then(|m| m.context_window)
            }
        }
    };
}
