//! Fitting kept runs into MCP messages. Clients drop a message over 16 MiB
//! (and tool results keep to [`MAX_TEXT_BYTES`] for the same reason), while
//! a run can hold several 8 MB answers. So a record's long texts are shown
//! cut, each cut saying where the whole text is; and a long text read on
//! its own comes in parts of at most [`MAX_TEXT_BYTES`], `?part=N`.

use serde_json::{Value, json};

use crate::text::cut_at_char_boundary;

/// The most text one message carries: a resource's text, a part of a long
/// text, a tool result's answer.
pub const MAX_TEXT_BYTES: usize = 4 << 20;

/// The bytes a record's replies share, at first; a record still too big
/// is cut again with less, down to none.
const REPLY_BUDGETS: [usize; 4] = [2 << 20, 256 << 10, 16 << 10, 0];

/// The most of a run's final answer its record shows.
const ANSWER_PREVIEW: usize = 1 << 20;

/// One part of a long text: bytes `start..end`, part `number` of `parts`.
#[derive(Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub text: &'a str,
    pub number: usize,
    pub parts: usize,
}

/// Part `number` (from 1) of `text`, cut into parts of at most `size`
/// bytes on character boundaries; `None` when there is no such part.
pub fn part(text: &str, number: usize, size: usize) -> Option<Part<'_>> {
    let size = size.max(4);
    let (mut start, mut parts, mut found) = (0, 0, None);
    while start < text.len() || parts == 0 {
        let piece = cut_at_char_boundary(&text[start..], size);
        parts += 1;
        if parts == number {
            found = Some(piece);
        }
        start += piece.len();
        if piece.is_empty() {
            break;
        }
    }
    found.map(|text| Part {
        text,
        number,
        parts,
    })
}

/// Cuts the string at `value[key]` to `max` bytes; a cut leaves
/// `{key}_cut` saying how long it is and where it is whole.
fn cut_field(value: &mut Value, key: &str, max: usize, whole_at: &str) {
    let Some(Value::String(text)) = value.get_mut(key) else {
        return;
    };
    if text.len() <= max {
        return;
    }
    let bytes = text.len();
    let shown = cut_at_char_boundary(text, max).len();
    text.truncate(shown);
    value[format!("{key}_cut")] = json!({
        "bytes": bytes,
        "shown": shown,
        "whole_at": whole_at,
    });
}

/// Cuts every string inside `value` longer than `max` bytes, marking each
/// cut in the text itself; returns how many it cut.
fn cut_strings(value: &mut Value, max: usize) -> usize {
    match value {
        Value::String(text) if text.len() > max => {
            let bytes = text.len();
            text.truncate(cut_at_char_boundary(text, max).len());
            text.push_str(&format!("[… cut: {bytes} bytes in all]"));
            1
        }
        Value::Array(items) => items.iter_mut().map(|v| cut_strings(v, max)).sum(),
        Value::Object(fields) => fields.values_mut().map(|v| cut_strings(v, max)).sum(),
        _ => 0,
    }
}

/// The JSON of `value`, pretty, if it fits one message.
fn fitting(value: &Value) -> Option<String> {
    serde_json::to_string_pretty(value)
        .ok()
        .filter(|text| text.len() <= MAX_TEXT_BYTES)
}

/// `value`'s JSON, if it fits one message as it is.
pub fn whole(value: &Value) -> Result<String, String> {
    fitting(value).ok_or_else(|| too_big(value, "listing"))
}

/// A run's record (as JSON) that fits one message: its answer and its
/// calls' replies cut as needed, each cut pointing at the whole text.
/// `run_uri` is the run's resource. `Err` says why even the most cut
/// record does not fit.
pub fn run(mut record: Value, run_uri: &str) -> Result<String, String> {
    cut_field(
        &mut record,
        "answer",
        ANSWER_PREVIEW,
        &format!("{run_uri}/answer"),
    );
    let calls = record
        .get("calls")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    for budget in REPLY_BUDGETS {
        let each = budget / calls.max(1);
        if let Some(Value::Array(calls)) = record.get_mut("calls") {
            for call in calls.iter_mut() {
                let id = call.get("id").and_then(Value::as_u64).unwrap_or_default();
                cut_field(call, "reply", each, &format!("{run_uri}/calls/{id}/reply"));
            }
        }
        if let Some(text) = fitting(&record) {
            return Ok(text);
        }
    }
    Err(too_big(&record, "run"))
}

