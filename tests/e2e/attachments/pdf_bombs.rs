//! A PDF bomb cannot take the server down: a 31 KB file whose object
//! stream decodes to 16 M objects (1.8 GB parsed in-process) is parsed in
//! a child held to 256 MB, so the run still answers, says why the PDF was
//! not read, and the server's own memory stays small; the next run reads
//! an ordinary PDF as before.

use lopdf::{Stream, dictionary};
use serde_json::json;

use crate::attachments::pdf_text::pdf;
use crate::attachments::sent::{b64, catalog, config, script};
use crate::support::*;

/// A valid one-page PDF, 31 KB, whose only object stream holds the
/// catalog and an array of `zeros` zeros: 2 bytes each once inflated (in
/// the 32 MiB a stream may inflate to), and one parsed object each. Its
/// cross-reference stream puts the catalog in that object stream, so
/// counting the pages parses it too.
fn bomb(zeros: usize) -> Vec<u8> {
    let root = b"<< /Type /Catalog /Pages 3 0 R >>\n";
    let mut members = format!("2 0 5 {} ", root.len()).into_bytes();
    let first = members.len();
    members.extend(root);
    members.push(b'[');
    members.extend(b"0 ".repeat(zeros));
    members.push(b']');
    let mut objects = Stream::new(dictionary! {}, members);
    objects.compress().unwrap();

    let mut out = b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut at = [0usize; 7];
    at[3] = out.len();
    out.extend(b"3 0 obj\n<< /Type /Pages /Kids [4 0 R] /Count 1 >>\nendobj\n");
    at[4] = out.len();
    out.extend(b"4 0 obj\n<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] >>\nendobj\n");
    at[1] = out.len();
    out.extend(
        format!(
            "1 0 obj\n<< /Type /ObjStm /N 2 /First {first} /Filter /FlateDecode /Length {} >>\nstream\n",
            objects.content.len()
        )
        .as_bytes(),
    );
    out.extend(&objects.content);
    out.extend(b"\nendstream\nendobj\n");
    at[6] = out.len();
    // Type, then 4 bytes of offset (or object stream), 2 of generation (or index).
    let entry = |kind: u8, field: usize, index: u16| {
        let mut e = vec![kind];
        e.extend((field as u32).to_be_bytes());
        e.extend(index.to_be_bytes());
        e
    };
    let xref: Vec<u8> = [
        entry(0, 0, 65535),
        entry(1, at[1], 0),
        entry(2, 1, 0),
        entry(1, at[3], 0),
        entry(1, at[4], 0),
        entry(2, 1, 1),
        entry(1, at[6], 0),
    ]
    .concat();
    out.extend(
        format!(
            "6 0 obj\n<< /Type /XRef /Size 7 /W [1 4 2] /Root 2 0 R /Length {} >>\nstream\n",
            xref.len()
        )
        .as_bytes(),
    );
    out.extend(&xref);
    out.extend(format!("\nendstream\nendobj\nstartxref\n{}\n%%EOF\n", at[6]).as_bytes());
    out
}

/// The most memory `pid` has held at once, in MiB (Linux).
fn peak_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib >> 10)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pdf_bomb_is_not_read_and_the_server_keeps_its_memory_and_serving() {
    let bytes = bomb(16_000_000);
    assert!(bytes.len() < 64 << 10, "{} bytes", bytes.len());
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let server = Server::start(&config(&mock, "", "")).await;

    let result = server
        .call(
            "ask",
            json!({"prompt": "Who pays?", "attachments": [
                {"data": b64(&bytes), "name": "bomb.pdf"}
            ]}),
        )
        .await;
    if let Some(peak) = peak_mib(server.pid()) {
        assert!(peak < 400, "the server's peak memory: {peak} MiB");
    }
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let record = structured(&result);
    assert!(
        record["attachments"][0].get("pages").is_none(),
        "{record:#}"
    );
    let notes = record["notes"].to_string();
    assert!(
        notes.contains("Attachment #1 bomb.pdf")
            && notes.contains("no text extracted, since it could not be read")
            && notes.contains("256 MB"),
        "{notes}"
    );

    // Its turns were given back: an ordinary PDF is counted and read.
    let result = server
        .call(
            "ask",
            json!({"prompt": "Who pays?", "attachments": [
                {"data": b64(&pdf(&[&["Clause 1: the tenant pays rent."]])), "name": "lease.pdf"}
            ]}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let record = structured(&result);
    assert_eq!(record["attachments"][0]["pages"], 1, "{record:#}");
    let notes = record["notes"].to_string();
    assert!(
        notes.contains("Attachment #1 lease.pdf") && notes.contains("its text layer was extracted"),
        "{notes}"
    );
}
