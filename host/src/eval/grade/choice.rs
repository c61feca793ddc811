//! Multiple choice: choices lettered A, B, C…; the reference given as an
//! index (0-based, as MMLU writes it), a letter or the choice's text; a
//! model's answer read as a letter (`B`, `(B)`, `B) text`, `The answer is
//! B`) or, failing that, as the text of exactly one choice.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::normalise;

/// At most this many choices: one per letter.
const MOST: usize = 26;

/// The letter of the choice at `index` (below [`MOST`]).
pub fn letter(index: usize) -> char {
    char::from(b'A' + u8::try_from(index % MOST).unwrap_or(0))
}

fn index_of(letter: &str, choices: &[String]) -> Option<usize> {
    let mut chars = letter.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return None;
    };
    let c = c.to_ascii_uppercase();
    c.is_ascii_uppercase()
        .then(|| usize::from(c as u8 - b'A'))
        .filter(|&i| i < choices.len())
}

/// The question as asked: the choices follow it, one lettered line each.
pub fn ask(question: &str, choices: &[String]) -> Result<String, String> {
    if !(2..=MOST).contains(&choices.len()) {
        return Err(format!(
            "`choices` has {} item(s): give from 2 to {MOST}",
            choices.len()
        ));
    }
    let mut asked = question.trim_end().to_owned();
    asked.push('\n');
    for (i, text) in choices.iter().enumerate() {
        asked.push_str(&format!("\n{}) {}", letter(i), text.trim()));
    }
    Ok(asked)
}

/// The right choice's index, from the item's `expected` or `answer`.
pub fn resolve(reference: &Value, choices: &[String]) -> Result<usize, String> {
    if choices.is_empty() {
        return Err("`choices` is empty".to_owned());
    }
    let range = || {
        format!(
            "0 to {} or A to {}",
            choices.len() - 1,
            letter(choices.len() - 1)
        )
    };
    let index = match reference {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&i| i < choices.len()),
        Value::String(text) => {
            let text = text.trim();
            let bare = text.trim_start_matches('(').trim_end_matches([')', '.']);
            index_of(bare, choices)
                .or_else(|| bare.parse::<usize>().ok().filter(|&i| i < choices.len()))
                .or_else(|| {
                    let wanted = normalise(text);
                    choices.iter().position(|c| normalise(c) == wanted)
                })
        }
        _ => None,
    };
    index.ok_or_else(|| {
        format!(
            "the answer {reference} is not one of the {} choices: give an index, a letter ({}) or a choice's text",
            choices.len(),
            range()
        )
    })
}

/// The whole answer is a letter: `B`, `(b)`, `**B**`, `B.`.
static ALONE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\**\(?([A-Za-z])\)?\**[.):]?\**$").expect("valid"));
/// The answer starts with a lettered choice: `B) text`, `(B) text`, `B. text`.
static LEADS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\**\(?([A-Z])[).:]\**(?:\s|$)").expect("valid"));
/// The answer names its letter: `The answer is B`, `Answer: (B)`.
static NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i:answer)(?:\s+(?i:is))?\s*:?\s*\**\(?([A-Z])\)?\**(?:[^\w]|$)").expect("valid")
});

/// The choice `answer` picks, if it picks one.
pub fn pick(answer: &str, choices: &[String]) -> Option<usize> {
    let answer = answer.trim();
    let by_letter = [&ALONE, &LEADS].iter().find_map(|pattern| {
        pattern
            .captures(answer)
            .and_then(|c| index_of(&c[1], choices))
    });
    let named = || {
        NAMED
            .captures_iter(answer)
            .filter_map(|c| index_of(&c[1], choices))
            .last()
    };
    by_letter.or_else(named).or_else(|| {
        let said = normalise(answer);
        let texts: Vec<String> = choices.iter().map(|c| normalise(c)).collect();
        texts.iter().position(|t| *t == said).or_else(|| {
            let mut within = texts
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.is_empty() && said.contains(t.as_str()));
            match (within.next(), within.next()) {
                (Some((i, _)), None) => Some(i),
                _ => None,
            }
        })
    })
}

/// Whether `answer` picks the choice lettered `expected`, and why.
pub fn grade(expected: &str, choices: &[String], answer: &str) -> (bool, String) {
    let Some(right) = index_of(expected, choices) else {
        return (false, format!("`{expected}` is not one of the choices"));
    };
    match pick(answer, choices) {
        Some(i) if i == right => (true, format!("chose {}", letter(i))),
        Some(i) => (false, format!("chose {}, not {}", letter(i), letter(right))),
        None => (
            false,
            format!("chose none of the choices (right: {})", letter(right)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choices() -> Vec<String> {
        ["Lyon", "Paris", "Marseille", "Nice"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn an_answer_picks_by_letter_in_the_usual_ways_or_by_text() {
        let c = choices();
        for answer in [
            "B",
            "(B)",
            "b",
            "**B**",
            "B) Paris",
            "(B) Paris, of course",
            "The answer is B",
            "After thinking: the answer is (B).",
            "Answer: B",
            "Paris",
            "It is Paris.",
        ] {
            assert_eq!(pick(answer, &c), Some(1), "{answer}");
        }
        assert_eq!(pick("I do not know", &c), None);
        assert_eq!(pick("Lyon or Paris", &c), None, "two choices named");
        assert_eq!(pick("E", &c), None, "no fifth choice");
        assert!(grade("B", &c, "The answer is B").0);
        let (pass, why) = grade("B", &c, "A) Lyon");
        assert!(!pass);
        assert_eq!(why, "chose A, not B");
    }

    #[test]
    fn the_reference_is_an_index_a_letter_or_a_text() {
        let c = choices();
        assert_eq!(resolve(&Value::from(1), &c), Ok(1));
        assert_eq!(resolve(&Value::from("C"), &c), Ok(2));
        assert_eq!(resolve(&Value::from("(d)"), &c), Ok(3));
        assert_eq!(resolve(&Value::from("paris"), &c), Ok(1));
        let error = resolve(&Value::from(4), &c).unwrap_err();
        assert!(error.contains("0 to 3 or A to D"), "{error}");
        assert!(ask("q?", &c[..1]).is_err());
        assert_eq!(
            ask("Capital?", &c[..2]).unwrap(),
            "Capital?\n\nA) Lyon\nB) Paris"
        );
    }
}
