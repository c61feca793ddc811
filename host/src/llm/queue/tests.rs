use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use futures::FutureExt;

use super::*;

fn at(stage_rank: u32, run_seq: u64) -> Priority {
    Priority {
        stage_rank,
        run_seq,
    }
}

fn queued<'a>(queue: &'a PermitQueue, priority: Priority) -> Waiting<'a> {
    match queue.acquire(priority) {
        Ok(_) => panic!("expected to wait for {priority:?}"),
        Err(waiting) => waiting,
    }
}

fn in_use(queue: &PermitQueue) -> usize {
    queue.lock().in_use
}

#[test]
fn later_stages_go_first_then_the_oldest_run_then_first_come() {
    let queue = PermitQueue::new(1);
    let held = queue.acquire(at(0, 0)).ok().unwrap();
    // Arrival order is not queue order.
    let mut waiters: Vec<(&str, Waiting)> = vec![
        ("newer first stage", queued(&queue, at(0, 5))),
        ("older first stage", queued(&queue, at(0, 2))),
        ("newest synthesis", queued(&queue, at(1, 9))),
        ("older again", queued(&queue, at(0, 2))),
        ("debate round", queued(&queue, at(2, 7))),
    ];
    assert_eq!(queue.waiting(), 5);

    let mut order = Vec::new();
    let mut permit = held;
    while !waiters.is_empty() {
        drop(permit);
        let mut ready: Vec<(usize, Permit)> = waiters
            .iter_mut()
            .enumerate()
            .filter_map(|(i, (_, w))| w.now_or_never().map(|p| (i, p)))
            .collect();
        assert_eq!(ready.len(), 1, "one permit, one waiter served");
        let (i, next) = ready.pop().unwrap();
        order.push(waiters.remove(i).0);
        permit = next;
    }
    drop(permit);
    assert_eq!(
        order,
        [
            "debate round",
            "newest synthesis",
            "older first stage",
            "older again",
            "newer first stage"
        ]
    );
    assert_eq!(in_use(&queue), 0);
}

#[test]
fn a_waiter_knows_how_many_requests_are_ahead_of_it() {
    let queue = PermitQueue::new(2);
    let _a = queue.acquire(at(0, 0)).ok().unwrap();
    let _b = queue.acquire(at(0, 0)).ok().unwrap();
    let first = queued(&queue, at(0, 3));
    assert_eq!(first.behind(), 2, "the two in flight");
    let second = queued(&queue, at(0, 4));
    assert_eq!(second.behind(), 3);
    let synthesis = queued(&queue, at(1, 9));
    assert_eq!(synthesis.behind(), 2, "it goes ahead of both waiters");
}

#[test]
fn a_waiter_dropped_before_its_turn_leaves_the_queue() {
    let queue = PermitQueue::new(1);
    let held = queue.acquire(at(0, 0)).ok().unwrap();
    let gone = queued(&queue, at(1, 0));
    let mut stays = queued(&queue, at(0, 1));
    drop(gone);
    assert_eq!(queue.waiting(), 1);
    drop(held);
    let permit = (&mut stays).now_or_never().expect("next in line");
    assert_eq!(in_use(&queue), 1);
    drop(permit);
    assert_eq!(in_use(&queue), 0);
}

#[test]
fn a_waiter_dropped_after_its_turn_came_passes_the_permit_on() {
    let queue = PermitQueue::new(1);
    let held = queue.acquire(at(0, 0)).ok().unwrap();
    let first = queued(&queue, at(0, 1));
    let mut second = queued(&queue, at(0, 2));
    drop(held);
    // `first` was granted the permit but never took it.
    assert!((&mut second).now_or_never().is_none());
    drop(first);
    let permit = (&mut second).now_or_never().expect("passed on");
    drop(permit);
    assert_eq!(in_use(&queue), 0);
    assert!(queue.acquire(at(0, 3)).is_ok(), "no permit leaked");
}

#[tokio::test]
async fn cancelled_waits_leak_no_permits_under_load() {
    let queue = Arc::new(PermitQueue::new(3));
    let peak = Arc::new(AtomicUsize::new(0));
    let now = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..60u64)
        .map(|i| {
            let (queue, peak, now) = (queue.clone(), peak.clone(), now.clone());
            tokio::spawn(async move {
                let wait = async {
                    let permit = match queue.acquire(at((i % 3) as u32, i)) {
                        Ok(p) => p,
                        Err(w) => w.await,
                    };
                    // Counted while the permit is held, however it ends.
                    struct Held<'a>(&'a AtomicUsize);
                    impl Drop for Held<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                    let held = Held(&now);
                    peak.fetch_max(in_flight, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    drop(held);
                    drop(permit);
                };
                // Every third gives up early: waiting, or holding a permit.
                if i % 3 == 0 {
                    let _ = tokio::time::timeout(Duration::from_millis(i % 7), wait).await;
                } else {
                    wait.await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert!(peak.load(Ordering::SeqCst) <= 3);
    assert_eq!(queue.waiting(), 0);
    assert_eq!(in_use(&queue), 0);
    assert!(queue.lock().granted.is_empty());
}

#[test]
fn a_429_halves_the_limit_once_per_window_and_successes_grow_it_back() {
    let queue = PermitQueue::new(8);
    let permits: Vec<Permit> = (0..8)
        .map(|_| queue.acquire(at(0, 0)).ok().unwrap())
        .collect();
    // All eight were sent under the limit of 8; all come back 429.
    for permit in &permits {
        permit.rate_limited();
    }
    assert_eq!(queue.limit(), 4, "halved once, not eight times");
    drop(permits);

    // A request sent under the new limit says 429 again: halve again.
    let permit = queue.acquire(at(0, 0)).ok().unwrap();
    permit.rate_limited();
    assert_eq!(queue.limit(), 2);
    drop(permit);
    for _ in 0..3 {
        let permit = queue.acquire(at(0, 0)).ok().unwrap();
        permit.rate_limited();
    }
    assert_eq!(queue.limit(), 1, "never below one");

    // Grows by one per window of `limit` successes.
    let mut grown = vec![queue.limit()];
    for _ in 0..(1 + 2 + 3 + 4 + 5 + 6 + 7 + 3) {
        let permit = queue.acquire(at(0, 0)).ok().unwrap();
        permit.succeeded();
        drop(permit);
        if grown.last() != Some(&queue.limit()) {
            grown.push(queue.limit());
        }
    }
    assert_eq!(
        grown,
        [1, 2, 3, 4, 5, 6, 7, 8],
        "up to max_concurrency, no further"
    );
}

#[test]
fn a_shrunk_limit_holds_waiters_until_enough_permits_return_and_growth_lets_them_in() {
    let queue = PermitQueue::new(2);
    let a = queue.acquire(at(0, 0)).ok().unwrap();
    let b = queue.acquire(at(0, 0)).ok().unwrap();
    let mut waiter = queued(&queue, at(0, 1));
    a.rate_limited();
    assert_eq!(queue.limit(), 1);
    drop(a);
    // One is still in flight, and the limit is one.
    assert!((&mut waiter).now_or_never().is_none());
    // A success grows the limit back to two: the waiter's turn comes.
    b.succeeded();
    assert_eq!(queue.limit(), 2);
    let permit = (&mut waiter).now_or_never().expect("let in by the growth");
    drop(b);
    drop(permit);
    assert_eq!(in_use(&queue), 0);
}
