//! A web-searched run's page: the answer without its closing list, the
//! numbered sources with the models that cited each, and under each panel
//! member what it cited and the words it cited them for. URLs are model
//! output: only web addresses are kept, and their links carry no referrer.

use serde_json::json;

use super::{run_id_of, viewer_config};
use crate::providers::web_search::script_citations;
use crate::support::http::{HttpServer, TOKEN, tool_call};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_searched_runs_page_lists_its_sources_and_what_each_member_cited() {
    let mock = Mock::start().await;
    script_citations(&mock);
    // m3 cites a URL that must not become a link.
    mock.script(
        "m3",
        [Step::Cited {
            text: "Beware.".to_owned(),
            annotations: json!([{"type": "url_citation",
                "url_citation": {"url": "javascript:alert(1)", "title": "Trap",
                                 "start_index": 0, "end_index": 6}}]),
        }],
    );
    let config = viewer_config(&mock);
    let server = HttpServer::start(&config.path, Some(TOKEN), &[]).await;
    let response = server
        .post(
            Some(TOKEN),
            &tool_call(1, "ask", "Which language, with sources?"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.text().await;
    let id = run_id_of(&server, "sources").await;
    let page = reqwest::Client::new()
        .get(format!("{}/runs/{id}", server.origin()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();

    let answer = between(&html, "id=\"final-answer\"", "</div>");
    // Copied whole (data-text), shown without the list it closes with.
    assert!(
        answer.contains("data-text=\"THE SYNTHESIS\n\nSources:"),
        "{answer}"
    );
    assert!(answer.contains("<p>THE SYNTHESIS</p>"), "{answer}");
    assert!(
        !answer.contains("<p>Sources:"),
        "the list is shown once: {answer}"
    );
    let sources = between(&html, "<section id=\"sources\"", "</section>");
    assert!(
        sources.contains(
            "<a href=\"https://a.example/rust?utm_source=openai\" rel=\"noopener noreferrer nofollow\">Rust</a>"
        ),
        "{sources}"
    );
    assert!(sources.contains("cited by m1, m2"), "{sources}");
    assert!(sources.contains("<li value=\"2\">"), "{sources}");
    assert!(
        sources.contains(">Go</a>") && sources.contains("cited by m2"),
        "{sources}"
    );

    // m2 cited both, each numbered as in the list, with the words cited.
    let m2 = between(&html, "data-model=\"m2\"", "</section>");
    assert!(m2.contains("Cites 2 sources"), "{m2}");
    assert!(m2.contains("[1] ") && m2.contains("[2] "), "{m2}");
    assert!(m2.contains("<q>Go</q>"), "{m2}");
    // A citation that is not a web address was never kept.
    let m3 = between(&html, "data-model=\"m3\"", "</section>");
    assert!(m3.contains("Beware.") && !m3.contains("Cites"), "{m3}");
    assert!(!html.contains("javascript:"), "{html}");
}

/// The text of `html` from `start` to the first `end` after it.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {html}"));
    let rest = &html[from..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}
