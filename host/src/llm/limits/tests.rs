use super::*;

#[test]
fn a_full_window_waits_for_its_oldest_entries() {
    let now = Instant::now();
    let mut log = VecDeque::new();
    assert_eq!(window_wait(&mut log, now, 3, 3), Duration::ZERO);
    log.push_back((now, 0, 2));
    log.push_back((now + Duration::from_secs(10), 1, 1));
    let later = now + Duration::from_secs(20);
    // 3 used of 3: one more waits for the first entry's minute to end.
    assert_eq!(window_wait(&mut log, later, 1, 3), Duration::from_secs(40));
    // Two more still wait for the first only (it frees 2).
    assert_eq!(window_wait(&mut log, later, 2, 3), Duration::from_secs(40));
    // Three need the second too.
    assert_eq!(window_wait(&mut log, later, 3, 3), Duration::from_secs(50));
    // After a minute the first is gone.
    let gone = now + Duration::from_secs(61);
    assert_eq!(window_wait(&mut log, gone, 2, 3), Duration::ZERO);
    assert_eq!(log.len(), 1);
}

fn provider(rpm: Option<u64>, tpm: Option<u64>) -> crate::config::Provider {
    let loaded = crate::config::Loaded::parse(
        crate::config::tests::MINIMAL,
        "test.toml",
        std::path::PathBuf::from("."),
    )
    .unwrap();
    let mut p = loaded.config.providers["p"].clone();
    p.requests_per_minute = rpm;
    p.tokens_per_minute = tpm;
    p
}

#[tokio::test(start_paused = true)]
async fn requests_per_minute_hold_in_one_process() {
    let limiter = Limiter::new("p", &provider(Some(2), None));
    let attempts = Attempts::default();
    let start = Instant::now();
    drop(limiter.admit(10, &attempts).await);
    drop(limiter.admit(10, &attempts).await);
    assert_eq!(attempts.queued_ms(), None, "two of two go at once");
    drop(limiter.admit(10, &attempts).await);
    assert!(start.elapsed() >= MINUTE, "the third waits for the minute");
    // (Counted on the real clock: this test's is paused.)
    assert!(attempts.queued_ms().is_some(), "the wait is counted");
}

#[tokio::test(start_paused = true)]
async fn tokens_are_reserved_at_worst_and_settled_with_usage() {
    let limiter = Limiter::new("p", &provider(None, Some(1000)));
    let attempts = Attempts::default();
    let start = Instant::now();
    let mut ticket = limiter.admit(800, &attempts).await;
    ticket.settle(Some(100));
    drop(ticket);
    // 100 used: 800 more fit at once.
    drop(limiter.admit(800, &attempts).await);
    assert_eq!(start.elapsed(), Duration::ZERO);
    // 900 used (the second kept its worst case): 800 more wait.
    drop(limiter.admit(800, &attempts).await);
    assert!(start.elapsed() >= MINUTE);
    // A request bigger than the whole limit is clamped to it, not stuck.
    let limiter = Limiter::new("p", &provider(None, Some(1000)));
    drop(limiter.admit(5000, &attempts).await);
}

#[tokio::test(start_paused = true)]
async fn a_429_holds_every_request_back() {
    let limiter = Limiter::new("p", &provider(None, None));
    let attempts = Attempts::default();
    limiter.rate_limited(Duration::from_secs(2));
    let start = Instant::now();
    drop(limiter.admit(10, &attempts).await);
    assert!(start.elapsed() >= Duration::from_secs(2));
    let start = Instant::now();
    drop(limiter.admit(10, &attempts).await);
    assert_eq!(start.elapsed(), Duration::ZERO);
}
