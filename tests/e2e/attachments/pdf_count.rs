//! A PDF costs its pages, not the pages it says it has: a 300-page file
//! whose page tree's root declares `/Count 1` is counted as 300 pages
//! when the run starts, so a `max_cost_usd` that refuses the honest file
//! sending it to a file-reading model refuses the lying one too.

use lopdf::{Document, Object};
use serde_json::json;

use crate::attachments::pdf_text::pdf;
use crate::attachments::sent::b64;
use crate::providers::money::reading as config;
use crate::support::*;

/// The file-reading model of `providers::money::reading`.
const READER: &str = "f/reader";

/// `bytes` with its page tree's root declaring `count` pages, the pages
/// themselves as they were.
fn declaring(bytes: &[u8], count: i64) -> Vec<u8> {
    let mut doc = Document::load_mem(bytes).unwrap();
    let root = doc
        .catalog()
        .unwrap()
        .get(b"Pages")
        .and_then(Object::as_reference)
        .unwrap();
    doc.get_dictionary_mut(root).unwrap().set("Count", count);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pdf_declaring_fewer_pages_than_it_has_costs_the_pages_it_has() {
    let line: &[&str] = &["Clause: the tenant pays the rent."];
    let honest = pdf(&vec![line; 300]);
    let lying = declaring(&honest, 1);
    assert_eq!(
        Document::load_metadata_mem(&lying).unwrap().page_count,
        1,
        "the file declares one page"
    );
    for (name, bytes) in [("honest.pdf", &honest), ("lying.pdf", &lying)] {
        let mock = Mock::start().await;
        for model in [READER, "t/free", "t/merger"] {
            mock.script(model, [Step::answer("the tenant")]);
        }
        let server = Server::start(&config(&mock)).await;
        let result = server
            .call(
                "ask",
                json!({"prompt": "Who pays?", "attachments": [
                    {"data": b64(bytes), "name": name}
                ]}),
            )
            .await;
        assert_eq!(result.is_error, Some(false), "{name}: {}", text(&result));
        let record = structured(&result);
        assert_eq!(record["attachments"][0]["pages"], 300, "{name}: {record:#}");
        let reader = calls(record, "fan-out")
            .into_iter()
            .find(|c| c["model"] == READER)
            .unwrap_or_else(|| panic!("{name}: {record:#}"));
        // 300 pages: ~900,000 tokens at $3/M, over the ceiling however
        // few pages the file says it has.
        assert_eq!(reader["status"], "skipped", "{name}: {record:#}");
        assert_eq!(reader["error"]["kind"], "over-budget", "{name}");
        let why = reader["error"]["message"].as_str().unwrap();
        assert!(why.contains("over max_cost_usd = $0.05"), "{name}: {why}");
        assert!(
            mock.requests_for(READER).is_empty(),
            "{name}: a skipped call is never sent"
        );
        // The text model read the extracted text: the same 300 pages.
        let notes = record["notes"].to_string();
        assert!(
            notes.contains("its text layer was extracted (300 pages"),
            "{name}: {notes}"
        );
    }
}
