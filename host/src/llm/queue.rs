//! A provider's permits to send: at most `limit` requests in flight, the
//! rest waiting in an order that finishes runs rather than starts them —
//! calls of a later stage of their run first (a synthesis, a debate round,
//! a re-synthesis before any run's first panel call: roughly "least work
//! left first"), then the oldest run, then first come. The limit itself
//! follows the provider's rate limiting (AIMD): a 429 halves it (at least
//! 1), and each window of `limit` successes grows it back by one, up to the
//! configured `max_concurrency`.
//!
//! Cancellation-safe: a waiter dropped before its turn leaves the queue,
//! and one dropped after its turn came passes the permit on.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

/// Where a request stands among those waiting for a provider's permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Priority {
    /// How far along its run is: 0 for a run's first batch of calls, one
    /// more for each batch after (a re-synthesis starts at 1). Higher goes
    /// first.
    pub stage_rank: u32,
    /// When its run started (see [`next_run_seq`]). Lower goes first.
    pub run_seq: u64,
}

static NEXT_RUN: AtomicU64 = AtomicU64::new(0);

/// A number for a run starting now: runs started later get higher ones.
pub fn next_run_seq() -> u64 {
    NEXT_RUN.fetch_add(1, Ordering::Relaxed)
}

impl Priority {
    /// The first stage of a run starting now (a call made outside any run).
    pub fn new_run() -> Self {
        Self {
            stage_rank: 0,
            run_seq: next_run_seq(),
        }
    }
}

/// Queue order: higher stage first, then older run, then first come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    stage: Reverse<u32>,
    run_seq: u64,
    ticket: u64,
}

pub struct PermitQueue {
    max: usize,
    state: Mutex<State>,
}

struct State {
    /// Permits that may be in use now: `max`, less after 429s.
    limit: usize,
    in_use: usize,
    waiting: BTreeMap<Key, Option<Waker>>,
    /// Tickets whose turn came, until their waiter takes the permit.
    granted: Vec<u64>,
    next_ticket: u64,
    /// Successes since the limit last changed.
    successes: usize,
    /// Bumped at each decrease: a 429 of a request sent before the last
    /// decrease says nothing new and does not halve again.
    epoch: u64,
}

impl State {
    /// Hands free permits to the first waiters; returns whom to wake.
    fn grant(&mut self) -> Vec<Waker> {
        let mut wake = Vec::new();
        while self.in_use < self.limit {
            let Some((key, waker)) = self.waiting.pop_first() else {
                break;
            };
            self.in_use += 1;
            self.granted.push(key.ticket);
            wake.extend(waker);
        }
        wake
    }
}

fn wake(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

impl PermitQueue {
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            max,
            state: Mutex::new(State {
                limit: max,
                in_use: 0,
                waiting: BTreeMap::new(),
                granted: Vec::new(),
                next_ticket: 0,
                successes: 0,
                epoch: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A permit now, or a place in the queue to await one.
    pub fn acquire(&self, priority: Priority) -> Result<Permit<'_>, Waiting<'_>> {
        let mut state = self.lock();
        if state.in_use < state.limit {
            // Free permits mean nobody waits (`grant` runs on every change).
            state.in_use += 1;
            return Ok(Permit {
                queue: self,
                epoch: state.epoch,
            });
        }
        let key = Key {
            stage: Reverse(priority.stage_rank),
            run_seq: priority.run_seq,
            ticket: state.next_ticket,
        };
        state.next_ticket += 1;
        let ahead = state.waiting.range(..key).count();
        state.waiting.insert(key, None);
        Err(Waiting {
            queue: self,
            key: Some(key),
            behind: state.in_use + ahead,
        })
    }

    #[cfg(test)]
    /// Permits that may be in use now (`max_concurrency`, or less after
    /// 429s).
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    #[cfg(test)]
    /// Requests waiting for a permit.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    fn release(&self) {
        let wakers = {
            let mut state = self.lock();
            state.in_use -= 1;
            state.grant()
        };
        wake(wakers);
    }
}

/// A place in the queue; resolves to the permit when its turn comes.
pub struct Waiting<'a> {
    queue: &'a PermitQueue,
    /// `None` once the permit is taken.
    key: Option<Key>,
    behind: usize,
}

impl Waiting<'_> {
    /// Requests ahead of this one when it joined the queue: those in
    /// flight and those waiting before it.
    pub fn behind(&self) -> usize {
        self.behind
    }
}

impl<'a> Future for Waiting<'a> {
    type Output = Permit<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Permit<'a>> {
        let Some(key) = self.key else {
            panic!("a Waiting polled after it gave its permit");
        };
        let mut state = self.queue.lock();
        if let Some(at) = state.granted.iter().position(|t| *t == key.ticket) {
            state.granted.swap_remove(at);
            let epoch = state.epoch;
            drop(state);
            self.key = None;
            return Poll::Ready(Permit {
                queue: self.queue,
                epoch,
            });
        }
        if let Some(waker) = state.waiting.get_mut(&key) {
            match waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
        }
        Poll::Pending
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let wakers = {
            let mut state = self.queue.lock();
            if state.waiting.remove(&key).is_some() {
                return;
            }
            // Its turn came but nobody took the permit: pass it on.
            if let Some(at) = state.granted.iter().position(|t| *t == key.ticket) {
                state.granted.swap_remove(at);
            }
            state.in_use -= 1;
            state.grant()
        };
        wake(wakers);
    }
}

/// Leave to send one request; the next waiter's turn comes when it drops.
pub struct Permit<'a> {
    queue: &'a PermitQueue,
    /// The limit's epoch when the permit was given.
    epoch: u64,
}

impl Permit<'_> {
    /// The request was answered: a window of `limit` of these grows a
    /// reduced limit by one.
    pub fn succeeded(&self) {
        let queue = self.queue;
        let wakers = {
            let mut state = queue.lock();
            if state.limit >= queue.max {
                return;
            }
            state.successes += 1;
            if state.successes < state.limit {
                return;
            }
            state.limit += 1;
            state.successes = 0;
            tracing::debug!(
                limit = state.limit,
                "requests succeed again: one more may be in flight"
            );
            state.grant()
        };
        wake(wakers);
    }

    /// The provider said 429: halve the limit (at least 1), once for all
    /// the requests that were sent under the limit in force.
    pub fn rate_limited(&self) {
        let mut state = self.queue.lock();
        if state.epoch != self.epoch {
            return;
        }
        state.epoch += 1;
        state.limit = (state.limit / 2).max(1);
        state.successes = 0;
        tracing::info!(
            limit = state.limit,
            "the provider is rate limiting: fewer requests in flight until they succeed again"
        );
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.queue.release();
    }
}

#[cfg(test)]
mod tests;
