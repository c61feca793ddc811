//! A provider's limits besides its permit queue (`queue.rs`): requests and
//! tokens in any 60 s (`requests_per_minute`, `tokens_per_minute`) and a
//! backoff after a 429 that every request to the provider honours. Alone,
//! they hold per process. Given a [`Shared`] (the PostgreSQL store: see
//! `store/postgres/limits.rs`), these and `max_concurrency` hold across
//! every instance on it, through a local cache so that the common case
//! costs no database round trip: concurrency slots are kept for a moment
//! after a request ends for the next one, requests and tokens are taken a
//! small batch at a time (used within [`BATCH_LIFE`], the rest given back),
//! and the shared backoff is read at most every [`BACKOFF_FRESH`]. When the
//! database cannot be reached, the local limits alone hold (said once in
//! the log) until it can.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::{Instant, sleep, timeout};

use super::types::{Attempts, QueueWait};

/// How long a batch of requests or tokens taken from the shared limit may
/// be used; what is left then is given back.
pub const BATCH_LIFE: Duration = Duration::from_secs(1);
/// How stale the shared backoff may be when a request checks it.
pub const BACKOFF_FRESH: Duration = Duration::from_millis(500);
/// How long an idle concurrency slot is kept for the next request.
const LINGER: Duration = Duration::from_millis(200);
/// The longest a shared-limit round trip may take before the local limits
/// stand in for it.
const SHARED_TIMEOUT: Duration = Duration::from_secs(2);
/// After the shared limits failed, how long the local ones stand alone.
const SHARED_PAUSE: Duration = Duration::from_secs(5);
/// How often a request waiting for a shared slot asks again.
const SLOT_POLL: Duration = Duration::from_millis(50);
const MINUTE: Duration = Duration::from_secs(60);

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Concurrency,
    Requests,
    Tokens,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Concurrency => "concurrency",
            Kind::Requests => "requests",
            Kind::Tokens => "tokens",
        }
    }
}

/// What a take from the shared limits gave.
#[derive(Debug, Clone)]
pub struct Taken {
    /// Where it is held (to give some back); empty when nothing was.
    pub hold: String,
    /// All that was asked and perhaps some extra, or 0.
    pub granted: u64,
    /// When nothing was granted: when enough may be free again (zero:
    /// unknown, ask again soon).
    pub retry_in: Duration,
    /// How long the scope is still backed off after a 429.
    pub backoff: Duration,
}

/// Limits kept where every instance sees them (the PostgreSQL store).
pub trait Shared: Send + Sync {
    /// Takes `want` of `kind` of `scope`, and up to `extra` more while
    /// free, within `limit` — or nothing when `want` is not free.
    fn take(
        &self,
        scope: &str,
        kind: Kind,
        want: u64,
        extra: u64,
        limit: u64,
    ) -> BoxFuture<'static, Result<Taken, String>>;
    /// Moves a hold by `by` (negative: gives back).
    fn adjust(&self, hold: &str, by: i64) -> BoxFuture<'static, Result<(), String>>;
    /// How long `scope` is still backed off.
    fn backoff(&self, scope: &str) -> BoxFuture<'static, Result<Duration, String>>;
    /// Backs `scope` off for `wait` from now (unless it is for longer).
    fn back_off(&self, scope: &str, wait: Duration) -> BoxFuture<'static, Result<(), String>>;
    /// Where the limits are kept, for the log.
    fn describe(&self) -> String;
}

/// One provider's limits.
pub struct Limiter {
    inner: Arc<Inner>,
}

struct Inner {
    scope: String,
    max_concurrency: u64,
    requests_per_minute: Option<u64>,
    tokens_per_minute: Option<u64>,
    shared: OnceLock<Arc<dyn Shared>>,
    state: Mutex<State>,
    /// One shared take at a time per provider in this process.
    taking: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
}

#[derive(Default)]
struct State {
    /// What this process sent in the last minute: (when, id, amount).
    requests: VecDeque<(Instant, u64, u64)>,
    tokens: VecDeque<(Instant, u64, u64)>,
    backoff_until: Option<Instant>,
    backoff_checked: Option<Instant>,
    /// Shared concurrency slots held and not in use, since when.
    slots_idle: u64,
    idle_since: Option<Instant>,
    slots_hold: Option<String>,
    batches: [Option<Batch>; 2],
    /// While the shared limits failed: until when the local ones stand alone.
    shared_off_until: Option<Instant>,
    said_fallback: bool,
    tidying: bool,
}

