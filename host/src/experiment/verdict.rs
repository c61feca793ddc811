//! Where an experiment stands, from its variants' numbers (`Tally`) and
//! what was decided before: each variant's mean rating with its anytime-
//! valid interval, cost, time and failures; the guardrails each breaks; a
//! winner when one is better than every other at the configured
//! confidence; and the share of traffic each variant gets now.

use serde::Serialize;

use super::sequence::{self, Interval};
use crate::config::{Experiment, Metric, MetricKind, Optimize};
use crate::store::experiments::{Decisions, Declared, Stopped, Tally};

/// Draws of the posteriors per estimate of each variant's chance of
/// being best.
const DRAWS: usize = 4000;

/// One variant as it stands.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    pub name: String,
    /// Its starting weight, as configured.
    pub weight: f64,
    /// The share of new runs it gets now (0 when stopped or beaten).
    pub share: f64,
    /// Runs that ended, and of them those that failed.
    pub runs: u64,
    pub failed: u64,
    pub failure_rate: Option<f64>,
    pub cost_per_run_usd: Option<f64>,
    pub p95_ms: Option<u64>,
    /// Runs rated on the metric, their mean (on the metric's own scale)
    /// and its interval at the experiment's confidence.
    pub rated: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// Why it no longer gets traffic, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Where the experiment stands as a whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Status {
    /// Traffic is shared (and, when adaptive, moving).
    Running,
    /// One variant serves all traffic.
    Winner { variant: String, said: String },
}

/// The experiment's standing, and the decisions to keep.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    pub adaptive: bool,
    pub confidence: f64,
    pub status: Status,
    pub variants: Vec<Variant>,
    /// What the experiment cannot do as configured, said out loud (a
    /// guardrail broken by the last variant running).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(skip)]
    pub decisions: Decisions,
    /// The metric's scale, and each variant's share of the error, for
    /// intervals drawn later (`band`).
    #[serde(skip)]
    scale: Option<Scale>,
    #[serde(skip)]
    alpha: f64,
}

/// A metric's ratings scaled to [0, 1], higher better.
#[derive(Debug, Clone, Copy)]
struct Scale {
    low: f64,
    high: f64,
    flip: bool,
}

impl Scale {
    fn of(metric: &Metric) -> Option<Scale> {
        let (low, high) = match metric.kind {
            MetricKind::Boolean => (0.0, 1.0),
            MetricKind::Float => (metric.min?, metric.max?),
        };
        Some(Scale {
            low,
            high,
            flip: metric.optimize == Optimize::Min,
        })
    }

    /// The sum of `n` ratings summing to `raw`, scaled.
    fn sum(&self, n: u64, raw: f64) -> f64 {
        let scaled = ((raw - n as f64 * self.low) / (self.high - self.low)).clamp(0.0, n as f64);
        if self.flip { n as f64 - scaled } else { scaled }
    }

    /// A scaled interval on the metric's own scale.
    fn unscaled(&self, interval: Interval) -> Interval {
        let interval = if self.flip {
            interval.flipped()
        } else {
            interval
        };
        interval.map(|x| self.low + x * (self.high - self.low))
    }
}

