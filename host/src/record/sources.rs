//! A run's web sources: the `url_citation`s of all its calls merged into
//! one numbered list, de-duplicated by normalised URL, each saying which
//! models cited it — and the same list as markdown links for the end of
//! the text answer.

use serde::{Deserialize, Serialize};
use url::Url;

use super::CallRecord;

/// One source of a run's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Its number in the list, from 1.
    pub number: u32,
    /// The URL as first cited.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The models that cited it, in call order.
    pub cited_by: Vec<String>,
    /// The calls (ids) whose answers cite it.
    pub calls: Vec<u32>,
}

/// Most sources a run keeps.
const MAX_SOURCES: usize = 100;

/// The run's sources from its calls' citations, numbered in the order
/// first cited.
pub fn merged<'a>(calls: impl IntoIterator<Item = &'a CallRecord>) -> Vec<Source> {
    let mut sources: Vec<(String, Source)> = Vec::new();
    let mut ordered: Vec<&CallRecord> = calls.into_iter().collect();
    ordered.sort_by_key(|c| c.id);
    for call in ordered {
        for citation in &call.citations {
            let key = normalised(&citation.url);
            let at = match sources.iter().position(|(k, _)| *k == key) {
                Some(at) => at,
                None if sources.len() < MAX_SOURCES => {
                    sources.push((
                        key,
                        Source {
                            number: 0,
                            url: citation.url.clone(),
                            title: None,
                            cited_by: Vec::new(),
                            calls: Vec::new(),
                        },
                    ));
                    sources.len() - 1
                }
                None => continue,
            };
            let source = &mut sources[at].1;
            if source.title.is_none() {
                source.title.clone_from(&citation.title);
            }
            if !source.cited_by.contains(&call.model) {
                source.cited_by.push(call.model.clone());
            }
            if !source.calls.contains(&call.id) {
                source.calls.push(call.id);
            }
        }
    }
    sources
        .into_iter()
        .zip(1..)
        .map(|((_, source), number)| Source { number, ..source })
        .collect()
}

/// The number `url` has among `sources`, compared as `merged` merges.
pub fn number_of(sources: &[Source], url: &str) -> Option<u32> {
    let key = normalised(url);
    sources
        .iter()
        .find(|s| normalised(&s.url) == key)
        .map(|s| s.number)
}

/// A URL as compared: scheme and host in lowercase (the `url` crate does
/// that), no fragment, no `utm_*` tracking parameters, no trailing `/`.
fn normalised(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return url.to_owned();
    };
    parsed.set_fragment(None);
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| !k.starts_with("utm_"))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    let text = parsed.to_string();
    match text.strip_suffix('/') {
        Some(trimmed) if parsed.query().is_none() => trimmed.to_owned(),
        _ => text,
    }
}

/// The sources as the end of a text answer:
/// `Sources:\n1. [title](url) — model-a, model-b`.
pub fn markdown(sources: &[Source]) -> String {
    let mut text = String::from("Sources:");
    for source in sources {
        let title = source.title.as_deref().unwrap_or(&source.url);
        let title: String = title
            .chars()
            .flat_map(|c| match c {
                '[' | ']' | '\\' => vec!['\\', c],
                '\n' | '\r' => vec![' '],
                c => vec![c],
            })
            .collect();
        let target = source.url.replace('(', "%28").replace(')', "%29");
        text.push_str(&format!(
            "\n{}. [{title}]({target}) — {}",
            source.number,
            source.cited_by.join(", ")
        ));
    }
    text
}

/// `answer` without the list `markdown` closed it with, for a view that
/// shows `sources` on their own; `answer` itself when it does not end so.
pub fn without_list<'a>(answer: &'a str, sources: &[Source]) -> &'a str {
    if sources.is_empty() {
        return answer;
    }
    answer
        .strip_suffix(markdown(sources).as_str())
        .map_or(answer, str::trim_end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Citation;

    fn call(id: u32, model: &str, urls: &[(&str, Option<&str>)]) -> CallRecord {
        CallRecord {
            id,
            model: model.to_owned(),
            citations: urls
                .iter()
                .map(|(url, title)| Citation {
                    url: (*url).to_owned(),
                    title: title.map(str::to_owned),
                    ..Citation::default()
                })
                .collect(),
            stage: "fan-out".into(),
            label: "panel".into(),
            status: "ok".into(),
            latency_ms: 1,
            attempts: 1,
            queued_ms: None,
            ttft_ms: None,
            prompt_tokens: None,
            completion_tokens: None,
            reasoning_tokens: None,
            cached_tokens: None,
            cache_write_tokens: None,
            cost_usd: None,
            cost_estimated: false,
            tokens_estimated: false,
            error: None,
            reply: None,
            reused_from: None,
            cached_from: None,
            format_sent: None,
            fallback_from: Vec::new(),
        }
    }

    #[test]
    fn citations_merge_by_normalised_url_numbered_in_order_with_their_models() {
        let calls = [
            call(
                1,
                "b",
                &[
                    ("https://Example.com/x/?utm_source=openai#top", None),
                    ("https://two.example/(a)", Some("Two [2]")),
                ],
            ),
            call(0, "a", &[("https://example.com/x", Some("X"))]),
            call(2, "c", &[("https://example.com/x/", None)]),
        ];
        let sources = merged(&calls);
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[0].url, "https://example.com/x");
        assert_eq!(sources[0].cited_by, ["a", "b", "c"]);
        assert_eq!(sources[0].calls, [0, 1, 2]);
        assert_eq!(sources[1].number, 2);
        assert_eq!(number_of(&sources, "https://EXAMPLE.com/x/#y"), Some(1));
        assert_eq!(number_of(&sources, "https://example.com/y"), None);
        assert_eq!(
            markdown(&sources),
            "Sources:\n1. [X](https://example.com/x) — a, b, c\n\
             2. [Two \\[2\\]](https://two.example/%28a%29) — b"
        );
    }

    #[test]
    fn the_list_comes_off_the_answer_it_closes_and_nothing_else() {
        let calls = [call(0, "a", &[("https://example.com/x", Some("X"))])];
        let sources = merged(&calls);
        let answer = format!("The answer.\n\n{}", markdown(&sources));
        assert_eq!(without_list(&answer, &sources), "The answer.");
        assert_eq!(without_list("Edited answer.", &sources), "Edited answer.");
        assert_eq!(without_list(&answer, &[]), answer);
    }
}
