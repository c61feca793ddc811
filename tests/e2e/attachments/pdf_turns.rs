//! One client's slow PDFs do not keep another client's PDF waiting: of
//! the server's two parser turns a client holds one at a time, so while
//! Alice's two runs of slow PDFs are read one after the other, Bob's
//! small PDF takes the other turn and his run answers before Alice's
//! first parse ends. Watched through the server's parser processes
//! (Linux's `/proc`), never through how long anything took.

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};
use serde_json::{Value, json};

use crate::attachments::pdf_text::pdf;
use crate::attachments::sent::{b64, catalog, config, script};
use crate::support::http::HttpServer;
use crate::support::*;
use crate::web::teams::{ALICE, BOB, call, client, rpc_at};

/// A PDF whose text takes a parser its whole time to read: `pages`
/// pages, each a content stream of `ops` save-and-restore pairs
/// (compressed to almost nothing) before one line of text.
fn slow(pages: usize, ops: usize) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier",
    });
    let mut operations = Vec::with_capacity(2 * ops + 5);
    for _ in 0..ops {
        operations.push(Operation::new("q", vec![]));
        operations.push(Operation::new("Q", vec![]));
    }
    operations.extend([
        Operation::new("BT", vec![]),
        Operation::new("Tf", vec!["F1".into(), 12.into()]),
        Operation::new("Td", vec![72.into(), 700.into()]),
        Operation::new("Tj", vec![Object::string_literal("Slow to read.")]),
        Operation::new("ET", vec![]),
    ]);
    let mut content = Stream::new(dictionary! {}, Content { operations }.encode().unwrap());
    content.compress().unwrap();
    let content = doc.add_object(content);
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            doc.add_object(dictionary! {
                "Type" => "Page", "Parent" => pages_id, "Contents" => content,
                "Resources" => dictionary! { "Font" => dictionary! { "F1" => font } },
                "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            })
            .into()
        })
        .collect();
    doc.objects.insert(
        pages_id,
        Object::Dictionary(
            dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => pages as i64 },
        ),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// The `chorus __pdf text` children of `server` running now.
fn text_parsers(server: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: the name may hold spaces.
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            parent == Some(server) && cmdline.windows(10).any(|w| w == b"__pdf\0text")
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn asking(pdf: &[u8], name: &str) -> Value {
    json!({"prompt": "Who pays?", "attachments": [{"data": b64(pdf), "name": name}]})
}

#[tokio::test(flavor = "multi_thread")]
async fn one_clients_slow_pdfs_do_not_keep_another_clients_pdf_waiting() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let mock = Mock::start().await;
    catalog(&mock);
    script(&mock);
    let clients = [client("alice", ALICE, ""), client("bob", BOB, "")].concat();
    let config = write_config(&config(&mock, "", &clients));
    let server = HttpServer::start(&config.path, None, &[]).await;
    let pid = server.child.id().unwrap();

    let slow = slow(300, 100_000);
    let alices: Vec<_> = (0..2)
        .map(|id| {
            let (url, arguments) = (server.url.clone(), asking(&slow, "slow.pdf"));
            tokio::spawn(async move {
                let call = json!({"jsonrpc": "2.0", "id": 900 + id, "method": "tools/call",
                                  "params": {"name": "ask", "arguments": arguments}});
                rpc_at(&url, ALICE, call).await
            })
        })
        .collect();
    // Alice's parses start; her second run is given two seconds more to
    // take a second turn, which it must not get.
    let mut seen = std::collections::BTreeSet::new();
    let mut most = 0;
    let started = tokio::time::Instant::now();
    let mut first = None;
    while first
        .is_none_or(|at| at + std::time::Duration::from_secs(2) > tokio::time::Instant::now())
    {
        let now = text_parsers(pid);
        most = most.max(now.len());
        seen.extend(now.iter().copied());
        if first.is_none() && !now.is_empty() {
            first = Some(tokio::time::Instant::now());
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "alice's PDFs were never parsed:\n{}",
            server.stderr()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(most, 1, "alice held {most} parser turns at once");
    assert!(
        seen.iter().all(|&p| alive(p)),
        "alice's first parse is still running"
    );

    let asked = std::time::Instant::now();
    let bobs = call(
        &server,
        BOB,
        "ask",
        asking(&pdf(&[&["Clause 1: the tenant pays rent."]]), "lease.pdf"),
    )
    .await;
    let record = &bobs["result"]["structuredContent"];
    assert_eq!(record["attachments"][0]["pages"], 1, "{bobs:#}");
    assert!(
        record["notes"]
            .to_string()
            .contains("its text layer was extracted"),
        "{bobs:#}"
    );
    eprintln!("bob's run took {:?}", asked.elapsed());
    // Bob's PDF was counted and read while Alice's first was still being
    // read: he never waited for her turns to end.
    assert!(
        seen.iter().all(|&p| alive(p)),
        "bob's run waited for alice's parse to end"
    );
    assert!(alices.iter().all(|run| !run.is_finished()));
    for run in alices {
        run.abort();
    }
}