/// One call's record that fits one message: its reply cut to a preview
/// (whole at `call_uri/reply`), and the strings of the request it sent cut
/// if they are what makes it too big.
pub fn call(mut record: Value, call_uri: &str) -> Result<String, String> {
    cut_field(
        &mut record,
        "reply",
        ANSWER_PREVIEW,
        &format!("{call_uri}/reply"),
    );
    if let Some(text) = fitting(&record) {
        return Ok(text);
    }
    for max in [256 << 10, 16 << 10, 1 << 10] {
        if let Some(request) = record.get_mut("request")
            && cut_strings(request, max) > 0
        {
            record["request_cut"] = json!(
                "long strings of the request are cut; `chorus runs export RUN` writes it whole"
            );
        }
        if let Some(text) = fitting(&record) {
            return Ok(text);
        }
    }
    Err(too_big(&record, "call"))
}

fn too_big(record: &Value, what: &str) -> String {
    let bytes = serde_json::to_string(record).map_or(0, |t| t.len());
    format!(
        "this {what}'s record is {bytes} bytes even with its answers cut (its prompt, plan or \
         details are that long), more than one MCP message carries ({MAX_TEXT_BYTES} bytes); \
         `chorus runs export RUN` writes it whole"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_text_on_character_boundaries() {
        let text = "aé".repeat(10); // 30 bytes, `é` is 2
        let mut whole = String::new();
        let mut number = 1;
        while let Some(p) = part(&text, number, 4) {
            assert!(p.text.len() <= 4);
            assert_eq!(p.number, number);
            whole.push_str(p.text);
            number += 1;
        }
        assert_eq!(whole, text);
        assert_eq!(part(&text, 1, 4).unwrap().parts, number - 1);
        assert!(part(&text, 0, 4).is_none());
        // A short text is one part; an empty text too.
        assert_eq!(part("short", 1, 100).unwrap().parts, 1);
        assert_eq!(part("", 1, 100).unwrap().text, "");
        assert!(part("short", 2, 100).is_none());
    }

    #[test]
    fn a_run_with_huge_replies_fits_and_says_where_each_is_whole() {
        let reply = "r".repeat(8 << 20);
        let calls: Vec<Value> = (0..5)
            .map(|id| json!({"id": id, "model": "m", "reply": reply}))
            .collect();
        let record = json!({"run_id": "R", "answer": "a".repeat(8 << 20), "calls": calls});
        let text = run(record, "chorus://runs/R").unwrap();
        assert!(text.len() <= MAX_TEXT_BYTES, "{}", text.len());
        let fitted: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(fitted["answer_cut"]["bytes"], 8 << 20);
        assert_eq!(fitted["answer_cut"]["whole_at"], "chorus://runs/R/answer");
        assert_eq!(
            fitted["calls"][3]["reply_cut"]["whole_at"],
            "chorus://runs/R/calls/3/reply"
        );
        assert!(!fitted["calls"][3]["reply"].as_str().unwrap().is_empty());
    }

    #[test]
    fn a_small_run_is_shown_whole() {
        let record = json!({"run_id": "R", "answer": "short", "calls": [{"id": 0, "reply": "hi"}]});
        let fitted: Value = serde_json::from_str(&run(record.clone(), "u").unwrap()).unwrap();
        assert_eq!(fitted, record);
    }

    #[test]
    fn a_call_whose_request_is_huge_is_cut_in_its_strings() {
        let record = json!({
            "id": 5,
            "reply": "é".repeat(1 << 20),
            "request": {"messages": [{"role": "user", "content": "x".repeat(40 << 20)}]},
        });
        let text = call(record, "chorus://runs/R/calls/5").unwrap();
        assert!(text.len() <= MAX_TEXT_BYTES);
        let fitted: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            fitted["reply_cut"]["whole_at"],
            "chorus://runs/R/calls/5/reply"
        );
        assert!(
            fitted["request"]["messages"][0]["content"]
                .as_str()
                .unwrap()
                .ends_with(&format!("[… cut: {} bytes in all]", 40 << 20))
        );
        assert!(fitted["request_cut"].is_string());
    }

    #[test]
    fn a_record_that_cannot_fit_says_why() {
        let record = json!({"run_id": "R", "details": {"blob": "d".repeat(MAX_TEXT_BYTES)}});
        let error = run(record, "u").unwrap_err();
        assert!(error.contains("chorus runs export"), "{error}");
    }
}
