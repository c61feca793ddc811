//! A PDF with a text layer reaches the models that cannot take files as
//! its text, extracted by chorus, in the exact body each received —
//! faithful and free, so no describer is paid for it; a scan (no text
//! layer) falls back to the describer, and an over-long text is cut, each
//! said in the notes.

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use serde_json::json;

use crate::attachments::sent::{BLIND, EYE, MERGER, SEES, b64, catalog, config, last_user, script};
use crate::support::*;

/// A PDF of one page per entry, each showing its lines in Courier (a page
/// of no lines has only a drawn box, as a scan has no text).
pub fn pdf(pages: &[&[&str]]) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier",
    });
    let mut kids = Vec::new();
    for lines in pages {
        let mut ops = vec![
            Operation::new("re", vec![0.into(), 0.into(), 100.into(), 100.into()]),
            Operation::new("f", vec![]),
        ];
        for (i, line) in lines.iter().enumerate() {
            ops.push(Operation::new("BT", vec![]));
            ops.push(Operation::new("Tf", vec!["F1".into(), 12.into()]));
            ops.push(Operation::new(
                "Td",
                vec![72.into(), (700 - i as i64).into()],
            ));
            ops.push(Operation::new("Tj", vec![Object::string_literal(*line)]));
            ops.push(Operation::new("ET", vec![]));
        }
        let content = Content { operations: ops }.encode().unwrap();
        let contents = doc.add_object(Stream::new(dictionary! {}, content));
        let page = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => contents,
            "Resources" => dictionary! { "Font" => dictionary! { "F1" => font } },
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        });
        kids.push(page.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// The size as attachment labels show it (`text::show_bytes`).
fn show_size(n: usize) -> String {
    if n >= 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} bytes")
    }
}

async fn ask(mock: &Mock, bytes: &[u8]) -> serde_json::Value {
    let server = Server::start(&config(mock, "", "")).await;
    let result = server
        .call(
            "ask",
            json!({"prompt": "Who pays?", "attachments": [
                {"data": b64(bytes), "name": "lease.pdf"}
            ]}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    structured(&result).clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pdf_with_a_text_layer_reaches_text_models_as_its_extracted_text() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let bytes = pdf(&[
        &["Clause 1: the tenant pays rent."],
        &["Clause 2: the landlord fixes the roof."],
    ]);
    let record = ask(&mock, &bytes).await;

    let expected = format!(
        "Who pays?\n\n--- Attachment #1 lease.pdf (application/pdf, {}): you cannot take the file; the text extracted from its text layer stands in for it (figures and images are not in it) ---\nClause 1: the tenant pays rent.\nClause 2: the landlord fixes the roof.\n--- end of the extracted text of attachment #1 ---",
        show_size(bytes.len())
    );
    for model in [BLIND, SEES] {
        let got = mock.requests_for(model);
        let said = last_user(&got[0].body);
        assert_eq!(said, &json!(expected), "{model}");
        assert!(!got[0].body.to_string().contains("\"file\""), "{model}");
    }
    // The merger, which cannot take files either, read it too.
    let merger = mock.requests_for(MERGER);
    let said = last_user(&merger[0].body).as_str().unwrap();
    assert!(
        said.contains("the text extracted from its text layer stands in for it")
            && said.contains("Clause 2: the landlord fixes the roof."),
        "{said}"
    );
    assert!(
        mock.requests_for(EYE).is_empty(),
        "no describer is paid for a text layer"
    );
    assert!(calls(&record, "describe").is_empty(), "{record:#}");
    let notes = record["notes"].to_string();
    assert!(
        notes.contains("Attachment #1 lease.pdf (application/pdf")
            && notes.contains("its text layer was extracted (2 pages")
            && notes.contains("marked as extracted text"),
        "{notes}"
    );
    assert!(
        notes.contains(&format!("marked as extracted text: {SEES}, {BLIND}.")),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scan_falls_back_to_the_describer_and_a_long_text_is_cut() {
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let record = ask(&mock, &pdf(&[&[], &[]])).await;
    let eye = mock.requests_for(EYE);
    assert_eq!(eye.len(), 1, "the scan is described");
    assert_eq!(last_user(&eye[0].body)[1]["type"], "file");
    let said = last_user(&mock.requests_for(BLIND)[0].body).to_string();
    assert!(
        said.contains(&format!("this description by {EYE} stands in for it")),
        "{said}"
    );
    let notes = record["notes"].to_string();
    assert!(
        notes.contains("no text extracted, since it has no text layer")
            && notes.contains(&format!("{EYE} described the attachments")),
        "{notes}"
    );

    // 120 000 characters of text: the models get the first 100 000.
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let line = "x".repeat(99) + ".";
    let lines: Vec<&str> = vec![line.as_str(); 1200];
    let record = ask(&mock, &pdf(&[&lines])).await;
    assert!(mock.requests_for(EYE).is_empty());
    let said = last_user(&mock.requests_for(BLIND)[0].body)
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        said.contains("[cut: text kept to 100000 characters; pages 1–1 of 1]"),
        "{}",
        &said[said.len() - 300..]
    );
    assert!(said.len() < 101_000 + 500, "{}", said.len());
    let notes = record["notes"].to_string();
    assert!(
        notes.contains("cut: text kept to 100000 characters"),
        "{notes}"
    );
}
