//! The fan-out policy's settings: how many answers are enough (`quorum`),
//! how long the rest may take once they are in (`straggler_grace`), and how
//! much of the run's deadline is kept for the merge (`merge_reserve`).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::check::{Invalid, MAX_TIMEOUT, duration_or_zero};

/// `[fan_out]`: the defaults every pipeline uses.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FanOut {
    /// Answers after which the stragglers get only `straggler_grace` more.
    pub quorum: Quorum,
    /// How long calls still running may take once the quorum has answered;
    /// then they are cut, and the answer is built from what arrived.
    #[serde(with = "humantime_serde")]
    pub straggler_grace: Duration,
    /// Time of the run's deadline kept for the merge: the fan-out (and any
    /// model call before the synthesizer) must end this much earlier.
    pub merge_reserve: MergeReserve,
}

impl Default for FanOut {
    fn default() -> Self {
        Self {
            quorum: Quorum::Majority,
            straggler_grace: Duration::from_secs(10),
            merge_reserve: MergeReserve::Share(25),
        }
    }
}

/// `[pipelines.NAME.fan_out]`: any key left out comes from `[fan_out]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FanOutOverride {
    #[serde(default)]
    pub quorum: Option<Quorum>,
    #[serde(default, with = "humantime_serde")]
    pub straggler_grace: Option<Duration>,
    #[serde(default)]
    pub merge_reserve: Option<MergeReserve>,
}

impl FanOut {
    /// `Err((key, message))` when a key is out of its bounds (a pipeline's
    /// overrides are checked with the pipeline).
    pub(super) fn check(&self) -> Result<(), Invalid> {
        duration_or_zero("fan_out.straggler_grace", self.straggler_grace, MAX_TIMEOUT)
    }

    /// These defaults with a pipeline's overrides applied.
    pub fn with(&self, over: &FanOutOverride) -> Self {
        Self {
            quorum: over.quorum.unwrap_or(self.quorum),
            straggler_grace: over.straggler_grace.unwrap_or(self.straggler_grace),
            merge_reserve: over.merge_reserve.unwrap_or(self.merge_reserve),
        }
    }
}

/// How many successful answers make a quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quorum {
    /// More than half of the batch.
    Majority,
    /// Every call: nobody is cut (the deadline still holds).
    All,
    /// This many (the whole batch when it is smaller).
    Count(u32),
}

/// The largest numeric quorum accepted; more than any batch can have.
pub const MAX_QUORUM: u32 = 10_000;

impl Quorum {
    /// The number of answers that make a quorum in a batch of `n`.
    pub fn of(self, n: usize) -> usize {
        match self {
            Self::Majority => n / 2 + 1,
            Self::All => n,
            Self::Count(k) => (k as usize).min(n),
        }
        .min(n)
    }
}

impl fmt::Display for Quorum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Majority => f.write_str("majority"),
            Self::All => f.write_str("all"),
            Self::Count(k) => write!(f, "{k}"),
        }
    }
}

impl<'de> Deserialize<'de> for Quorum {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct QuorumVisitor;
        impl Visitor<'_> for QuorumVisitor {
            type Value = Quorum;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(
                    f,
                    "\"majority\", \"all\", or a number of answers from 1 to {MAX_QUORUM}"
                )
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quorum, E> {
                match u32::try_from(v) {
                    Ok(k) if (1..=MAX_QUORUM).contains(&k) => Ok(Quorum::Count(k)),
                    _ => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quorum, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quorum, E> {
                match v {
                    "majority" => Ok(Quorum::Majority),
                    "all" => Ok(Quorum::All),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        deserializer.deserialize_any(QuorumVisitor)
    }
}

/// Time kept for the merge: a fixed duration, or a share of the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeReserve {
    Fixed(Duration),
    /// Percent of the run's deadline, 0 to 90.
    Share(u8),
}

impl MergeReserve {
    /// The reserve out of a deadline of `run_timeout`.
    pub fn of(self, run_timeout: Duration) -> Duration {
        match self {
            Self::Fixed(d) => d.min(run_timeout),
            Self::Share(percent) => run_timeout.mul_f64(f64::from(percent) / 100.0),
        }
    }
}

impl fmt::Display for MergeReserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(d) => f.write_str(&crate::config::show_duration(*d)),
            Self::Share(p) => write!(f, "{p}%"),
        }
    }
}

impl<'de> Deserialize<'de> for MergeReserve {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ReserveVisitor;
        impl Visitor<'_> for ReserveVisitor {
            type Value = MergeReserve;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a duration such as \"60s\", or a share of the deadline from \"0%\" to \"90%\"",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<MergeReserve, E> {
                if let Some(number) = v.trim().strip_suffix('%') {
                    return match number.trim().parse::<u8>() {
                        Ok(p) if p <= 90 => Ok(MergeReserve::Share(p)),
                        _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                    };
                }
                humantime::parse_duration(v)
                    .map(MergeReserve::Fixed)
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }
        deserializer.deserialize_str(ReserveVisitor)
    }
}