impl Verdict {
    /// Where `experiment` stands on `tallies`, given what was decided
    /// (`kept`) and the ratings' `metric`. `now` stamps new decisions.
    pub fn of(
        name: &str,
        experiment: &Experiment,
        metric: Option<&Metric>,
        tallies: &[Tally],
        kept: Option<Decisions>,
        now: i64,
    ) -> Verdict {
        let configured = experiment.variant_names();
        let mut decisions = match kept {
            Some(kept) if kept.variants == configured => kept,
            _ => Decisions {
                variants: configured.clone(),
                ..Decisions::default()
            },
        };
        let scale = metric.and_then(Scale::of);
        let alpha = (1.0 - experiment.confidence()) / configured.len() as f64;
        let zero = Tally::default();
        let mut notes = Vec::new();
        let mut variants: Vec<(Variant, Option<Interval>)> = experiment
            .variants
            .iter()
            .map(|(variant, weight)| {
                let tally = tallies
                    .iter()
                    .find(|t| &t.variant == variant)
                    .unwrap_or(&zero);
                let scaled = scale.as_ref().map(|scale| {
                    sequence::interval(tally.rated, scale.sum(tally.rated, tally.value_sum), alpha)
                });
                let runs = (tally.runs > 0).then_some(tally.runs as f64);
                let row = Variant {
                    name: variant.clone(),
                    weight: *weight,
                    share: 0.0,
                    runs: tally.runs,
                    failed: tally.failed,
                    failure_rate: runs.map(|runs| tally.failed as f64 / runs),
                    cost_per_run_usd: runs.map(|runs| tally.cost_usd / runs),
                    p95_ms: tally.p95_ms,
                    rated: tally.rated,
                    mean: (tally.rated > 0).then(|| tally.value_sum / tally.rated as f64),
                    interval: scale.as_ref().zip(scaled).filter(|_| tally.rated > 0).map(
                        |(scale, i)| {
                            let i = scale.unscaled(i);
                            [i.low, i.high]
                        },
                    ),
                    stopped: None,
                };
                (row, scaled)
            })
            .collect();
        guard(experiment, &mut variants, &mut decisions, &mut notes, now);
        for (row, _) in &mut variants {
            row.stopped = decisions.stopped.get(&row.name).map(|s| s.reason.clone());
        }
        if experiment.adaptive && decisions.winner.is_none() {
            decisions.winner = winner(experiment, &variants, now);
        }
        let status = match &decisions.winner {
            Some(declared) => Status::Winner {
                variant: declared.variant.clone(),
                said: declared.said.clone(),
            },
            None => Status::Running,
        };
        share(experiment, &status, &mut variants, scale.as_ref());
        Verdict {
            scale,
            alpha,
            name: name.to_owned(),
            metric: experiment.metric.clone(),
            adaptive: experiment.adaptive,
            confidence: experiment.confidence(),
            status,
            variants: variants.into_iter().map(|(row, _)| row).collect(),
            notes,
            decisions,
        }
    }

    /// The variant a new run gets, for `u` drawn uniformly from [0, 1).
    pub fn choose(&self, u: f64) -> &str {
        let mut left = u;
        let serving = self.variants.iter().filter(|v| v.share > 0.0);
        let mut last = None;
        for variant in serving {
            if left < variant.share {
                return &variant.name;
            }
            left -= variant.share;
            last = Some(&variant.name);
        }
        last.map_or_else(|| self.variants[0].name.as_str(), String::as_str)
    }

    /// The interval, on the metric's scale, of a mean of `n` ratings that
    /// is `mean`: the experiment's, at that many ratings (for a plot over
    /// time). `None` when the metric has no bounds.
    pub fn band(&self, n: u64, mean: f64) -> Option<[f64; 2]> {
        let scale = self.scale?;
        let sum = scale.sum(n, mean * n as f64);
        let interval = scale.unscaled(sequence::interval(n, sum, self.alpha));
        Some([interval.low, interval.high])
    }

    /// Whether `variant` may serve a run now (a conversation keeps its
    /// variant unless that variant was stopped).
    pub fn serves(&self, variant: &str) -> bool {
        self.variants
            .iter()
            .any(|v| v.name == variant && v.stopped.is_none())
    }

    /// The status in a few words: `running`, `winner: X`, with stops.
    pub fn status_line(&self) -> String {
        let mut line = match &self.status {
            Status::Running => "running".to_owned(),
            Status::Winner { variant, .. } => format!("winner: {variant}"),
        };
        for variant in &self.variants {
            if let Some(reason) = &variant.stopped {
                line.push_str(&format!("; {} stopped: {reason}", variant.name));
            }
        }
        line
    }
}

/// Stops each running variant that breaks a guardrail, but never the last
/// one running (that is said in `notes` instead).
fn guard(
    experiment: &Experiment,
    variants: &mut [(Variant, Option<Interval>)],
    decisions: &mut Decisions,
    notes: &mut Vec<String>,
    now: i64,
) {
    let rails = &experiment.guardrails;
    for (row, _) in variants.iter() {
        if decisions.stopped.contains_key(&row.name) || row.runs < rails.min_runs() {
            continue;
        }
        let mut broken = Vec::new();
        if let (Some(most), Some(cost)) = (rails.max_cost_usd, row.cost_per_run_usd)
            && cost > most
        {
            broken.push(format!(
                "cost ${cost:.4} per run over {} runs, above max_cost_usd ${most}",
                row.runs
            ));
        }
        if let (Some(most), Some(rate)) = (rails.max_failure_rate, row.failure_rate)
            && rate > most
        {
            broken.push(format!(
                "{} of {} runs failed ({:.0} %), above max_failure_rate {most}",
                row.failed,
                row.runs,
                rate * 100.0
            ));
        }
        if let (Some(most), Some(p95)) = (rails.max_p95_seconds, row.p95_ms)
            && p95 as f64 / 1000.0 > most
        {
            broken.push(format!(
                "p95 time {:.1} s, above max_p95_seconds {most}",
                p95 as f64 / 1000.0
            ));
        }
        if broken.is_empty() {
            continue;
        }
        let reason = format!("guardrail: {}", broken.join("; "));
        let running = variants.len() - decisions.stopped.len();
        if running <= 1 {
            notes.push(format!(
                "{} breaks a guardrail ({reason}) but is the last variant running: it keeps serving",
                row.name
            ));
            continue;
        }
        decisions
            .stopped
            .insert(row.name.clone(), Stopped { reason, at: now });
    }
}

