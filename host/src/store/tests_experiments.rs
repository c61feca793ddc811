//! Experiments as both backends keep them: which variant served each run
//! (written with the run's first row, found again by run and by
//! conversation), each variant's numbers with its ratings, decisions that
//! another handle (another instance) reads and merges into, and an
//! assignment that goes with its run.

use super::*;
use crate::record::Assignment;
use crate::store::experiments::{Decisions, Declared, Stopped};

on_both_backends!(an_experiments_runs_are_counted_by_variant_and_its_decisions_shared);

async fn record_served(store: &Store, fixture: &Fixture, variant: &str, conversation: &str) {
    let links = Links {
        experiment: Some(Assignment {
            experiment: "ask".into(),
            variant: variant.into(),
            conversation: Some(conversation.into()),
        }),
        ..Links::default()
    };
    let mut recorder = store.recorder(links, Duration::from_secs(60));
    fixture.start(&recorder, fixture.calls.len());
    recorder.finish(Ok(&fixture.record)).await.unwrap();
}

fn rate(store: &Store, run: &Fixture, client: &str, value: f64) {
    let feedback = Feedback {
        run_id: run.id().to_owned(),
        metric: "helpful".into(),
        value,
        client: client.into(),
        comment: None,
        at: 1,
    };
    store.give_feedback(&feedback).unwrap();
}

async fn an_experiments_runs_are_counted_by_variant_and_its_decisions_shared(place: Place) {
    let store = place.open();
    let plain = fixture("not in the experiment", "ask", 2);
    record(&store, &plain).await;
    let a: Vec<Fixture> = (0..3)
        .map(|i| fixture(&format!("a{i}"), "ask", 2))
        .collect();
    let b: Vec<Fixture> = (0..2)
        .map(|i| fixture(&format!("b{i}"), "self-moa", 2))
        .collect();
    for (i, run) in a.iter().enumerate() {
        record_served(&store, run, "ask", &format!("conversation-{i}")).await;
    }
    for run in &b {
        record_served(&store, run, "self-moa", "conversation-0").await;
    }
    // Two clients' ratings of one run count once, as their mean.
    rate(&store, &a[0], "alice", 1.0);
    rate(&store, &a[0], "bob", 0.0);
    rate(&store, &a[1], "alice", 1.0);
    rate(&store, &b[0], "alice", 1.0);
    rate(&store, &plain, "alice", 0.0);

    let served = store.assignment_of(a[0].id()).unwrap().unwrap();
    assert_eq!(
        (served.experiment.as_str(), served.variant.as_str()),
        ("ask", "ask")
    );
    assert_eq!(store.assignment_of(plain.id()).unwrap(), None);
    assert_eq!(
        found(&store, b[1].id(), false).experiment.unwrap().variant,
        "self-moa",
        "a run read whole says which variant served it"
    );
    assert_eq!(
        store
            .variant_of_conversation("ask", "conversation-0")
            .unwrap()
            .as_deref(),
        Some("self-moa"),
        "the conversation's latest run"
    );
    assert_eq!(store.variant_of_conversation("ask", "none").unwrap(), None);

    let tallies = store.experiment_tallies("ask", Some("helpful")).unwrap();
    assert_eq!(tallies.len(), 2, "{tallies:?}");
    let ask = &tallies[0];
    assert_eq!((ask.variant.as_str(), ask.runs, ask.failed), ("ask", 3, 0));
    assert!((ask.cost_usd - 0.006).abs() < 1e-9, "{ask:?}");
    assert_eq!((ask.rated, ask.value_sum), (2, 1.5));
    assert_eq!(ask.p95_ms, Some(1234));
    let moa = &tallies[1];
    assert_eq!(
        (moa.variant.as_str(), moa.runs, moa.rated),
        ("self-moa", 2, 1)
    );
    let unrated = store.experiment_tallies("ask", None).unwrap();
    assert_eq!(unrated[0].rated, 0);
    let timeline = store
        .experiment_timeline("ask", Some("helpful"), 4)
        .unwrap();
    assert_eq!(timeline.len(), 4, "the latest 4");
    assert_eq!(timeline[0].variant, "ask");
    assert_eq!(timeline[0].value, Some(1.0), "a[1], rated 1");
    assert_eq!(timeline[3].variant, "self-moa");
    assert_eq!(timeline[3].value, None);

    // Decisions: another handle reads them, and merges into them.
    let variants = vec!["ask".to_owned(), "self-moa".to_owned()];
    assert_eq!(store.experiment_decisions("ask").unwrap(), None);
    let stop = Decisions {
        variants: variants.clone(),
        winner: None,
        stopped: [(
            "self-moa".to_owned(),
            Stopped {
                reason: "guardrail: cost".into(),
                at: 1,
            },
        )]
        .into(),
    };
    assert_eq!(store.decide_experiment("ask", &stop).unwrap(), stop);
    let other = place.open();
    let win = Decisions {
        variants: variants.clone(),
        winner: Some(Declared {
            variant: "ask".into(),
            said: "ask is better".into(),
            at: 2,
        }),
        stopped: Default::default(),
    };
    let merged = other.decide_experiment("ask", &win).unwrap();
    assert_eq!(merged.winner, win.winner);
    assert_eq!(
        merged.stopped, stop.stopped,
        "the first instance's stop stays"
    );
    assert_eq!(store.experiment_decisions("ask").unwrap(), Some(merged));

    // An assignment goes with its run.
    store
        .prune(&Retention {
            max_runs: 5,
            ..retention()
        })
        .unwrap();
    assert!(matches!(
        store.find(plain.id(), false).unwrap(),
        Lookup::Unknown
    ));
    store
        .prune(&Retention {
            max_runs: 4,
            ..retention()
        })
        .unwrap();
    assert_eq!(store.assignment_of(a[0].id()).unwrap(), None);
    assert_eq!(store.experiment_tallies("ask", None).unwrap()[0].runs, 2);
}
