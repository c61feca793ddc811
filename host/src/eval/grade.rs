//! Telling a right answer from a wrong one: by text (`exact`, `contains`),
//! by pattern (`regex`), by value (`numeric`, within a tolerance), by the
//! choice picked (`choice`), or by a judge model with a rubric. Every grade
//! says why, so a surprising score can be checked by reading. Grading knows
//! nothing of datasets: it is given a [`Reference`].

pub mod choice;

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::llm::{ChatRequest, Llm, Message, Role, Sampling};

/// What grading needs to know of a question.
#[derive(Debug, Clone, Copy)]
pub struct Reference<'a> {
    pub question: &'a str,
    pub expected: &'a str,
    pub tolerance: Option<f64>,
    pub rubric: Option<&'a str>,
    pub choices: &'a [String],
    /// `expected` compiled, for `regex` (compiled here when absent).
    pub pattern: Option<&'a Regex>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Grader {
    /// The answer, normalised, is the expected text.
    Exact,
    /// The answer, normalised, contains the expected text.
    #[default]
    Contains,
    /// The answer matches the expected regular expression.
    Regex,
    /// The last number in the answer is within `tolerance` of the expected.
    Numeric,
    /// A judge model decides, with the item's rubric.
    Judge,
    /// The answer picks the expected one of the item's `choices`.
    Choice,
}

/// A grade and the reason for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    pub pass: bool,
    pub why: String,
}

impl Grade {
    fn new(pass: bool, why: impl Into<String>) -> Self {
        Self {
            pass,
            why: why.into(),
        }
    }
}

impl Grader {
    /// Checks what the grader needs from the item before anything runs;
    /// for `regex`, returns the pattern compiled.
    pub fn check(self, item: &Reference<'_>) -> Result<Option<Regex>, String> {
        match self {
            Self::Regex => Regex::new(item.expected)
                .map(Some)
                .map_err(|e| format!("`expected` is not a regular expression: {e}")),
            Self::Numeric => {
                number(item.expected).ok_or("`expected` is not a number")?;
                match item.tolerance {
                    Some(t) if !(t.is_finite() && t >= 0.0) => {
                        Err("`tolerance` must be a number ≥ 0".to_owned())
                    }
                    _ => Ok(None),
                }
            }
            Self::Choice if item.choices.is_empty() => {
                Err("`grader` `choice` needs `choices`: the list to choose from".to_owned())
            }
            _ => Ok(None),
        }
    }

    pub fn needs_judge(self) -> bool {
        self == Self::Judge
    }

    /// Grades `answer` for `item`; `judge` is the model for `judge` items.
    pub async fn grade(
        self,
        item: &Reference<'_>,
        answer: &str,
        judge: Option<(&Llm, &str)>,
    ) -> Grade {
        match self {
            Self::Exact => {
                let pass = normalise(answer) == normalise(item.expected);
                Grade::new(
                    pass,
                    if pass {
                        "the same text"
                    } else {
                        "different text"
                    },
                )
            }
            Self::Contains => {
                let pass = normalise(answer).contains(&normalise(item.expected));
                Grade::new(
                    pass,
                    if pass {
                        format!("contains `{}`", item.expected)
                    } else {
                        format!("does not contain `{}`", item.expected)
                    },
                )
            }
            Self::Regex => {
                let compiled;
                let pattern = match item.pattern {
                    Some(pattern) => pattern,
                    None => match Regex::new(item.expected) {
                        Ok(pattern) => {
                            compiled = pattern;
                            &compiled
                        }
                        Err(e) => return Grade::new(false, format!("bad pattern: {e}")),
                    },
                };
                let pass = pattern.is_match(answer);
                Grade::new(
                    pass,
                    format!(
                        "{} /{}/",
                        if pass { "matches" } else { "does not match" },
                        item.expected
                    ),
                )
            }
            Self::Choice => {
                let (pass, why) = choice::grade(item.expected, item.choices, answer);
                Grade::new(pass, why)
            }
            Self::Numeric => numeric(item, answer),
            Self::Judge => match judge {
                Some((llm, model)) => judged(llm, model, item, answer).await,
                None => Grade::new(false, "no judge model was given (--judge MODEL)"),
            },
        }
    }
}

