//! Runs by client, and budgets two handles on one store (two instances)
//! hold together, on both backends.

use std::time::Duration;

use super::*;

on_both_backends!(
    listings_filter_by_client,
    two_handles_admit_no_more_than_a_budget_holds,
);

async fn listings_filter_by_client(place: Place) {
    let store = place.open();
    for (i, client) in ["alice", "bob", "alice"].into_iter().enumerate() {
        let run = fixture(&format!("question {i}"), "ask", 1);
        let mut recorder = store.recorder(
            Links {
                client: Some(client.into()),
                ..Links::default()
            },
            Duration::from_secs(60),
        );
        run.start(&recorder, 1);
        recorder.finish(Ok(&run.record)).await.unwrap();
    }
    let of = |client: &str| {
        store
            .list(&Query {
                client: Some(client.into()),
                ..Query::default()
            })
            .unwrap()
            .runs
    };
    let alices = of("alice");
    assert_eq!(alices.len(), 2);
    assert!(alices.iter().all(|r| r.client.as_deref() == Some("alice")));
    assert_eq!(of("bob")[0].prompt, "question 1");
    assert!(of("carol").is_empty());
    assert_eq!(store.list(&Query::default()).unwrap().runs.len(), 3);
}

async fn two_handles_admit_no_more_than_a_budget_holds(place: Place) {
    let (one, two) = (place.open(), place.open());
    let ask = |i: usize, client: &str| Ask {
        id: format!("{client}-{i}"),
        client: client.into(),
        at: now_ms(),
        worst_usd: 0.01,
        periods: vec![Period {
            since: now_ms() - 60_000,
            limit_usd: 0.10,
        }],
    };
    // 30 asks at once from two handles: ten fit.
    let admitted: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..30)
            .map(|i| {
                let store = if i % 2 == 0 { &one } else { &two };
                let ask = ask(i, "alice");
                scope.spawn(move || store.reserve(&ask).unwrap())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|v| matches!(v, Verdict::Admitted { .. }))
            .count()
    });
    assert_eq!(admitted, 10);
    match one.reserve(&ask(99, "alice")).unwrap() {
        Verdict::Over { period: 0, spent } => assert!((spent - 0.10).abs() < 1e-9, "{spent}"),
        other => panic!("{other:?}"),
    }
    // Another client's budget is its own.
    assert!(matches!(
        two.reserve(&ask(0, "bob")).unwrap(),
        Verdict::Admitted { .. }
    ));
    // A run that cost less gives back the rest of its worst case.
    let settled: Vec<String> = (0..30).map(|i| format!("alice-{i}")).collect();
    for id in &settled {
        one.settle(id, 0.001).unwrap();
    }
    assert!(matches!(
        two.reserve(&ask(100, "alice")).unwrap(),
        Verdict::Admitted { spent } if (spent[0] - 0.01).abs() < 1e-9
    ));
}
