//! The local cache in front of the shared limits: batches of requests
//! and tokens taken from the database and used for `BATCH_LIFE`,
//! concurrency slots kept for `LINGER` after their request, and the task
//! that gives back what is not used.

use std::sync::{Arc, Weak};

use tokio::time::{Instant, sleep};

use super::{BATCH_LIFE, Batch, Inner, Kind, LINGER, SLOT_POLL, batch_index};
use crate::llm::types::{Attempts, QueueWait};

impl Inner {
    /// Takes `n` of a window kind from the shared limit (a cached batch
    /// when it has enough); the hold it came from, or `None` when not
    /// shared (or the shared limits failed).
    pub(super) async fn take_window<'a>(
        self: &Arc<Self>,
        kind: Kind,
        n: u64,
        wait: &mut Option<QueueWait<'a>>,
        attempts: &'a Attempts,
    ) -> Option<String> {
        let limit = match kind {
            Kind::Requests => self.requests_per_minute,
            _ => self.tokens_per_minute,
        }?;
        loop {
            self.shared_on()?;
            if let Some(hold) = self.from_batch(kind, n) {
                return Some(hold);
            }
            let taking = self.taking.lock().await;
            if let Some(hold) = self.from_batch(kind, n) {
                return Some(hold);
            }
            let shared = self.shared_on()?.clone();
            let asked = Instant::now();
            let taken = self
                .call(shared.take(&self.scope, kind, n, limit / 20, limit))
                .await?;
            drop(taking);
            self.note_backoff(taken.backoff);
            self.tidy();
            if taken.granted >= n {
                let mut state = self.lock();
                state.batches[batch_index(kind)] = Some(Batch {
                    hold: taken.hold.clone(),
                    left: taken.granted - n,
                    until: asked + BATCH_LIFE,
                });
                return Some(taken.hold);
            }
            wait.get_or_insert_with(|| attempts.queue_wait());
            sleep(taken.retry_in.clamp(SLOT_POLL, BATCH_LIFE)).await;
        }
    }

    /// `n` from the cached batch of `kind`, if it is live and has enough;
    /// a batch that has not is given back.
    pub(super) fn from_batch(self: &Arc<Self>, kind: Kind, n: u64) -> Option<String> {
        let stale = {
            let mut state = self.lock();
            let slot = &mut state.batches[batch_index(kind)];
            match slot {
                Some(batch) if batch.until > Instant::now() && batch.left >= n => {
                    batch.left -= n;
                    return Some(batch.hold.clone());
                }
                _ => slot.take(),
            }
        };
        if let Some(batch) = stale {
            self.give_back(&batch.hold, batch.left);
        }
        None
    }

    pub(super) fn give_back(self: &Arc<Self>, hold: &str, amount: u64) {
        if amount == 0 {
            return;
        }
        self.adjust(hold, -i64::try_from(amount).unwrap_or(i64::MAX));
    }

    pub(super) fn adjust(self: &Arc<Self>, hold: &str, by: i64) {
        let Some(shared) = self.shared.get() else {
            return;
        };
        let work = shared.adjust(hold, by);
        let inner = self.clone();
        tokio::spawn(async move {
            inner.call(work).await;
        });
    }

    /// A shared concurrency slot: a kept idle one, or a new one once one
    /// is free on the database. False when not shared.
    pub(super) async fn take_slot<'a>(
        self: &Arc<Self>,
        wait: &mut Option<QueueWait<'a>>,
        attempts: &'a Attempts,
    ) -> bool {
        loop {
            if self.shared_on().is_none() {
                return false;
            }
            if self.idle_slot() {
                return true;
            }
            let taking = self.taking.lock().await;
            if self.idle_slot() {
                return true;
            }
            let Some(shared) = self.shared_on().cloned() else {
                return false;
            };
            let Some(taken) = self
                .call(shared.take(&self.scope, Kind::Concurrency, 1, 0, self.max_concurrency))
                .await
            else {
                return false;
            };
            drop(taking);
            self.note_backoff(taken.backoff);
            if taken.granted >= 1 {
                self.lock().slots_hold = Some(taken.hold);
                self.tidy();
                return true;
            }
            wait.get_or_insert_with(|| attempts.queue_wait());
            sleep(SLOT_POLL).await;
        }
    }

    fn idle_slot(&self) -> bool {
        let mut state = self.lock();
        if state.slots_idle > 0 {
            state.slots_idle -= 1;
            return true;
        }
        false
    }

    /// Starts (once) the task that gives back what is not used: idle slots
    /// after `LINGER`, the rest of spent batches. It ends with the limiter.
    pub(super) fn tidy(self: &Arc<Self>) {
        {
            let mut state = self.lock();
            if std::mem::replace(&mut state.tidying, true) {
                return;
            }
        }
        let weak: Weak<Inner> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                sleep(LINGER / 2).await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let mut back = Vec::new();
                {
                    let mut state = inner.lock();
                    let now = Instant::now();
                    if state.slots_idle > 0
                        && state
                            .idle_since
                            .is_some_and(|at| now.duration_since(at) >= LINGER)
                        && let Some(hold) = state.slots_hold.clone()
                    {
                        back.push((hold, std::mem::take(&mut state.slots_idle)));
                    }
                    for slot in &mut state.batches {
                        if slot.as_ref().is_some_and(|b| b.until <= now)
                            && let Some(batch) = slot.take()
                        {
                            back.push((batch.hold, batch.left));
                        }
                    }
                }
                for (hold, amount) in back {
                    inner.give_back(&hold, amount);
                }
            }
        });
    }
}
