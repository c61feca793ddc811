//! Feedback kept with its run, on both backends: a client's second rating
//! replaces its first, another client's stands beside it, another handle
//! (another instance) reads it, and it goes when its run goes.

use super::*;

on_both_backends!(feedback_is_kept_with_its_run_one_rating_per_client_and_metric);

async fn feedback_is_kept_with_its_run_one_rating_per_client_and_metric(place: Place) {
    let store = place.open();
    let runs: Vec<Fixture> = (0..3)
        .map(|i| fixture(&format!("q{i}"), "ask", 1))
        .collect();
    for run in &runs {
        record(&store, run).await;
    }
    let rated = runs[0].id();
    let rating = |client: &str, value: f64, at: i64| Feedback {
        run_id: rated.to_owned(),
        metric: "helpful".into(),
        value,
        client: client.into(),
        comment: None,
        at,
    };
    assert_eq!(
        store.give_feedback(&rating("alice", 1.0, 10)).unwrap(),
        Given::New
    );
    assert_eq!(
        store.give_feedback(&rating("alice", 0.0, 20)).unwrap(),
        Given::Replaced { was: 1.0 }
    );
    let bobs = Feedback {
        comment: Some("cites its sources".into()),
        ..rating("bob", 1.0, 30)
    };
    assert_eq!(store.give_feedback(&bobs).unwrap(), Given::New);
    let score = Feedback {
        metric: "score".into(),
        ..rating("alice", 7.5, 40)
    };
    assert_eq!(store.give_feedback(&score).unwrap(), Given::New);
    let kept = store.feedback_of(rated).unwrap();
    assert_eq!(kept, [rating("alice", 0.0, 20), bobs, score]);
    assert_eq!(
        place.open().feedback_of(rated).unwrap(),
        kept,
        "another handle"
    );
    assert!(store.feedback_of(runs[1].id()).unwrap().is_empty());

    let nobody = Feedback {
        run_id: "0196a1b2-c3d4-7000-8000-000000000001".into(),
        ..rating("alice", 1.0, 50)
    };
    assert_eq!(store.give_feedback(&nobody).unwrap(), Given::UnknownRun);

    // The oldest run goes, and its feedback with it.
    store
        .prune(&Retention {
            max_runs: 2,
            ..retention()
        })
        .unwrap();
    assert!(matches!(store.find(rated, false).unwrap(), Lookup::Unknown));
    assert!(store.feedback_of(rated).unwrap().is_empty());
    assert_eq!(
        store.give_feedback(&rating("alice", 1.0, 60)).unwrap(),
        Given::UnknownRun
    );
}
