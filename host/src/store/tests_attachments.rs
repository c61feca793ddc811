//! Attachment bytes on both backends: kept once by content however many
//! runs refer to them, freed by retention once no kept run does, and
//! bounded by `[store] max_bytes`.

use std::time::Duration;

use super::*;
use crate::attach::{Access, Attachments, Limits, Source};
use crate::store::attachments::Held;

on_both_backends!(
    the_same_image_is_kept_once_for_two_runs,
    retention_frees_the_bytes_no_kept_run_refers_to,
    max_bytes_bounds_the_bytes_kept,
);

/// A PNG of `size` bytes, unlike any other of a different `seed`.
fn png(seed: u8, size: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    bytes.resize(size, seed);
    bytes
}

fn attachments(files: &[&[u8]]) -> Attachments {
    let limits = Limits {
        max_attachments: 10,
        max_attachment_bytes: 1 << 20,
        max_attachments_bytes: 1 << 22,
    };
    let sources = files
        .iter()
        .enumerate()
        .map(|(i, bytes)| Source::Bytes {
            bytes: bytes.to_vec(),
            name: Some(format!("image-{i}.png")),
        })
        .collect();
    crate::attach::load(sources, &Access::Remote, &limits).unwrap()
}

/// Records a finished run with `files`, and reads it back.
async fn run_with(store: &Store, prompt: &str, files: &[&[u8]]) -> StoredRun {
    let run = fixture(prompt, "ask", 1);
    let mut recorder = store.recorder(
        Links {
            attachments: attachments(files),
            ..Links::default()
        },
        Duration::from_secs(60),
    );
    run.start(&recorder, 1);
    recorder.finish(Ok(&run.record)).await.unwrap();
    found(store, run.id(), false)
}

fn held(store: &Store, run: &StoredRun) -> Vec<Held> {
    store
        .attachments(run, false)
        .unwrap()
        .into_iter()
        .map(|a| a.held)
        .collect()
}

impl Place {
    fn open_with(&self, retention: Retention) -> Store {
        match self {
            Place::File(dir) => {
                Store::open_at(&dir.path().join("data/runs.sqlite3"), retention).unwrap()
            }
            Place::Database(url) => {
                Store::open_database(Target::new(url, None).unwrap(), retention).unwrap()
            }
        }
    }
}

async fn the_same_image_is_kept_once_for_two_runs(place: Place) {
    let store = place.open();
    let image = png(1, 5000);
    let one = run_with(&store, "what is this?", &[&image]).await;
    let two = run_with(&store, "and this?", &[&image, b"notes: a, b"]).await;
    assert_eq!(held(&store, &one), [Held::Kept]);
    assert_eq!(held(&store, &two), [Held::Kept, Held::Kept]);
    let read = store.attachments(&two, true).unwrap();
    assert_eq!(read[0].bytes.as_deref(), Some(&image[..]));
    assert_eq!(read[1].bytes.as_deref(), Some(&b"notes: a, b"[..]));
    let again = read[0].attachment().unwrap();
    assert_eq!(again, attachments(&[&image]).iter().next().unwrap().clone());
    assert_eq!(
        store.attachment_bytes_kept(),
        (2, 5000 + 11),
        "the image once, the text once"
    );
}

async fn retention_frees_the_bytes_no_kept_run_refers_to(place: Place) {
    let store = place.open();
    let (x, y) = (png(1, 4000), png(2, 3000));
    let _a = run_with(&store, "a", &[&x]).await;
    let b = run_with(&store, "b", &[&x]).await;
    let c = run_with(&store, "c", &[&y]).await;
    let keep = |max_runs| Retention {
        max_runs,
        max_age: None,
        max_bytes: 1 << 30,
    };
    let pruned = store.prune(&keep(2)).unwrap();
    assert_eq!(pruned.removed, 1);
    assert_eq!(held(&store, &b), [Held::Kept], "b still refers to x");
    assert_eq!(store.attachment_bytes_kept(), (2, 7000));

    let pruned = store.prune(&keep(1)).unwrap();
    assert_eq!(pruned.removed, 1);
    assert!(pruned.removed_bytes >= 4000, "{pruned:?}");
    assert_eq!(store.attachment_bytes_kept(), (1, 3000), "x is freed");
    assert_eq!(held(&store, &c), [Held::Kept]);
    assert!(pruned.kept_bytes >= 3000, "{pruned:?}");
}

async fn max_bytes_bounds_the_bytes_kept(place: Place) {
    let max_bytes = 64 * 1024;
    let store = place.open_with(Retention {
        max_runs: 1000,
        max_age: None,
        max_bytes,
    });
    // Alone more than the store may keep: not kept, and said why.
    let big = run_with(&store, "big", &[&png(9, 100 * 1024)]).await;
    match &held(&store, &big)[..] {
        [Held::NotKept(why)] => assert!(why.contains("[store] max_bytes"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.attachment_bytes_kept(), (0, 0));

    // Runs of 20 KiB images: retention keeps what fits in 64 KiB.
    let mut runs = Vec::new();
    for i in 0..5u8 {
        runs.push(run_with(&store, &format!("r{i}"), &[&png(10 + i, 20 * 1024)]).await);
    }
    let pruned = store
        .prune(&Retention {
            max_runs: 1000,
            max_age: None,
            max_bytes,
        })
        .unwrap();
    assert!(pruned.kept_bytes <= max_bytes, "{pruned:?}");
    assert!(pruned.removed >= 3, "{pruned:?}");
    let (count, size) = store.attachment_bytes_kept();
    assert!(size <= max_bytes && count >= 1, "{count} {size}");
    assert_eq!(held(&store, &runs[4]), [Held::Kept], "the newest is kept");
}
