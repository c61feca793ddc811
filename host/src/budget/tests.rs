use super::*;
use crate::client::Limits;

fn client(limits: Limits) -> Client {
    Client {
        name: "bob".into(),
        admin: false,
        pipelines: None,
        limits,
    }
}

fn memory() -> Store {
    Store::in_memory(&crate::config::Limits::default(), "test")
}

#[test]
fn runs_per_minute_say_when_one_more_fits() {
    let gate = Gate::new();
    let bob = client(Limits {
        runs_per_minute: Some(2),
        ..Limits::default()
    });
    assert!(gate.per_minute(&bob).is_ok());
    assert!(gate.per_minute(&bob).is_ok());
    let over = gate.per_minute(&bob).unwrap_err();
    let wait = over.retry_after;
    assert!(wait > Duration::from_secs(58) && wait <= MINUTE, "{wait:?}");
    assert_eq!(over.retry_after_s(), 60);
    assert!(over.to_string().contains("max_runs_per_minute"), "{over}");
    assert!(gate.per_minute(&client(Limits::default())).is_ok());
}

#[tokio::test]
async fn a_run_counted_early_at_a_door_is_not_counted_again_at_admission() {
    let gate = Gate::new();
    let bob = client(Limits {
        runs_per_minute: Some(2),
        ..Limits::default()
    });
    // `/mcp` counts its tools/call; the run it becomes takes that credit.
    gate.per_minute_early(&bob).await.unwrap();
    gate.per_minute_for_run(&bob).await.unwrap();
    // Another door (the viewer, the CLI) counts at admission alone.
    gate.per_minute_for_run(&bob).await.unwrap();
    let over = gate.per_minute_for_run(&bob).await.unwrap_err();
    assert_eq!(over.limit, 2);
    // Refused at the door: no credit left behind to spend later.
    assert!(gate.per_minute_early(&bob).await.is_err());
    assert!(gate.per_minute_for_run(&bob).await.is_err());
}

#[test]
fn concurrent_runs_are_bounded_and_freed_when_a_run_ends() {
    let gate = Gate::new();
    let store = memory();
    let bob = client(Limits {
        concurrent_runs: Some(1),
        ..Limits::default()
    });
    let first = gate.admit(&bob, &store, None).unwrap();
    let refused = gate.admit(&bob, &store, None).err().unwrap();
    assert!(
        refused.message.contains("max_concurrent_runs = 1"),
        "{refused}"
    );
    assert_eq!(refused.kind, crate::client::Refused::Concurrent);
    first.settle(Some(0.0));
    assert!(gate.admit(&bob, &store, None).is_ok());
}

#[test]
fn a_budget_admits_worst_cases_that_fit_and_names_the_reset() {
    let gate = Gate::new();
    let store = memory();
    let bob = client(Limits {
        usd_per_day: Some(0.10),
        ..Limits::default()
    });
    let passes: Vec<Pass> = (0..4)
        .map(|_| gate.admit(&bob, &store, Some(0.025)).unwrap())
        .collect();
    let refused = gate.admit(&bob, &store, Some(0.025)).err().unwrap();
    assert!(
        refused.kind == crate::client::Refused::Budget
            && refused.message.contains("daily budget")
            && refused.message.contains("max_usd_per_day")
            && refused.message.contains("resets at")
            && refused.message.contains("T00:00:00Z"),
        "{refused}"
    );
    // A run that cost less than its worst case gives the rest back.
    let mut passes = passes.into_iter();
    passes.next().unwrap().settle(Some(0.001));
    assert!(gate.admit(&bob, &store, Some(0.02)).is_ok());
    let no_ceiling = gate.admit(&bob, &store, None).err().unwrap();
    assert!(
        no_ceiling.message.contains("limits.max_cost_usd"),
        "{no_ceiling}"
    );
}

#[test]
fn a_client_past_its_ratings_a_minute_is_told_when_one_more_fits() {
    let gate = Gate::new();
    let bob = client(Limits::default());
    for _ in 0..MAX_RATINGS_PER_MINUTE {
        gate.rating(&bob).unwrap();
    }
    let wait = gate.rating(&bob).unwrap_err();
    assert!(wait > Duration::from_secs(50) && wait <= MINUTE, "{wait:?}");
    // Another client's ratings are its own.
    let alice = Client {
        name: "alice".into(),
        ..client(Limits::default())
    };
    gate.rating(&alice).unwrap();
}