/// The variant whose interval lies above every other running variant's,
/// if one does.
fn winner(
    experiment: &Experiment,
    variants: &[(Variant, Option<Interval>)],
    now: i64,
) -> Option<Declared> {
    let running: Vec<&(Variant, Option<Interval>)> = variants
        .iter()
        .filter(|(row, _)| row.stopped.is_none())
        .collect();
    if running.len() < 2 {
        return None;
    }
    let (best, best_interval) = running
        .iter()
        .filter_map(|(row, interval)| Some((row, (*interval)?)))
        .max_by(|a, b| a.1.low.total_cmp(&b.1.low))?;
    let beats_all = running
        .iter()
        .filter(|(row, _)| row.name != best.name)
        .all(|(_, interval)| interval.is_some_and(|i| i.high < best_interval.low));
    if !beats_all {
        return None;
    }
    let said = running
        .iter()
        .map(|(row, _)| describe(row))
        .collect::<Vec<_>>()
        .join("; ");
    Some(Declared {
        variant: best.name.clone(),
        said: format!(
            "{} is better on {} at {:.0} % confidence (anytime-valid): {said}",
            best.name,
            experiment.metric.as_deref().unwrap_or("the metric"),
            experiment.confidence() * 100.0
        ),
        at: now,
    })
}

/// A variant's rating in words: `ask: mean 0.84 [0.71, 0.93] over 60 rated runs`.
pub fn describe(row: &Variant) -> String {
    match (row.mean, row.interval) {
        (Some(mean), Some([low, high])) => format!(
            "{}: mean {mean:.3} [{low:.3}, {high:.3}] over {} rated runs",
            row.name, row.rated
        ),
        (Some(mean), None) => format!("{}: mean {mean:.3} over {} rated runs", row.name, row.rated),
        _ => format!("{}: no rated runs", row.name),
    }
}

