//! A PDF's text layer, for models that cannot take the file: where a PDF
//! has one, its text is faithful and free, so a text-only model reads it
//! rather than a describer's transcription (see `pipeline::describe`);
//! and its page count, from the leaves of its page tree (`pages`, for
//! `attach::shape`, whose estimate of what the file costs a model rests
//! on it: the `/Count` a file declares is not believed below its
//! leaves). Everything here is bounded, per PDF and whatever its shape:
//! every parse runs in a child process (`worker`: 256 MB of address
//! space and 15 s of CPU on unix, killed at its wall time everywhere),
//! two at a time and one at a time per client, each run's parses within
//! a budget of parse time (`turns`), each turn held until its child is
//! gone; within that, the pages read, the characters kept (cut with
//! `text`), the size any one stream may inflate to, and the page tree
//! walked no further than `MAX_PAGES` kids and `MAX_DEPTH` levels.
//! `page_count` and `extract_bytes` are the parses themselves, which the
//! child runs. A PDF that does not parse, is encrypted, has no text layer
//! or needs more than its bounds gives the reason instead, for the caller
//! to fall back on a description.

mod turns;
pub mod worker;

use std::time::{Duration, Instant};

use lopdf::{Dictionary, Document, Object, ObjectId};
use serde::{Deserialize, Serialize};

use crate::text::{cut_at_chars, ellipsized, show_bytes};
pub use turns::{RUN_TIME, for_client};
pub use worker::use_worker;
use worker::{Failure, Job, Reply};

/// How far one extraction may go.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Pages read, from the first.
    pub pages: u32,
    /// Characters kept, in all.
    pub chars: usize,
    /// Bytes any one stream may decompress to (a small file cannot inflate
    /// to gigabytes).
    pub stream_bytes: usize,
    /// Wall time for the whole extraction.
    pub time: Duration,
}

impl Bounds {
    /// What every run uses: about 25k tokens of text at most.
    pub const DEFAULT: Self = Self {
        pages: 300,
        chars: 100_000,
        stream_bytes: 32 << 20,
        time: Duration::from_secs(15),
    };
}

/// The most kids of a page tree its walk visits. Past it the document
/// counts as this many pages: more than any real document has, and
/// enough to refuse it under any cost ceiling, where a smaller guess
/// would let a tree built to be long (or, shared, exponentially wide)
/// pass for short.
pub const MAX_PAGES: u32 = 100_000;

/// The deepest a page tree is walked: lopdf's own page iterator, which
/// the text extraction uses, stops there too. Deeper counts as cut.
pub const MAX_DEPTH: usize = 256;

/// Fewer visible characters a page than this is no text layer (a scan's
/// stray page number does not make one).
const MIN_CHARS_PER_PAGE: usize = 8;

/// The text of a PDF, and how much of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Text {
    pub text: String,
    /// Pages in the document.
    pub pages: u32,
    /// Pages whose text is in `text`.
    pub pages_read: u32,
    /// Why `text` is not all of it, when it is not.
    pub cut: Option<String>,
}

impl Text {
    /// `12 pages, 31.2 KiB of text` / `pages 1–300 of 412, cut: …`.
    pub fn summary(&self) -> String {
        let size = show_bytes(self.text.len() as u64);
        match &self.cut {
            None => format!("{} pages, {size} of text", self.pages),
            Some(why) => format!(
                "pages 1–{} of {}, {size} of text, cut: {why}",
                self.pages_read, self.pages
            ),
        }
    }
}

/// The text layer of the PDF whose bytes are `base64`, read in a child
/// process within `bounds` (its time cut to what the run has left of
/// `RUN_TIME`); `Err` says why there is none.
pub async fn extract(base64: std::sync::Arc<str>, bounds: Bounds) -> Result<Text, String> {
    let turn = turns::take().await?;
    let bounds = Bounds {
        time: turn.time(bounds.time),
        ..bounds
    };
    // A little past the deadline: the child checks it between pages and
    // answers with what it has; one page may take a moment. Beyond that
    // it is killed.
    let deadline = tokio::time::Instant::now() + bounds.time + Duration::from_secs(1);
    let job = Job::text(bounds);
    match worker::in_child(worker::registered(), turn, base64, job, deadline).await {
        Ok(Reply::Text(result)) => result,
        Ok(Reply::Pages(_)) => Err(Failure::Garbage.to_string()),
        Err(Failure::TooLong) => Err(format!(
            "reading it took longer than {}s",
            bounds.time.as_secs_f64().ceil()
        )),
        Err(why) => {
            if !matches!(why, Failure::Base64(_) | Failure::Stopped) {
                tracing::warn!(reason = %why, "a PDF's text was not extracted");
            }
            Err(why.to_string())
        }
    }
}

