//! What each client's runs hold against its budgets, kept in the store so
//! that every instance sharing it sees the same sums. A run is admitted by
//! one transaction that sums the client's spend in each budget's period —
//! a finished run's cost, or a running run's worst case — and, when the
//! run's own worst case still fits, records it: two instances admitting
//! runs of one client at once take turns (SQLite: an immediate write
//! transaction; PostgreSQL: a per-client advisory lock), so together they
//! cannot overspend by more than one run's worst case. When the run ends
//! its cost replaces its worst case.

use std::collections::HashMap;
use std::sync::Mutex;

/// One budget a run must fit in: what was spent since `since` (unix ms)
/// plus the run's worst case may not exceed `limit_usd`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    pub since: i64,
    pub limit_usd: f64,
}

/// A run asking to be admitted.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The reservation's id (settled by it).
    pub id: String,
    pub client: String,
    pub at: i64,
    pub worst_usd: f64,
    pub periods: Vec<Period>,
}

/// What the store decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Recorded; the spend in each period before this run.
    Admitted { spent: Vec<f64> },
    /// Period `period` (an index into the ask's) has `spent` already, and
    /// the run's worst case does not fit.
    Over { period: usize, spent: f64 },
}

impl Ask {
    /// Spend older than every period is no longer needed.
    pub fn forget_before(&self) -> i64 {
        self.periods
            .iter()
            .map(|p| p.since)
            .min()
            .unwrap_or(self.at)
    }

    /// The verdict, given what was spent in each period.
    pub fn judge(&self, spent: Vec<f64>) -> Verdict {
        for (i, (period, spent)) in self.periods.iter().zip(&spent).enumerate() {
            // A hair of tolerance, so that sums of float costs that exactly
            // reach the limit are not refused for rounding.
            if spent + self.worst_usd > period.limit_usd + 1e-9 {
                return Verdict::Over {
                    period: i,
                    spent: *spent,
                };
            }
        }
        Verdict::Admitted { spent }
    }
}

/// The SQL both backends sum a period with (`client`, `since` bound first
/// and second; SQLite's `?1`/`?2`, PostgreSQL's `$1`/`$2`).
pub fn sum_sql(placeholder: char) -> String {
    format!(
        "SELECT COALESCE(SUM(COALESCE(cost_usd, reserved_usd)), 0) FROM spend \
         WHERE client = {placeholder}1 AND at >= {placeholder}2"
    )
}

/// The ledger of a store kept in memory: this process's runs only.
#[derive(Default)]
pub struct Ledger {
    rows: Mutex<HashMap<String, Row>>,
}

struct Row {
    client: String,
    at: i64,
    reserved: f64,
    cost: Option<f64>,
}

impl Ledger {
    pub fn reserve(&self, ask: &Ask) -> Verdict {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        let forget = ask.forget_before();
        rows.retain(|_, row| row.client != ask.client || row.at >= forget);
        let spent = ask
            .periods
            .iter()
            .map(|period| {
                rows.values()
                    .filter(|r| r.client == ask.client && r.at >= period.since)
                    .map(|r| r.cost.unwrap_or(r.reserved))
                    .sum()
            })
            .collect();
        let verdict = ask.judge(spent);
        if matches!(verdict, Verdict::Admitted { .. }) {
            rows.insert(
                ask.id.clone(),
                Row {
                    client: ask.client.clone(),
                    at: ask.at,
                    reserved: ask.worst_usd,
                    cost: None,
                },
            );
        }
        verdict
    }

    pub fn settle(&self, id: &str, cost_usd: f64) {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(row) = rows.get_mut(id) {
            row.cost = Some(cost_usd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(id: &str, client: &str, worst: f64) -> Ask {
        Ask {
            id: id.into(),
            client: client.into(),
            at: 1_000,
            worst_usd: worst,
            periods: vec![
                Period {
                    since: 0,
                    limit_usd: 1.0,
                },
                Period {
                    since: 500,
                    limit_usd: 0.5,
                },
            ],
        }
    }

    #[test]
    fn worst_cases_hold_until_settled_and_clients_are_apart() {
        let ledger = Ledger::default();
        assert_eq!(
            ledger.reserve(&ask("a", "alice", 0.25)),
            Verdict::Admitted {
                spent: vec![0.0, 0.0]
            }
        );
        assert!(matches!(
            ledger.reserve(&ask("b", "alice", 0.25)),
            Verdict::Admitted { .. }
        ));
        assert_eq!(
            ledger.reserve(&ask("c", "alice", 0.25)),
            Verdict::Over {
                period: 1,
                spent: 0.5
            }
        );
        assert!(matches!(
            ledger.reserve(&ask("d", "bob", 0.25)),
            Verdict::Admitted { .. }
        ));
        ledger.settle("a", 0.05);
        assert!(matches!(
            ledger.reserve(&ask("e", "alice", 0.2)),
            Verdict::Admitted { .. }
        ));
    }
}