/// Lowercase, words separated by single spaces, without surrounding
/// punctuation: `  The answer is: Paris. ` and `the answer is paris` match.
fn normalise(text: &str) -> String {
    text.split_whitespace()
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A number written plainly: `3.14`, `-2`, `1,000`, `1e3`.
fn number(text: &str) -> Option<f64> {
    let cleaned: String = text.trim().chars().filter(|&c| c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A number in running text, as [`number`] reads it.
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?").expect("valid"));

fn numeric(item: &Reference<'_>, answer: &str) -> Grade {
    let Some(expected) = number(item.expected) else {
        return Grade::new(false, "`expected` is not a number");
    };
    let Some(found) = NUMBER
        .find_iter(answer)
        .filter_map(|m| number(m.as_str()))
        .last()
    else {
        return Grade::new(false, "the answer has no number");
    };
    let tolerance = item.tolerance.unwrap_or(0.0);
    let pass = (found - expected).abs() <= tolerance + f64::EPSILON * expected.abs();
    Grade::new(
        pass,
        format!(
            "{found} is {} {expected} ± {tolerance}",
            if pass { "within" } else { "outside" }
        ),
    )
}

const DEFAULT_RUBRIC: &str =
    "The answer is right if it agrees with the reference answer on every point that matters.";

async fn judged(llm: &Llm, model: &str, item: &Reference<'_>, answer: &str) -> Grade {
    let rubric = item.rubric.unwrap_or(DEFAULT_RUBRIC);
    let prompt = format!(
        "You grade answers. Question:\n{}\n\nReference answer:\n{}\n\nRubric: {rubric}\n\n\
         Answer to grade:\n{answer}\n\nReply with PASS or FAIL on the first line, then one sentence why.",
        item.question, item.expected
    );
    let request = ChatRequest {
        label: "judge".to_owned(),
        model: model.to_owned(),
        messages: vec![Message {
            role: Role::User,
            content: prompt,
        }],
        sampling: Sampling {
            temperature: Some(0.0),
            ..Sampling::default()
        },
        response_format: None,
        attachments: Default::default(),
        placed: Vec::new(),
        tools: None,
    };
    match llm.complete(&request).await.outcome {
        Ok(reply) => {
            let verdict = reply.content.trim_start();
            let first = verdict
                .split(|c: char| !c.is_alphabetic())
                .find(|w| !w.is_empty())
                .unwrap_or("")
                .to_uppercase();
            let reason = crate::record::first_line(verdict, 160);
            match first.as_str() {
                "PASS" => Grade::new(true, format!("judge {model}: {reason}")),
                "FAIL" => Grade::new(false, format!("judge {model}: {reason}")),
                _ => Grade::new(false, format!("judge {model} gave no verdict: {reason}")),
            }
        }
        Err(failure) => Grade::new(false, format!("judge {model} failed: {failure}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(expected: &str, tolerance: Option<f64>) -> Reference<'_> {
        Reference {
            question: "q",
            expected,
            tolerance,
            rubric: None,
            choices: &[],
            pattern: None,
        }
    }

    fn grade(expected: &str, grader: Grader, tolerance: Option<f64>, answer: &str) -> bool {
        let item = item(expected, tolerance);
        futures::executor::block_on(grader.grade(&item, answer, None)).pass
    }

    #[test]
    fn text_graders_ignore_case_spacing_and_punctuation() {
        assert!(grade("Paris", Grader::Exact, None, "  paris. "));
        assert!(!grade("Paris", Grader::Exact, None, "It is Paris."));
        assert!(grade("Paris", Grader::Contains, None, "It is **Paris**."));
        assert!(!grade("Paris", Grader::Contains, None, "Lyon"));
        assert!(grade(r"\b(?i)paris\b", Grader::Regex, None, "PARIS"));
    }

    #[test]
    fn numbers_are_read_from_the_last_one_in_the_answer() {
        assert!(grade(
            "3.14",
            Grader::Numeric,
            Some(0.005),
            "About 3, precisely 3.1416"
        ));
        assert!(!grade("3.14", Grader::Numeric, Some(0.001), "3.1416"));
        assert!(grade(
            "1000",
            Grader::Numeric,
            None,
            "It costs 1,000 dollars"
        ));
        assert!(grade("-2", Grader::Numeric, None, "x = -2"));
        assert!(!grade("5", Grader::Numeric, None, "no idea"));
    }

    #[test]
    fn a_judge_item_without_a_judge_fails_and_says_so() {
        let item = item("x", None);
        let grade = futures::executor::block_on(Grader::Judge.grade(&item, "x", None));
        assert!(!grade.pass);
        assert!(grade.why.contains("--judge"));
    }
}
