//! What a run's calls have spent so far, summed from its events: what a
//! run that fails is settled with against its client's budgets (a run
//! that answers carries its own sum in its record).

use std::sync::{Arc, Mutex};

use crate::events::Event;
use crate::events::Progress;

/// The sum of the costs of a run's finished calls.
#[derive(Clone, Default)]
pub struct Spent(Arc<Mutex<Sum>>);

#[derive(Default)]
struct Sum {
    usd: f64,
    /// A call was sent whose cost is not known.
    unknown: bool,
}

impl Spent {
    /// The watcher that adds each finished call.
    pub fn watcher(&self) -> Progress {
        let sum = self.0.clone();
        Arc::new(move |event: Event| {
            if let Event::CallFinished(call) = &event {
                let mut sum = sum.lock().unwrap_or_else(|e| e.into_inner());
                match call.cost_usd {
                    Some(usd) => sum.usd += usd,
                    // Sent, and its cost not reported: it may have cost
                    // anything up to its worst case (`record::spent`).
                    None if call.cost_unknown() => sum.unknown = true,
                    // Never sent, or refused before any model ran.
                    None => {}
                }
            }
        })
    }

    /// What was spent; `None` when some call's cost is unknown.
    pub fn total(&self) -> Option<f64> {
        let sum = self.0.lock().unwrap_or_else(|e| e.into_inner());
        (!sum.unknown).then_some(sum.usd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::CallRecord;

    fn call(status: &str, cost_usd: Option<f64>) -> Event {
        Event::CallFinished(Arc::new(CallRecord {
            status: status.into(),
            cost_usd,
            ..CallRecord::default()
        }))
    }

    #[test]
    fn a_failed_run_is_settled_with_what_its_calls_spent() {
        let spent = Spent::default();
        let watch = spent.watcher();
        assert_eq!(spent.total(), Some(0.0), "nothing asked, nothing spent");
        watch(call("ok", Some(0.25)));
        watch(call("skipped", None));
        watch(call("ok", Some(0.5)));
        assert_eq!(spent.total(), Some(0.75));
        watch(call("failed", None));
        assert_eq!(spent.total(), None, "a cost unknown: the worst case holds");
    }
}
