//! The `url_citation` annotations of an answer (`message.annotations`, or
//! a stream's `delta.annotations`), read leniently: an annotation of an
//! odd shape is skipped, never a reason to fail the answer it came with.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::llm::Citation;
use crate::text::ellipsized;

/// Most citations kept of one answer.
pub const MAX_CITATIONS: usize = 256;
/// Longest URL kept (longer ones are skipped: nobody can follow them).
const MAX_URL_CHARS: usize = 2048;
const MAX_TITLE_CHARS: usize = 300;
const MAX_CITED_CHARS: usize = 500;

/// The citations among an `annotations` field of any shape.
#[derive(Debug, Default)]
pub struct Annotations(pub Vec<Citation>);

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Any JSON is accepted here; what is not a citation is dropped.
        let value = Value::deserialize(deserializer)?;
        let list = match value {
            Value::Array(list) => list,
            one @ Value::Object(_) => vec![one],
            _ => Vec::new(),
        };
        Ok(Self(
            list.iter()
                .filter_map(citation)
                .take(MAX_CITATIONS)
                .collect(),
        ))
    }
}

/// One annotation as a citation: OpenAI's and OpenRouter's
/// `{"type": "url_citation", "url_citation": {url, title, start_index,
/// end_index}}`, or the same fields flat on the annotation. Only http(s)
/// URLs are kept: they end up as links in the answer.
fn citation(annotation: &Value) -> Option<Citation> {
    let kind = annotation.get("type").and_then(Value::as_str);
    if kind.is_some_and(|k| k != "url_citation") {
        return None;
    }
    let fields = match annotation.get("url_citation") {
        Some(inner @ Value::Object(_)) => inner,
        _ => annotation,
    };
    let url = fields.get("url").and_then(Value::as_str)?.trim();
    let scheme_ok = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        || url
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    if !scheme_ok || url.chars().count() > MAX_URL_CHARS || url.chars().any(char::is_whitespace) {
        return None;
    }
    let title = fields
        .get("title")
        .and_then(Value::as_str)
        .map(|t| ellipsized(t.trim(), MAX_TITLE_CHARS))
        .filter(|t| !t.is_empty());
    Some(Citation {
        url: url.to_owned(),
        title,
        cited: None,
        start_index: index(fields.get("start_index")),
        end_index: index(fields.get("end_index")),
    })
}

/// An index given as a non-negative integer, float or numeric string.
fn index(value: Option<&Value>) -> Option<u32> {
    let n = match value? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (n.is_finite() && n >= 0.0 && n <= f64::from(u32::MAX)).then_some(n as u32)
}

/// Fills each citation's `cited` span from the answer's text (indices in
/// characters, as OpenAI counts them); a span out of range is left out.
pub fn with_spans(mut citations: Vec<Citation>, answer: &str) -> Vec<Citation> {
    for c in &mut citations {
        let (Some(start), Some(end)) = (c.start_index, c.end_index) else {
            continue;
        };
        if end <= start {
            continue;
        }
        let span: String = answer
            .chars()
            .skip(start as usize)
            .take((end - start) as usize)
            .collect();
        if span.chars().count() == (end - start) as usize && !span.trim().is_empty() {
            c.cited = Some(ellipsized(span.trim(), MAX_CITED_CHARS));
        }
    }
    citations
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: Value) -> Vec<Citation> {
        serde_json::from_value::<Annotations>(value).unwrap().0
    }

    #[test]
    fn the_openai_shape_is_read_with_its_span() {
        let got = read(json!([{
            "type": "url_citation",
            "url_citation": {"url": "https://a.example/x", "title": " A ", "content": "...",
                              "start_index": 4, "end_index": 9}
        }]));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].title.as_deref(), Some("A"));
        let got = with_spans(got, "see héllo world");
        assert_eq!(got[0].cited.as_deref(), Some("héllo"));
    }

    #[test]
    fn odd_annotations_are_skipped_or_read_leniently_never_an_error() {
        let got = read(json!([
            {"type": "url_citation", "url": "http://flat.example", "start_index": "2", "end_index": 3.0},
            {"type": "file_citation", "url_citation": {"url": "https://no.example"}},
            {"type": "url_citation", "url_citation": {"url": "javascript:alert(1)"}},
            {"type": "url_citation", "url_citation": {"url": 7}},
            {"type": "url_citation", "url_citation": "https://string.example"},
            {"url_citation": {"url": "https://untyped.example", "title": 5, "start_index": -1}},
            "https://bare.example",
            null,
            []
        ]));
        let urls: Vec<&str> = got.iter().map(|c| c.url.as_str()).collect();
        assert_eq!(urls, ["http://flat.example", "https://untyped.example"]);
        assert_eq!((got[0].start_index, got[0].end_index), (Some(2), Some(3)));
        assert_eq!((got[1].title.clone(), got[1].start_index), (None, None));
        assert!(read(json!("nope")).is_empty());
        assert!(read(json!(null)).is_empty());
        assert_eq!(
            read(json!({"type": "url_citation", "url_citation": {"url": "https://one.example"}}))
                .len(),
            1
        );
        // A span out of range, or backwards, is left out.
        let spans = with_spans(
            read(
                json!([{"url": "https://s.example", "start_index": 3, "end_index": 99},
                        {"url": "https://t.example", "start_index": 3, "end_index": 1}]),
            ),
            "short",
        );
        assert!(spans.iter().all(|c| c.cited.is_none()));
    }
}
