//! Web sources across a run's answers (contract 0.4's `reply.citations`):
//! numbered as the host numbers the run's `sources` list — the answers'
//! citations in call order, the same URL once — so a merged answer's `[n]`
//! match the list the host puts at its end.

use crate::wit::types::Completion;

/// One numbered source.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub number: u32,
    pub url: String,
    pub title: Option<String>,
}

/// What a merge prompt tells the model when the answers cite sources.
pub const CITE: &str = "The answers cite web sources, numbered under each answer. Cite the sources \
you rely on with their numbers in brackets, like [1], exactly as numbered there; cite no others and \
do not list them at the end.";

/// The sources of `completions`' answers, numbered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Numbering {
    pub sources: Vec<Source>,
}

impl Numbering {
    /// Numbers the citations of `completions` in call-id order (calls
    /// without an id last), each URL once, compared as the host compares
    /// them: scheme and host in any case, no fragment, no `utm_*`
    /// parameters, no trailing `/`.
    pub fn of(completions: &[Completion]) -> Self {
        let mut ordered: Vec<&Completion> = completions.iter().collect();
        ordered.sort_by_key(|c| c.id.unwrap_or(u32::MAX));
        let mut sources: Vec<(String, Source)> = Vec::new();
        for c in ordered {
            let Ok(reply) = &c.outcome else { continue };
            for citation in &reply.citations {
                let key = normalised(&citation.url);
                match sources.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, source)) => {
                        if source.title.is_none() {
                            source.title.clone_from(&citation.title);
                        }
                    }
                    None => {
                        let number = sources.len() as u32 + 1;
                        sources.push((
                            key,
                            Source {
                                number,
                                url: citation.url.clone(),
                                title: citation.title.clone(),
                            },
                        ))
                    }
                }
            }
        }
        Self {
            sources: sources.into_iter().map(|(_, s)| s).collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The number `url` has, if any answer cited it.
    pub fn number_of(&self, url: &str) -> Option<u32> {
        let key = normalised(url);
        self.sources
            .iter()
            .find(|s| normalised(&s.url) == key)
            .map(|s| s.number)
    }

    /// What goes under `completion`'s answer in a merge prompt: the sources
    /// it cites with their numbers, or nothing when it cites none.
    pub fn under(&self, completion: &Completion) -> String {
        let Ok(reply) = &completion.outcome else {
            return String::new();
        };
        let mut numbers: Vec<u32> = Vec::new();
        for citation in &reply.citations {
            if let Some(n) = self.number_of(&citation.url)
                && !numbers.contains(&n)
            {
                numbers.push(n);
            }
        }
        if numbers.is_empty() {
            return String::new();
        }
        let mut text = String::from("\n\nSources this answer cites:");
        for n in numbers {
            let source = &self.sources[n as usize - 1];
            match &source.title {
                Some(title) => text.push_str(&format!("\n[{n}] {title} <{}>", source.url)),
                None => text.push_str(&format!("\n[{n}] <{}>", source.url)),
            }
        }
        text
    }

    /// `instructions`, with `CITE` after them when there are sources.
    pub fn instructions(&self, instructions: &str) -> String {
        if self.is_empty() {
            instructions.to_owned()
        } else {
            format!("{instructions}\n\n{CITE}")
        }
    }
}

/// A URL as the host compares it (see the module's docs).
pub fn normalised(url: &str) -> String {
    let (url, _) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = match url.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (url, None),
    };
    let rest = match rest.split_once("://") {
        Some((scheme, after)) => {
            let (host, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            format!(
                "{}://{}{}",
                scheme.to_ascii_lowercase(),
                host.to_ascii_lowercase(),
                if path.is_empty() { "/" } else { path }
            )
        }
        None => rest.to_owned(),
    };
    let kept: Vec<&str> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|pair| !pair.is_empty() && !pair.starts_with("utm_"))
        .collect();
    if kept.is_empty() {
        rest.strip_suffix('/').unwrap_or(&rest).to_owned()
    } else {
        format!("{rest}?{}", kept.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::types::{Citation, FormatSent, Reply};

    fn cited(id: u32, urls: &[(&str, Option<&str>)]) -> Completion {
        Completion {
            id: Some(id),
            label: "panel".into(),
            model: format!("m{id}"),
            latency_ms: 1,
            attempts: 1,
            outcome: Ok(Reply {
                content: "x".into(),
                served_by: format!("m{id}"),
                finish_reason: None,
                usage: None,
                format_sent: FormatSent::None,
                citations: urls
                    .iter()
                    .map(|(url, title)| Citation {
                        url: (*url).into(),
                        title: title.map(Into::into),
                        cited_text: None,
                        start_index: None,
                        end_index: None,
                    })
                    .collect(),
                tool_calls: Vec::new(),
            }),
        }
    }

    #[test]
    fn sources_are_numbered_in_call_order_each_url_once() {
        // Given out of call order: call 2 cites first in the run.
        let completions = [
            cited(
                3,
                &[
                    ("https://B.example/b?utm_source=x#top", None),
                    ("https://c.example/", Some("C")),
                ],
            ),
            cited(2, &[("https://b.example/b", Some("B"))]),
            cited(4, &[]),
        ];
        let numbering = Numbering::of(&completions);
        let numbered: Vec<(u32, &str)> = numbering
            .sources
            .iter()
            .map(|s| (s.number, s.url.as_str()))
            .collect();
        assert_eq!(
            numbered,
            [(1, "https://b.example/b"), (2, "https://c.example/")]
        );
        assert_eq!(
            numbering.under(&completions[0]),
            "\n\nSources this answer cites:\n[1] B <https://b.example/b>\n[2] C <https://c.example/>"
        );
        assert_eq!(numbering.under(&completions[2]), "");
        assert!(numbering.instructions("Merge.").ends_with(CITE));
        assert_eq!(
            Numbering::of(&[cited(1, &[])]).instructions("Merge."),
            "Merge."
        );
    }

    #[test]
    fn urls_compare_as_the_host_compares_them() {
        assert_eq!(normalised("HTTPS://Example.COM"), "https://example.com");
        assert_eq!(
            normalised("https://example.com/a/#x"),
            "https://example.com/a"
        );
        assert_eq!(
            normalised("https://example.com/a?utm_medium=m&q=1"),
            "https://example.com/a?q=1"
        );
    }
}
