//! The UTC day and calendar month a client's budgets are counted in, and
//! when each resets, for the refusal's message.

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc};

use crate::client::Limits;
use crate::store::Period;

/// One budget of a client, in the period it counts.
pub struct Counted {
    pub period: Period,
    /// `daily` or `monthly`.
    pub name: &'static str,
    /// The config key.
    pub key: &'static str,
    /// When it resets, RFC 3339.
    pub resets: String,
}

/// The budgets `limits` sets, as of `now` (unix ms).
pub fn of(limits: &Limits, now: i64) -> Vec<Counted> {
    let today = DateTime::<Utc>::from_timestamp_millis(now)
        .unwrap_or_default()
        .date_naive();
    let month = NaiveDate::from_ymd_opt(today.year(), today.month(), 1).unwrap_or(today);
    let mut counted = Vec::new();
    if let Some(usd) = limits.usd_per_day {
        counted.push(Counted {
            period: Period {
                since: start(today),
                limit_usd: usd,
            },
            name: "daily",
            key: "max_usd_per_day",
            resets: shown(today.checked_add_days(Days::new(1))),
        });
    }
    if let Some(usd) = limits.usd_per_month {
        counted.push(Counted {
            period: Period {
                since: start(month),
                limit_usd: usd,
            },
            name: "monthly",
            key: "max_usd_per_month",
            resets: shown(month.checked_add_months(Months::new(1))),
        });
    }
    counted
}

/// When the UTC day of `now` (unix ms) began, unix ms.
pub fn day_start(now: i64) -> i64 {
    start(
        DateTime::<Utc>::from_timestamp_millis(now)
            .unwrap_or_default()
            .date_naive(),
    )
}

fn start(day: NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0)
        .map_or(0, |t| t.and_utc().timestamp_millis())
}

fn shown(day: Option<NaiveDate>) -> String {
    day.and_then(|d| d.and_hms_opt(0, 0, 0)).map_or_else(
        || "-".into(),
        |t| t.and_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}