/// The pages of the PDF whose bytes are `base64` (`page_count`), in a
/// child process as `extract` is, taking its turn with extractions and
/// given up on after `bounds.time` (waiting included) or what the run
/// has left of `RUN_TIME`. `None` when it cannot be read (damaged beyond
/// repair, encrypted with a password, no pages, more than the child's
/// bounds).
pub async fn pages(base64: std::sync::Arc<str>, bounds: Bounds) -> Option<u32> {
    let deadline = tokio::time::Instant::now() + bounds.time;
    let turn = tokio::time::timeout_at(deadline, turns::take())
        .await
        .ok()?
        .ok()?;
    let deadline = deadline.min(tokio::time::Instant::now() + turn.time(bounds.time));
    match worker::in_child(worker::registered(), turn, base64, Job::Pages, deadline).await {
        Ok(Reply::Pages(pages)) => pages,
        Ok(Reply::Text(_)) | Err(Failure::Base64(_) | Failure::Stopped) => None,
        Err(why) => {
            tracing::warn!(reason = %why, "a PDF's pages were not counted");
            None
        }
    }
}

/// The pages of the PDF `bytes`: the leaves of its page tree
/// (`leaves`), or the `/Count` its root declares when that is more (an
/// overcount costs a refusal at worst; an undercount, money). The whole
/// file is parsed for it, as for its text: a page tree's nodes may be
/// anywhere in it, compressed in object streams.
pub fn page_count(bytes: &[u8]) -> Option<u32> {
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(Bounds::DEFAULT.stream_bytes),
        ..lopdf::LoadOptions::default()
    };
    let doc = Document::load_mem_with_options(bytes, options).ok()?;
    let root = doc
        .catalog()
        .and_then(|catalog| catalog.get(b"Pages"))
        .and_then(Object::as_reference)
        .ok()?;
    let declared = doc
        .get_dictionary(root)
        .and_then(|node| node.get_deref(b"Count", &doc))
        .and_then(Object::as_i64)
        .map_or(0, |n| u32::try_from(n.max(0)).unwrap_or(u32::MAX));
    let pages = leaves(&doc, root).max(declared);
    (pages > 0).then_some(pages)
}

/// The leaf pages under the page tree node `root`, as lopdf's page
/// iterator (and so `extract_bytes`) finds them: each kid that is a
/// `/Page`, or cannot be read as a typed dictionary (readers render that
/// as a blank page), counts; a `/Pages` kid is walked. Bounded whatever
/// the tree: a kid that is its own ancestor (a cycle) is not walked
/// again, and past `MAX_PAGES` kids visited or `MAX_DEPTH` levels the
/// walk stops and the tree counts as `MAX_PAGES`, since what lies beyond
/// is unknown and may be large.
fn leaves(doc: &Document, root: ObjectId) -> u32 {
    let kids = |id: ObjectId| -> &[Object] {
        doc.get_dictionary(id)
            .and_then(|node| node.get_deref(b"Kids", doc))
            .and_then(Object::as_array)
            .map_or(&[], Vec::as_slice)
    };
    // `path[i]` is the node whose kids not yet visited are `pending[i]`.
    let mut path = vec![root];
    let mut pending = vec![kids(root)];
    let (mut visited, mut leaves) = (0, 0);
    while let Some(level) = pending.last_mut() {
        let Some((kid, rest)) = level.split_first() else {
            pending.pop();
            path.pop();
            continue;
        };
        *level = rest;
        visited += 1;
        if visited > MAX_PAGES {
            return MAX_PAGES;
        }
        let Ok(id) = kid.as_reference() else {
            continue;
        };
        match doc.get_dictionary(id).and_then(Dictionary::get_type) {
            Ok(b"Pages") if path.contains(&id) => {}
            Ok(b"Pages") if path.len() >= MAX_DEPTH => return MAX_PAGES,
            Ok(b"Pages") => {
                path.push(id);
                pending.push(kids(id));
            }
            Ok(b"Page") | Err(_) => leaves += 1,
            Ok(_) => {}
        }
    }
    leaves
}

