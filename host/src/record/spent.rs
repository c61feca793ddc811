//! Whether a call's cost is unknown: the one rule behind a run's total
//! (`Totals::of`), the sum a failed run is settled with against budgets
//! (`app::spend`), and what the result, store, viewer and metrics show.
//!
//! A call whose provider reported no cost, and whose model has no prices
//! for chorus to estimate one with, may have cost anything up to its worst
//! case — unless it was never billed: never sent (skipped), answered from
//! the cache or an earlier run, or refused by the provider before any
//! model ran (an HTTP error status, no connection, no key, no such model).
//! Unknown is never shown as $0, and a budget counts its worst case. A
//! call still running counts for nothing yet (a run's total so far).

use super::CallRecord;

/// Failures that happen before a model runs, so nothing was billed.
const NEVER_BILLED: [&str; 5] = [
    "http-status",
    "connection",
    "missing-api-key",
    "unknown-model",
    "rate-limited",
];

impl CallRecord {
    /// True when this call may have been billed and its cost is not known.
    pub fn cost_unknown(&self) -> bool {
        // A call still running has no cost yet: a run's total is what
        // its finished calls cost so far.
        if self.cost_usd.is_some()
            || self.status == "skipped"
            || self.status == "running"
            || self.cached_from.is_some()
            || self.reused_from.is_some()
        {
            return false;
        }
        // A failure that streamed nothing before it came was not billed;
        // one that streamed (tokens counted) was.
        match &self.error {
            Some(error) if NEVER_BILLED.contains(&error.kind.as_str()) => {
                self.completion_tokens.unwrap_or(0) > 0
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::record::{CallError, CallRecord, Totals};

    fn call(status: &str, cost_usd: Option<f64>, error: Option<&str>) -> CallRecord {
        CallRecord {
            status: status.into(),
            cost_usd,
            prompt_tokens: Some(10),
            completion_tokens: Some(5),
            error: error.map(|kind| CallError {
                kind: kind.into(),
                status: None,
                message: String::new(),
            }),
            ..CallRecord::default()
        }
    }

    #[test]
    fn an_unknown_cost_makes_the_total_unknown_never_zero() {
        let known = [
            call("ok", Some(0.25), None),
            call("skipped", None, Some("over-budget")),
        ];
        assert_eq!(Totals::of(&known).cost_usd, Some(0.25));
        let mut refused = call("failed", None, Some("http-status"));
        refused.completion_tokens = None;
        assert_eq!(
            Totals::of(&[known[0].clone(), refused]).cost_usd,
            Some(0.25),
            "refused before any model ran: nothing billed"
        );
        let unpriced = call("ok", None, None);
        assert!(unpriced.cost_unknown());
        let totals = Totals::of(&[known[0].clone(), unpriced]);
        assert_eq!(totals.cost_usd, None, "an answer with no cost: unknown");
        let json = serde_json::to_value(&totals).unwrap();
        assert!(json["cost_usd"].is_null(), "shown as null, not 0: {json}");
        assert_eq!(
            Totals::of(&[]).cost_usd,
            Some(0.0),
            "no calls: nothing spent"
        );
    }

    #[test]
    fn estimated_tokens_are_marked_in_the_totals() {
        let mut guessed = call("ok", Some(0.1), None);
        guessed.tokens_estimated = true;
        let totals = Totals::of(&[call("ok", Some(0.1), None), guessed]);
        assert!(totals.tokens_estimated);
        let json = serde_json::to_value(&totals).unwrap();
        assert_eq!(json["tokens_estimated"], true);
        assert!(!Totals::of(&[call("ok", Some(0.1), None)]).tokens_estimated);
    }
}
