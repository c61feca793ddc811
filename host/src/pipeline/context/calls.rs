//! The run's call budget (`limits.max_calls_per_run`) and its call ids:
//! every call the run makes — the fan-out's, the plugins' own, fallbacks —
//! takes one from the budget, and every call on record has an id.

use std::sync::atomic::{AtomicU32, Ordering};

pub(super) struct Calls {
    /// The budget: `limits.max_calls_per_run`.
    budget: u32,
    left: AtomicU32,
    /// Calls refused for the budget: counted, not recorded, so a plugin
    /// that keeps asking cannot grow the record.
    refused: AtomicU32,
    next_id: AtomicU32,
}

impl Calls {
    pub(super) fn new(budget: u32) -> Self {
        Self {
            budget,
            left: AtomicU32::new(budget),
            refused: AtomicU32::new(0),
            next_id: AtomicU32::new(0),
        }
    }

    pub(super) fn budget(&self) -> u32 {
        self.budget
    }

    /// Calls the run may still make.
    pub(super) fn left(&self) -> u32 {
        self.left.load(Ordering::Acquire)
    }

    /// Takes one call from the budget and numbers it; `None` when spent.
    pub(super) fn admit(&self) -> Option<u32> {
        self.take()?;
        Some(self.number())
    }

    /// Takes one call from the budget without a new id (a fallback keeps
    /// its seat's); `None` when spent.
    pub(super) fn take(&self) -> Option<()> {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .ok()
            .map(|_| ())
    }

    /// The next id, for a call recorded without being sent (left out for
    /// its attachments): it takes nothing from the budget.
    pub(super) fn number(&self) -> u32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// New ids follow `calls` already on record (a re-synthesis's reused
    /// ones).
    pub(super) fn number_after(&self, next: u32) {
        self.next_id.store(next, Ordering::Relaxed);
    }

    /// Counts a call refused for the budget.
    pub(super) fn refuse(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn refused(&self) -> u32 {
        self.refused.load(Ordering::Relaxed)
    }
}
