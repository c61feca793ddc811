//! The response cache's index (see `store::responses`), on both backends:
//! a kept `ok` answer is found by its key until the entry expires; a failed
//! call, a missing run or an unknown key is a miss; the retention pass
//! removes expired entries; a call's `cached_from` is kept and read back.

use super::*;
use crate::record::CallRef;
use crate::store::responses::CacheEntry;

on_both_backends!(the_index_finds_kept_ok_answers_until_they_expire);

async fn the_index_finds_kept_ok_answers_until_they_expire(place: Place) {
    let store = place.open();
    assert!(store.keeps_answers());
    let mut run = fixture("What is 2 + 2?", "ask", 2);
    let earlier = CallRef {
        run_id: "an-earlier-run".into(),
        call: 3,
    };
    let mut calls: Vec<CallRecord> = run.calls.iter().map(|c| CallRecord::clone(c)).collect();
    calls[0].cached_from = Some(earlier.clone());
    calls[1].status = "failed".into();
    calls[1].reply = None;
    calls[1].error = Some(crate::record::CallError {
        kind: "timeout".into(),
        status: None,
        message: "too slow".into(),
    });
    run.calls = calls.iter().cloned().map(Arc::new).collect();
    let mut record = RunRecord::clone(&run.record);
    record.calls = calls;
    run.record = Arc::new(record);
    record_run(&store, &run).await;

    let kept = found(&store, run.id(), false);
    assert_eq!(kept.calls[0].call.cached_from, Some(earlier));
    assert_eq!(kept.calls[1].call.cached_from, None);

    let now = now_ms();
    let entry = |key: &str, run_id: &str, call: u32| CacheEntry {
        key: key.into(),
        from: CallRef {
            run_id: run_id.into(),
            call,
        },
        created_at: now,
        expires_at: now + 60_000,
    };
    store.remember_answer(&entry("ok", run.id(), 0)).unwrap();
    store
        .remember_answer(&entry("failed", run.id(), 1))
        .unwrap();
    store
        .remember_answer(&entry("gone", "no-such-run", 0))
        .unwrap();

    let (from, call) = store.cached_answer("ok", now).unwrap().expect("a hit");
    assert_eq!((from.run_id.as_str(), from.call), (run.id(), 0));
    assert_eq!(
        call.call.reply.as_deref().map(String::as_str),
        Some("answer 0 to What is 2 + 2?")
    );
    assert!(store.cached_answer("failed", now).unwrap().is_none());
    assert!(store.cached_answer("gone", now).unwrap().is_none());
    assert!(store.cached_answer("unknown", now).unwrap().is_none());
    assert!(
        store.cached_answer("ok", now + 60_000).unwrap().is_none(),
        "expired"
    );

    // The retention pass removes expired entries and those of runs gone.
    store.prune_at(&retention(), now + 120_000).unwrap();
    assert!(store.cached_answer("ok", now).unwrap().is_none());

    let memory = Store::in_memory(&crate::config::Limits::default(), "a test");
    assert!(!memory.keeps_answers());
    memory.remember_answer(&entry("ok", run.id(), 0)).unwrap();
    assert!(memory.cached_answer("ok", now).unwrap().is_none());
}

async fn record_run(store: &Store, fixture: &Fixture) {
    record(store, fixture).await;
}