/// The text layer of the PDF `bytes`, read until `deadline`.
pub fn extract_bytes(bytes: &[u8], bounds: Bounds, deadline: Instant) -> Result<Text, String> {
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(bounds.stream_bytes),
        ..lopdf::LoadOptions::default()
    };
    let doc = Document::load_mem_with_options(bytes, options).map_err(|e| match e {
        lopdf::Error::Decryption(_) | lopdf::Error::InvalidPassword => {
            "it is encrypted with a password".to_owned()
        }
        e => format!(
            "it could not be parsed ({})",
            ellipsized(&e.to_string(), 200)
        ),
    })?;
    if doc.is_encrypted() {
        return Err("it is encrypted with a password".to_owned());
    }
    let numbers: Vec<u32> = doc.get_pages().into_keys().collect();
    let pages = numbers.len() as u32;
    if pages == 0 {
        return Err("it has no pages".to_owned());
    }
    let mut text = String::new();
    let mut pages_read = 0;
    let mut cut = None;
    for number in &numbers {
        if pages_read == bounds.pages {
            cut = Some(format!("only the first {} pages are read", bounds.pages));
            break;
        }
        if Instant::now() >= deadline {
            cut = Some(format!("reading stopped after {}s", bounds.time.as_secs()));
            break;
        }
        // A page that fails (a font it cannot decode, a stream over the
        // bound) gives what text it has; the rest of the document goes on.
        let chunks = doc.extract_text_chunks_with_limit(&[*number], bounds.stream_bytes);
        for chunk in chunks.into_iter().flatten() {
            text.push_str(&chunk);
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        pages_read += 1;
        if text.len() > bounds.chars * 4 {
            break;
        }
    }
    if pages_read == 0 {
        return Err(format!(
            "reading it took longer than {}s",
            bounds.time.as_secs()
        ));
    }
    let visible = text.chars().filter(|c| !c.is_whitespace()).count();
    if visible < MIN_CHARS_PER_PAGE * pages_read as usize {
        return Err(if visible == 0 {
            "it has no text layer (a scan, or text drawn as shapes)".to_owned()
        } else {
            format!(
                "it has almost no text layer ({visible} characters in {pages_read} pages: a scan, or text drawn as shapes)"
            )
        });
    }
    if let Some(head) = cut_at_chars(&text, bounds.chars) {
        text = head.to_owned();
        cut = Some(format!("text kept to {} characters", bounds.chars));
    }
    Ok(Text {
        text,
        pages,
        pages_read,
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lopdf::content::{Content, Operation};
    use lopdf::{Stream, dictionary};

    /// A PDF with one page per entry, each showing its lines in Courier
    /// (no lines: a page with a drawn box only, as a scan has no text).
    fn pdf(pages: &[&[&str]]) -> Vec<u8> {
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
                    vec![72.into(), (700 - 14 * i as i64).into()],
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

    fn read(bytes: &[u8], bounds: Bounds) -> Result<Text, String> {
        extract_bytes(bytes, bounds, Instant::now() + bounds.time)
    }

    #[test]
    fn a_text_layer_is_read_page_by_page() {
        let bytes = pdf(&[
            &["Clause 1: the tenant pays."],
            &["Clause 2: the landlord fixes."],
        ]);
        let text = read(&bytes, Bounds::DEFAULT).unwrap();
        assert!(text.text.contains("Clause 1: the tenant pays."), "{text:?}");
        assert!(
            text.text.contains("Clause 2: the landlord fixes."),
            "{text:?}"
        );
        assert_eq!(
            text.text,
            "Clause 1: the tenant pays.\nClause 2: the landlord fixes.\n"
        );
        assert_eq!((text.pages, text.pages_read, text.cut), (2, 2, None));
    }

    #[test]
    fn a_scan_has_no_text_layer_and_garbage_does_not_parse() {
        let scan = pdf(&[&[], &[]]);
        let why = read(&scan, Bounds::DEFAULT).unwrap_err();
        assert!(why.contains("no text layer"), "{why}");
        let why = read(b"%PDF-1.7\nnot really a pdf", Bounds::DEFAULT).unwrap_err();
        assert!(why.starts_with("it could not be parsed"), "{why}");
    }

    #[test]
    fn pages_and_characters_are_bounded_and_the_cut_said() {
        let page: &[&str] = &["This page has a line of text on it."];
        let bytes = pdf(&[page; 5]);
        let few_pages = Bounds {
            pages: 2,
            ..Bounds::DEFAULT
        };
        let text = read(&bytes, few_pages).unwrap();
        assert_eq!((text.pages, text.pages_read), (5, 2));
        assert_eq!(text.cut.as_deref(), Some("only the first 2 pages are read"));
        assert!(
            text.summary().starts_with("pages 1–2 of 5"),
            "{}",
            text.summary()
        );

        let few_chars = Bounds {
            chars: 50,
            ..Bounds::DEFAULT
        };
        let text = read(&bytes, few_chars).unwrap();
        assert_eq!(text.text.chars().count(), 50);
        assert_eq!(text.cut.as_deref(), Some("text kept to 50 characters"));
    }

    #[test]
    fn a_passed_deadline_stops_between_pages() {
        let bytes = pdf(&[&["One page of text here."], &["Another page of text."]]);
        let text = extract_bytes(&bytes, Bounds::DEFAULT, Instant::now());
        // Nothing read before the deadline: no text to give.
        assert!(text.unwrap_err().contains("took longer than 15s"));
    }

    #[test]
    fn pages_are_counted_from_the_page_tree_alone() {
        let page: &[&str] = &["A line."];
        assert_eq!(page_count(&pdf(&[page; 3])), Some(3));
        assert_eq!(page_count(&pdf(&[&[]])), Some(1));
        assert_eq!(page_count(b"%PDF-1.7\nnot really a pdf"), None);
        assert_eq!(page_count(b"not a pdf at all"), None);
    }

    /// `bytes` with its page tree's root declaring `count` pages.
    fn declaring(bytes: &[u8], count: i64) -> Vec<u8> {
        let mut doc = Document::load_mem(bytes).unwrap();
        let root = doc.catalog().unwrap().get(b"Pages").unwrap();
        let root = root.as_reference().unwrap();
        doc.get_dictionary_mut(root).unwrap().set("Count", count);
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    /// A PDF of one blank page hung in the page tree `grow` builds: given
    /// the document and the page, it answers the tree's root, which
    /// declares one page.
    fn tree(grow: impl FnOnce(&mut Document, ObjectId) -> ObjectId) -> Vec<u8> {
        let mut doc = Document::with_version("1.5");
        let page = doc.add_object(dictionary! {
            "Type" => "Page",
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        });
        let root = grow(&mut doc, page);
        let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => root });
        doc.trailer.set("Root", catalog);
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    /// A page tree node of `kids`, declaring one page, as `id`.
    fn node(doc: &mut Document, id: ObjectId, kids: Vec<ObjectId>) {
        let kids: Vec<Object> = kids.into_iter().map(Object::from).collect();
        doc.objects.insert(
            id,
            Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => 1 }),
        );
    }

    /// Issue 51: the page count was the root's `/Count` as written, so a
    /// 300-page file declaring one page cost one page.
    #[test]
    fn a_page_count_is_the_leaves_not_what_the_file_declares() {
        let page: &[&str] = &["A line."];
        let honest = pdf(&[page; 300]);
        let lying = declaring(&honest, 1);
        assert_eq!(
            Document::load_metadata_mem(&lying).unwrap().page_count,
            1,
            "the file declares one page"
        );
        assert_eq!(page_count(&lying), Some(300));
        assert_eq!(page_count(&honest), Some(300));
        // Declaring more than it has: the larger is believed.
        assert_eq!(page_count(&declaring(&pdf(&[page; 2]), 40)), Some(40));
        assert_eq!(page_count(&declaring(&pdf(&[page; 2]), -5)), Some(2));
    }

    #[test]
    fn a_page_tree_with_cycles_or_absurd_depth_or_width_is_walked_within_bounds() {
        // The root among its own kids, and two nodes each other's kid:
        // each walked once, the one page counted once.
        let cycle = tree(|doc, page| {
            let [root, a, b] = [(); 3].map(|()| doc.new_object_id());
            node(doc, root, vec![root, a, page]);
            node(doc, a, vec![b]);
            node(doc, b, vec![a, root]);
            root
        });
        assert_eq!(page_count(&cycle), Some(1));
        // 300 levels, one page at the bottom: past `MAX_DEPTH`, cut.
        let deep = tree(|doc, page| {
            let ids: Vec<ObjectId> = (0..300).map(|_| doc.new_object_id()).collect();
            for pair in ids.windows(2) {
                node(doc, pair[0], vec![pair[1]]);
            }
            node(doc, ids[299], vec![page]);
            ids[0]
        });
        assert_eq!(page_count(&deep), Some(MAX_PAGES));
        // 64 levels of a node that is both kids of its parent: 2^64 pages
        // by the tree, a few hundred bytes of file, `MAX_PAGES` kids
        // visited.
        let wide = tree(|doc, page| {
            let ids: Vec<ObjectId> = (0..64).map(|_| doc.new_object_id()).collect();
            for pair in ids.windows(2) {
                node(doc, pair[0], vec![pair[1], pair[1]]);
            }
            node(doc, ids[63], vec![page, page]);
            ids[0]
        });
        assert!(wide.len() < 8 << 10, "{}", wide.len());
        let started = Instant::now();
        assert_eq!(page_count(&wide), Some(MAX_PAGES));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// The unit tests register no worker (the `chorus` binary is not
    /// built for them; `worker`'s tests play the child with `sh`, the e2e
    /// tests run the real one): without one, nothing is parsed in-process.
    #[tokio::test]
    async fn without_a_worker_no_pdf_is_parsed_and_the_reason_says_so() {
        let encoded: std::sync::Arc<str> = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            pdf(&[&["Not read here."]]),
        )
        .into();
        assert_eq!(pages(encoded.clone(), Bounds::DEFAULT).await, None);
        let why = extract(encoded, Bounds::DEFAULT).await.unwrap_err();
        assert!(
            why.starts_with("it could not be read: this program parses no PDF"),
            "{why}"
        );
    }
}
