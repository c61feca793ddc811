//! A run's web sources on its page: the numbered list the answer rests on
//! (each with the models that cited it), and under each panel member what
//! it cited and where. URLs come from model answers, so only `http` and
//! `https` ones become links, and those open nothing of ours
//! (`noopener noreferrer nofollow`); anything else is shown as text.

use maud::{Markup, html};

use crate::record::CallRecord;
use crate::record::sources::{Source, number_of};

/// Longest cited span shown under a member.
const CITED_CHARS: usize = 160;

/// The run's numbered sources, or nothing when it has none.
pub fn list(sources: &[Source]) -> Markup {
    if sources.is_empty() {
        return html! {};
    }
    html! {
        section id="sources" aria-labelledby="sources-title" {
            h2 id="sources-title" { "Sources" }
            ol class="sources" {
                @for source in sources {
                    li value=(source.number) {
                        (link(&source.url, source.title.as_deref()))
                        " " span class="muted" { "— cited by " (source.cited_by.join(", ")) }
                    }
                }
            }
        }
    }
}

/// What one call cited, each with its number in the run's list.
pub fn cited_by(call: &CallRecord, sources: &[Source]) -> Markup {
    if call.citations.is_empty() {
        return html! {};
    }
    html! {
        details class="cites" {
            summary { "Cites " (call.citations.len()) @if call.citations.len() == 1 { " source" } @else { " sources" } }
            ul {
                @for citation in &call.citations {
                    li {
                        @if let Some(n) = number_of(sources, &citation.url) {
                            "[" (n) "] "
                        }
                        (link(&citation.url, citation.title.as_deref()))
                        @if let Some(span) = citation.cited.as_deref().filter(|s| !s.trim().is_empty()) {
                            " " q { (crate::text::ellipsized(span, CITED_CHARS)) }
                        }
                    }
                }
            }
        }
    }
}

/// `url` as a link when it is a web address, as text otherwise.
fn link(url: &str, title: Option<&str>) -> Markup {
    let shown = title.filter(|t| !t.trim().is_empty()).unwrap_or(url);
    let web = url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
    html! {
        @if web {
            a href=(url) rel="noopener noreferrer nofollow" { (shown) }
        } @else {
            span { (shown) }
        }
        @if title.is_some() { " " span class="muted url" { (url) } }
    }
}