struct Batch {
    hold: String,
    left: u64,
    until: Instant,
}

fn batch_index(kind: Kind) -> usize {
    usize::from(kind == Kind::Tokens)
}

/// Sum of a local window, dropping what is older than a minute.
fn window_wait(
    log: &mut VecDeque<(Instant, u64, u64)>,
    now: Instant,
    n: u64,
    limit: u64,
) -> Duration {
    while log
        .front()
        .is_some_and(|(at, _, _)| now.duration_since(*at) >= MINUTE)
    {
        log.pop_front();
    }
    let used: u64 = log.iter().map(|(_, _, a)| a).sum();
    if used.saturating_add(n) <= limit {
        return Duration::ZERO;
    }
    let mut over = used.saturating_add(n) - limit;
    for (at, _, amount) in log.iter() {
        over = over.saturating_sub(*amount);
        if over == 0 {
            return (*at + MINUTE).saturating_duration_since(now);
        }
    }
    MINUTE
}

/// Leave to send one request: its shared slot and its tokens, until it
/// is settled and dropped.
pub struct Ticket {
    inner: Arc<Inner>,
    slot: bool,
    /// Tokens reserved: (local entry id, shared hold, amount).
    tokens: Option<(u64, Option<String>, u64)>,
}

impl Limiter {
    pub fn new(scope: &str, config: &crate::config::Provider) -> Self {
        Self {
            inner: Arc::new(Inner {
                scope: scope.to_owned(),
                max_concurrency: config.max_concurrency as u64,
                requests_per_minute: config.requests_per_minute,
                tokens_per_minute: config.tokens_per_minute,
                shared: OnceLock::new(),
                state: Mutex::default(),
                taking: tokio::sync::Mutex::new(()),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// Counts these limits in `shared` too, from now on (once).
    pub fn share(&self, shared: Arc<dyn Shared>) {
        let _ = self.inner.shared.set(shared);
    }

    /// Waits until a request whose worst case is `worst_tokens` may be sent
    /// (counted in `attempts` as a queue wait if it had to wait at all).
    pub async fn admit(&self, worst_tokens: u64, attempts: &Attempts) -> Ticket {
        let inner = &self.inner;
        let mut wait: Option<QueueWait<'_>> = None;
        let worst_tokens = inner
            .tokens_per_minute
            .map_or(worst_tokens, |limit| worst_tokens.min(limit));
        inner.wait_backoff(&mut wait, attempts).await;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        loop {
            let pause = {
                let mut state = inner.lock();
                let now = Instant::now();
                let requests = inner.requests_per_minute.map_or(Duration::ZERO, |l| {
                    window_wait(&mut state.requests, now, 1, l)
                });
                let tokens = inner.tokens_per_minute.map_or(Duration::ZERO, |l| {
                    window_wait(&mut state.tokens, now, worst_tokens, l)
                });
                let pause = requests.max(tokens);
                if pause.is_zero() {
                    if inner.requests_per_minute.is_some() {
                        state.requests.push_back((now, id, 1));
                    }
                    if inner.tokens_per_minute.is_some() {
                        state.tokens.push_back((now, id, worst_tokens));
                    }
                }
                pause
            };
            if pause.is_zero() {
                break;
            }
            wait.get_or_insert_with(|| attempts.queue_wait());
            sleep(pause).await;
        }
        let mut ticket = Ticket {
            inner: inner.clone(),
            slot: false,
            tokens: None,
        };
        if inner.requests_per_minute.is_some() {
            inner
                .take_window(Kind::Requests, 1, &mut wait, attempts)
                .await;
        }
        if inner.tokens_per_minute.is_some() {
            let hold = inner
                .take_window(Kind::Tokens, worst_tokens, &mut wait, attempts)
                .await;
            ticket.tokens = Some((id, hold, worst_tokens));
        }
        ticket.slot = inner.take_slot(&mut wait, attempts).await;
        // A 429 heard while this one waited holds it too.
        inner.wait_backoff(&mut wait, attempts).await;
        ticket
    }

    /// The provider said 429 (come back after `wait`): every request to
    /// it waits that long, here and, when shared, on every instance.
    pub fn rate_limited(&self, wait: Duration) {
        let inner = &self.inner;
        {
            let mut state = inner.lock();
            let until = Instant::now() + wait;
            state.backoff_until = Some(state.backoff_until.map_or(until, |u| u.max(until)));
        }
        if let Some(shared) = inner.shared_on() {
            let back_off = shared.back_off(&inner.scope, wait);
            let inner = inner.clone();
            tokio::spawn(async move {
                if let Err(e) = back_off.await {
                    inner.fall_back(&e);
                }
            });
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared limits, unless there are none or they failed a moment ago.
    fn shared_on(&self) -> Option<&Arc<dyn Shared>> {
        let shared = self.shared.get()?;
        let mut state = self.lock();
        match state.shared_off_until {
            Some(until) if Instant::now() < until => None,
            Some(_) => {
                state.shared_off_until = None;
                Some(shared)
            }
            None => Some(shared),
        }
    }

    /// The shared limits failed: the local ones stand alone for a while.
    fn fall_back(&self, why: &str) {
        let mut state = self.lock();
        state.shared_off_until = Some(Instant::now() + SHARED_PAUSE);
        if !state.said_fallback {
            state.said_fallback = true;
            tracing::warn!(
                provider = %self.scope,
                "the limits shared with other instances cannot be reached ({why}): this instance counts its own requests against the provider's limits until they can"
            );
        }
    }

    /// The shared limits answered: say so if they had not.
    fn shared_back(&self) {
        let mut state = self.lock();
        if std::mem::take(&mut state.said_fallback) {
            tracing::info!(provider = %self.scope, "the limits shared with other instances are counted again");
        }
    }

    async fn call<T>(&self, work: BoxFuture<'static, Result<T, String>>) -> Option<T> {
        match timeout(SHARED_TIMEOUT, work).await {
            Ok(Ok(value)) => {
                self.shared_back();
                Some(value)
            }
            Ok(Err(e)) => {
                self.fall_back(&e);
                None
            }
            Err(_) => {
                self.fall_back("no answer within 2 s");
                None
            }
        }
    }

    fn note_backoff(&self, left: Duration) {
        let mut state = self.lock();
        let now = Instant::now();
        state.backoff_checked = Some(now);
        if !left.is_zero() {
            let until = now + left;
            state.backoff_until = Some(state.backoff_until.map_or(until, |u| u.max(until)));
        }
    }

    /// Waits out the provider's backoff, reading the shared one when the
    /// one known here is older than `BACKOFF_FRESH`.
    async fn wait_backoff<'a>(
        self: &Arc<Self>,
        wait: &mut Option<QueueWait<'a>>,
        attempts: &'a Attempts,
    ) {
        loop {
            let (left, check) = {
                let mut state = self.lock();
                let now = Instant::now();
                let left = state
                    .backoff_until
                    .map_or(Duration::ZERO, |u| u.saturating_duration_since(now));
                let stale = self.shared.get().is_some()
                    && state
                        .backoff_checked
                        .is_none_or(|at| now.duration_since(at) >= BACKOFF_FRESH);
                if stale {
                    // Checked by this request only: the others use what it finds.
                    state.backoff_checked = Some(now);
                }
                (left, stale)
            };
            if check
                && let Some(shared) = self.shared_on()
                && let Some(shared_left) = self.call(shared.backoff(&self.scope)).await
            {
                self.note_backoff(shared_left);
                if shared_left > left {
                    continue;
                }
            }
            if left.is_zero() {
                return;
            }
            wait.get_or_insert_with(|| attempts.queue_wait());
            sleep(left).await;
        }
    }
}

impl Ticket {
    /// The request is done, having used `tokens` (`None`: unknown, so its
    /// worst case stays counted).
    pub fn settle(&mut self, tokens: Option<u64>) {
        let (Some((id, hold, reserved)), Some(used)) = (self.tokens.take(), tokens) else {
            return;
        };
        let inner = &self.inner;
        {
            let mut state = inner.lock();
            if let Some(entry) = state.tokens.iter_mut().find(|(_, i, _)| *i == id) {
                entry.2 = used;
            }
        }
        let Some(hold) = hold else {
            return;
        };
        let by =
            i64::try_from(used).unwrap_or(i64::MAX) - i64::try_from(reserved).unwrap_or(i64::MAX);
        if by < 0 {
            let mut state = inner.lock();
            if let Some(batch) = state.batches[batch_index(Kind::Tokens)]
                .as_mut()
                .filter(|b| b.hold == hold && b.until > Instant::now())
            {
                // Still in its batch: the next request here uses it.
                batch.left += by.unsigned_abs();
                return;
            }
        }
        if by != 0 {
            inner.adjust(&hold, by);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.slot {
            let mut state = self.inner.lock();
            state.slots_idle += 1;
            state.idle_since = Some(Instant::now());
        }
    }
}

mod cache;
#[cfg(test)]
mod tests;