/// Each variant's share of new runs: the winner all of it; otherwise, among
/// the variants running, the starting weights — or, adaptive and with
/// `min_rated` ratings each, the chance each is best, above a floor of
/// `min_share`.
fn share(
    experiment: &Experiment,
    status: &Status,
    variants: &mut [(Variant, Option<Interval>)],
    scale: Option<&Scale>,
) {
    if let Status::Winner { variant, .. } = status {
        for (row, _) in variants.iter_mut() {
            row.share = if &row.name == variant { 1.0 } else { 0.0 };
        }
        return;
    }
    let running: Vec<usize> = (0..variants.len())
        .filter(|&i| variants[i].0.stopped.is_none())
        .collect();
    let rated_enough = running
        .iter()
        .all(|&i| variants[i].0.rated >= experiment.min_rated());
    let by_chance = match scale {
        Some(scale) if experiment.adaptive && rated_enough => {
            let arms: Vec<(u64, f64)> = running
                .iter()
                .map(|&i| {
                    let row = &variants[i].0;
                    (
                        row.rated,
                        scale.sum(row.rated, row.rated as f64 * row.mean.unwrap_or(0.0)),
                    )
                })
                .collect();
            let chances = sequence::chance_best(&arms, DRAWS, &mut rand::rng());
            let floor = experiment.min_share();
            let spare = (1.0 - floor * running.len() as f64).max(0.0);
            Some(
                chances
                    .iter()
                    .map(|c| floor + spare * c)
                    .collect::<Vec<_>>(),
            )
        }
        _ => None,
    };
    let weights: Vec<f64> = match by_chance {
        Some(shares) => shares,
        None => {
            let total: f64 = running.iter().map(|&i| variants[i].0.weight).sum();
            running
                .iter()
                .map(|&i| {
                    if total > 0.0 {
                        variants[i].0.weight / total
                    } else {
                        1.0 / running.len() as f64
                    }
                })
                .collect()
        }
    };
    for (row, _) in variants.iter_mut() {
        row.share = 0.0;
    }
    for (k, &i) in running.iter().enumerate() {
        variants[i].0.share = weights[k];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn experiment(toml: &str) -> Experiment {
        toml::from_str(toml).unwrap()
    }

    fn helpful() -> Metric {
        toml::from_str(r#"type = "boolean""#).unwrap()
    }

    fn tally(variant: &str, runs: u64, rated: u64, good: f64) -> Tally {
        Tally {
            variant: variant.into(),
            runs,
            failed: 0,
            cost_usd: 0.001 * runs as f64,
            p95_ms: Some(100),
            rated,
            value_sum: good,
        }
    }

    #[test]
    fn weights_serve_until_ratings_come_then_the_better_gets_more() {
        let ask = experiment(
            "variants = { a = 3, b = 1 }\nmetric = \"helpful\"\nadaptive = true\nmin_share = 0.05",
        );
        let metric = helpful();
        let start = Verdict::of("x", &ask, Some(&metric), &[], None, 0);
        assert_eq!(start.status, Status::Running);
        assert_eq!(start.variants[0].share, 0.75);
        let moved = Verdict::of(
            "x",
            &ask,
            Some(&metric),
            &[tally("a", 12, 10, 2.0), tally("b", 12, 10, 8.0)],
            None,
            0,
        );
        assert!(moved.variants[1].share > 0.8, "{:?}", moved.variants);
        assert!(moved.variants[0].share >= 0.05);
        assert_eq!(moved.status, Status::Running, "10 ratings do not decide");
    }

    #[test]
    fn a_variant_better_beyond_doubt_wins_and_says_its_numbers() {
        let ask = experiment("variants = { a = 1, b = 1 }\nmetric = \"helpful\"\nadaptive = true");
        let verdict = Verdict::of(
            "x",
            &ask,
            Some(&helpful()),
            &[tally("a", 60, 60, 6.0), tally("b", 60, 60, 57.0)],
            None,
            5,
        );
        let Status::Winner { variant, said } = &verdict.status else {
            panic!("{:?}", verdict.status);
        };
        assert_eq!(variant, "b");
        assert!(said.contains("b: mean 0.950"), "{said}");
        assert_eq!(verdict.variants[1].share, 1.0);
        assert_eq!(verdict.choose(0.0), "b");
        // Kept: a later, closer tally does not undo it.
        let later = Verdict::of(
            "x",
            &ask,
            Some(&helpful()),
            &[tally("a", 70, 70, 30.0), tally("b", 70, 70, 40.0)],
            Some(verdict.decisions.clone()),
            9,
        );
        assert_eq!(later.status_line(), "winner: b");
    }

    #[test]
    fn a_guardrail_stops_a_variant_but_never_the_last() {
        let ask = experiment(
            "variants = { a = 1, b = 1 }\nguardrails = { max_cost_usd = 0.01, min_runs = 5 }",
        );
        let mut costly = tally("b", 6, 0, 0.0);
        costly.cost_usd = 0.6;
        let verdict = Verdict::of("x", &ask, None, &[tally("a", 6, 0, 0.0), costly], None, 0);
        let stopped = verdict.variants[1].stopped.as_deref().unwrap();
        assert!(stopped.contains("cost $0.1000 per run"), "{stopped}");
        assert_eq!(verdict.variants[1].share, 0.0);
        assert_eq!(verdict.variants[0].share, 1.0);
        assert!(!verdict.serves("b"));
        let mut both = tally("a", 6, 0, 0.0);
        both.cost_usd = 0.6;
        let last = Verdict::of(
            "x",
            &ask,
            None,
            &[both, tally("b", 6, 0, 0.0)],
            Some(verdict.decisions),
            0,
        );
        assert!(
            last.notes[0].contains("last variant running"),
            "{:?}",
            last.notes
        );
        assert_eq!(last.variants[0].share, 1.0);
    }

    #[test]
    fn a_minimised_float_metric_is_scaled_and_flipped() {
        let ask = experiment(
            "variants = { a = 1, b = 1 }\nmetric = \"latency\"\nadaptive = true\nmin_rated = 1",
        );
        let metric: Metric =
            toml::from_str("type = \"float\"\nmin = 0\nmax = 10\noptimize = \"min\"").unwrap();
        let verdict = Verdict::of(
            "x",
            &ask,
            Some(&metric),
            &[
                tally("a", 80, 80, 80.0 * 9.0),
                tally("b", 80, 80, 80.0 * 1.0),
            ],
            None,
            0,
        );
        assert_eq!(verdict.status_line(), "winner: b");
        let [low, high] = verdict.variants[1].interval.unwrap();
        assert!(low <= 1.0 && (1.0..5.0).contains(&high), "{low} {high}");
    }
}
