//! A provider's limits held across instances on one PostgreSQL store
//! (issue 21 part 4): `max_concurrency`, `requests_per_minute` and a 429's
//! `Retry-After` count for all of them, and a killed instance's slots are
//! freed with its lease. The mock is the provider; it counts what it saw.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::store::failover::instance;
use crate::support::http::{HttpServer, tool_call};
use crate::support::*;
use crate::web::teams::{ALICE, answering, client, rpc, team_in};

/// The team config on `url`'s database with `provider` added to
/// `[providers.mock]`.
fn on_store(mock: &Mock, url: &str, provider: &str) -> String {
    team_in(
        mock,
        &client("alice", ALICE, ""),
        &format!("url = \"{url}\""),
    )
    .replace(
        "read_timeout = \"10s\"\n",
        &format!("read_timeout = \"10s\"\n{provider}\n"),
    )
}

async fn ask(server: &HttpServer, prompt: &str) -> Value {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    rpc(
        server,
        ALICE,
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "ask", "arguments": {"prompt": prompt}}}),
    )
    .await
}

fn answered(reply: &Value) -> bool {
    reply["result"]["isError"] != true && reply["result"]["structuredContent"]["answer"].is_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn three_instances_send_at_most_max_concurrency_requests_at_once() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer_after(150, "ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    let config = write_config(&on_store(&mock, &cluster.database(), "max_concurrency = 2"));
    let (a, b, c) = tokio::join!(
        instance(&config.path),
        instance(&config.path),
        instance(&config.path)
    );
    let (ra, rb, rc) = tokio::join!(ask(&a, "from a"), ask(&b, "from b"), ask(&c, "from c"));
    for reply in [&ra, &rb, &rc] {
        assert!(answered(reply), "{reply}");
    }
    // 18 requests from three instances, each allowed 2 on its own: never
    // more than 2 at once in all.
    assert_eq!(mock.requests().len(), 18);
    assert_eq!(
        mock.max_in_flight(),
        2,
        "the mock saw {} at once",
        mock.max_in_flight()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_per_minute_count_every_instances_requests() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    answering(&mock);
    let config = write_config(&on_store(
        &mock,
        &cluster.database(),
        "requests_per_minute = 4",
    ));
    let (a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    // Two runs of six requests each, on two instances: four go, the rest
    // wait for the minute (longer than the runs may take).
    let runs = [
        tokio::spawn(async move { ask(&a, "from a").await }),
        tokio::spawn(async move { ask(&b, "from b").await }),
    ];
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.requests().len() >= 4)
            .await
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        mock.requests().len(),
        4,
        "the fifth request waits for the minute"
    );
    for run in runs {
        run.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_seen_by_one_instance_holds_back_the_others() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::rate_limited("2"), Step::answer("ok")]);
    }
    mock.script(SYNTH, [Step::answer("merged")]);
    // Retry-After is honoured up to max_backoff (the tests' is 200 ms).
    let config = write_config(
        &on_store(&mock, &cluster.database(), "")
            .replace("max_backoff = \"200ms\"", "max_backoff = \"5s\""),
    );
    let (a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    let first = tokio::spawn(async move { ask(&a, "from a").await });
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.requests().len()
            >= PANEL.len())
            .await
    );
    let limited = Instant::now();
    // A's five requests were told to come back in 2 s; B asks now.
    let second = tokio::spawn(async move { ask(&b, "from b").await });
    let from_b = |m: &Mock| m.requests().iter().any(|r| r.text().contains("from b"));
    assert!(mock.wait_until(Duration::from_secs(20), from_b).await);
    let waited = limited.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "B sent {waited:?} after A's 429 with Retry-After: 2"
    );
    for run in [first, second] {
        let reply = run.await.unwrap();
        assert!(answered(&reply), "{reply}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_instances_slots_are_freed_with_its_lease() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    // A's lease lapses 10–15 s after the kill (heartbeats every 5 s, leases
    // of 15 s): B's panel stage must outlast that, and with the default 20 s
    // (of which a quarter is kept for the merge) it would end right at it.
    let config = on_store(&mock, &cluster.database(), "max_concurrency = 2")
        .replace("run_timeout = \"20s\"", "run_timeout = \"60s\"");
    assert!(config.contains("run_timeout = \"60s\""));
    let config = write_config(&config);
    let (mut a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    let message = |prompt: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "ask", "arguments": {"prompt": prompt}}})
    };
    let on_a = tokio::spawn(a.post(Some(ALICE), &message("from a")).send());
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == 2)
            .await
    );
    let on_b = tokio::spawn(b.post(Some(ALICE), &message("from b")).send());
    let from_b = |m: &Mock| m.requests().iter().any(|r| r.text().contains("from b"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!from_b(&mock), "A holds both slots: B waits");
    // kill -9: A never gives its slots back; its lease lapses.
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    let killed = Instant::now();
    assert!(
        mock.wait_until(Duration::from_secs(40), from_b).await,
        "B's requests never went after A was killed"
    );
    assert!(
        killed.elapsed() < Duration::from_secs(30),
        "{:?}",
        killed.elapsed()
    );
    assert!(mock.max_in_flight() <= 2);
    on_a.abort();
    on_b.abort();
}

/// A client's limits over two instances on one store.
fn alice_limited(mock: &Mock, url: &str, limits: &str) -> String {
    team_in(
        mock,
        &client("alice", ALICE, limits),
        &format!("url = \"{url}\""),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clients_runs_per_minute_count_on_every_instance() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    answering(&mock);
    let config = write_config(&alice_limited(
        &mock,
        &cluster.database(),
        "max_runs_per_minute = 2",
    ));
    let (a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    for (id, server) in [(1, &a), (2, &b)] {
        let response = server
            .post(Some(ALICE), &tool_call(id, "ask", "q"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    // Two runs this minute, one on each: the third is refused on either.
    for (id, server) in [(3, &a), (4, &b)] {
        let response = server
            .post(Some(ALICE), &tool_call(id, "ask", "q"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 429);
        let wait: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=61).contains(&wait), "Retry-After: {wait}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clients_concurrent_runs_count_on_every_instance() {
    let Some(cluster) = crate::support::postgres::shared() else {
        return;
    };
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::Hang]);
    }
    let config = write_config(&alice_limited(
        &mock,
        &cluster.database(),
        "max_concurrent_runs = 1",
    ));
    let (a, b) = tokio::join!(instance(&config.path), instance(&config.path));
    let on_a = tokio::spawn(a.post(Some(ALICE), &tool_call(1, "ask", "from a")).send());
    assert!(
        mock.wait_until(Duration::from_secs(20), |m| m.in_flight() == PANEL.len())
            .await
    );
    let reply = ask(&b, "from b").await;
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reply["result"]["isError"] == true
            && text.contains("max_concurrent_runs = 1")
            && text.contains("instances sharing this store"),
        "{reply}"
    );
    assert!(!mock.requests().iter().any(|r| r.text().contains("from b")));
    on_a.abort();
}
