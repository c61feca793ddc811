//! `[experiments.NAME]`, of two kinds:
//!
//! - **variants**: one pipeline name that callers keep asking for, served
//!   by several variants (pipelines), each run by one of them. With
//!   `adaptive`, traffic moves toward the variant that does better on a
//!   declared metric until one is better at the configured confidence; a
//!   variant that breaks a guardrail (cost per run, failure rate, p95
//!   time) is stopped.
//! - **shadow**: a candidate synthesizer merges again, after the caller
//!   has its answer, the panel answers of a share of a pipeline's runs,
//!   and a judge model compares the two merges, within a daily budget of
//!   the experiment's own.
//!
//! How a variant is chosen, when one wins, how a shadow is judged is
//! `experiment`'s and `app`'s business; this file says what may be
//! configured.

use indexmap::IndexMap;
use serde::Deserialize;

use super::check::Invalid;
use super::validate::names;
use super::{Config, MetricKind};

/// The confidence a winner is declared at when none is configured.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// The share of traffic each running variant keeps at least when none is
/// configured (of an adaptive experiment, so its stopping rule can end).
pub const DEFAULT_MIN_SHARE: f64 = 0.1;
/// Runs a variant makes before its guardrails are held to it.
pub const DEFAULT_GUARDRAIL_RUNS: u64 = 20;
/// Rated runs each variant has before an adaptive experiment moves
/// traffic by them: until then, the starting weights.
pub const DEFAULT_MIN_RATED: u64 = 5;

/// One experiment.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Pipelines, each with its starting weight (a share of traffic in
    /// proportion to the others'), in the order written.
    #[serde(default)]
    pub variants: IndexMap<String, f64>,
    /// The `[metrics.NAME]` the variants are compared on.
    pub metric: Option<String>,
    /// Move traffic by the metric, and stop when one variant is better.
    #[serde(default)]
    pub adaptive: bool,
    /// How sure the stopping rule must be (0.5–0.999).
    pub confidence: Option<f64>,
    /// The least share of traffic a running variant keeps (adaptive).
    pub min_share: Option<f64>,
    /// Rated runs each variant has before traffic moves by the metric.
    pub min_rated: Option<u64>,
    #[serde(default)]
    pub guardrails: Guardrails,
    /// A candidate synthesizer judged in the shadow of `pipeline`'s runs.
    pub shadow: Option<Shadow>,
    /// The pipeline whose runs a shadow experiment merges again.
    pub pipeline: Option<String>,
}

/// Shadow judging: `synthesizer` merges again the panel answers of a
/// `share` of `pipeline`'s runs, and `judge` compares its merge with the
/// pipeline's, in both orders, spending at most `budget_usd_per_day`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shadow {
    /// The candidate: a plugin of [plugins].
    pub synthesizer: String,
    /// The share of the pipeline's runs merged again (0–1).
    pub share: f64,
    /// The model that compares the two merges: one of [models].
    pub judge: String,
    /// What the candidate's merges and the judge may spend in a UTC day.
    pub budget_usd_per_day: f64,
}

/// Limits a variant is held to once it has made `min_runs` runs; a variant
/// past one is stopped and the reason recorded.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guardrails {
    /// The most a variant's runs may cost on average, in USD.
    pub max_cost_usd: Option<f64>,
    /// The most of a variant's runs that may fail (0–1).
    pub max_failure_rate: Option<f64>,
    /// The longest a variant's 95th-percentile run may take, in seconds.
    pub max_p95_seconds: Option<f64>,
    /// Runs a variant makes before these are held to it.
    pub min_runs: Option<u64>,
}

impl Experiment {
    pub fn confidence(&self) -> f64 {
        self.confidence.unwrap_or(DEFAULT_CONFIDENCE)
    }

    pub fn min_share(&self) -> f64 {
        self.min_share.unwrap_or(DEFAULT_MIN_SHARE)
    }

    pub fn min_rated(&self) -> u64 {
        self.min_rated.unwrap_or(DEFAULT_MIN_RATED)
    }

    /// Whether it splits a pipeline's traffic among variants (else it
    /// judges a synthesizer in the shadow of one).
    pub fn splits_traffic(&self) -> bool {
        self.shadow.is_none()
    }

    /// Its variants' names, in the order written.
    pub fn variant_names(&self) -> Vec<String> {
        self.variants.keys().cloned().collect()
    }
}

impl Guardrails {
    pub fn min_runs(&self) -> u64 {
        self.min_runs.unwrap_or(DEFAULT_GUARDRAIL_RUNS)
    }

    pub fn any(&self) -> bool {
        self.max_cost_usd.is_some()
            || self.max_failure_rate.is_some()
            || self.max_p95_seconds.is_some()
    }
}

/// Every experiment against the rest of the configuration.
pub(super) fn check(config: &Config) -> Result<(), Invalid> {
    for (name, experiment) in &config.experiments {
        check_one(config, name, experiment)?;
    }
    Ok(())
}

fn check_one(config: &Config, name: &str, experiment: &Experiment) -> Result<(), Invalid> {
    let key = format!("experiments.{name}");
    if let Some(shadow) = &experiment.shadow {
        return check_shadow(config, &key, experiment, shadow);
    }
    if experiment.pipeline.is_some() {
        return Err((
            format!("{key}.pipeline"),
            "`pipeline` names the pipeline a shadow experiment watches: give `shadow` too, or compare pipelines with `variants`"
                .into(),
        ));
    }
    if !config.pipelines.contains_key(name) {
        return Err((
            key,
            format!(
                "an experiment is named for the pipeline its callers ask for, and there is no pipeline `{name}`: \
                 name it after one of {}, or add [pipelines.{name}]",
                names(config.pipelines.keys())
            ),
        ));
    }
    if experiment.variants.len() < 2 {
        return Err((
            format!("{key}.variants"),
            "an experiment compares at least two pipelines, e.g. variants = { ask = 1, self-moa = 1 }"
                .into(),
        ));
    }
    for (variant, weight) in &experiment.variants {
        if !config.pipelines.contains_key(variant) {
            return Err((
                format!("{key}.variants.{variant}"),
                format!(
                    "no pipeline named `{variant}` (defined: {})",
                    names(config.pipelines.keys())
                ),
            ));
        }
        if !weight.is_finite() || *weight < 0.0 {
            return Err((
                format!("{key}.variants.{variant}"),
                format!("a weight is a number of 0 or more, not {weight}"),
            ));
        }
    }
    if experiment.variants.values().all(|w| *w == 0.0) {
        return Err((
            format!("{key}.variants"),
            "at least one variant needs a weight above 0".into(),
        ));
    }
    let metric = match &experiment.metric {
        Some(metric) => match config.metrics.get(metric) {
            Some(declared) => Some((metric, declared)),
            None => {
                return Err((
                    format!("{key}.metric"),
                    format!(
                        "no metric named `{metric}`: declare it as [metrics.{metric}] (declared: {})",
                        names(config.metrics.keys())
                    ),
                ));
            }
        },
        None => None,
    };
    if experiment.adaptive {
        let Some((metric, declared)) = metric else {
            return Err((
                format!("{key}.metric"),
                "an adaptive experiment moves traffic by a metric: name one, e.g. metric = \"helpful\""
                    .into(),
            ));
        };
        if declared.kind == MetricKind::Float && (declared.min.is_none() || declared.max.is_none())
        {
            return Err((
                format!("metrics.{metric}"),
                format!(
                    "the adaptive experiment `{name}` needs `{metric}` bounded: its stopping rule holds for values within a known range, so give it `min` and `max`"
                ),
            ));
        }
    }
    if let Some(confidence) = experiment.confidence
        && !(0.5..=0.999).contains(&confidence)
    {
        return Err((
            format!("{key}.confidence"),
            format!("a confidence is between 0.5 and 0.999, not {confidence}"),
        ));
    }
    let most_share = 1.0 / experiment.variants.len() as f64;
    if let Some(share) = experiment.min_share
        && !(0.0..=most_share).contains(&share)
    {
        return Err((
            format!("{key}.min_share"),
            format!(
                "each of {} variants keeps between 0 and {most_share:.3} of traffic, not {share}",
                experiment.variants.len()
            ),
        ));
    }
    experiment.guardrails.check(&format!("{key}.guardrails"))
}

/// A shadow experiment: its pipeline, candidate and judge exist, its share
/// and budget are numbers it can use, and nothing of a variants
/// experiment is set.
fn check_shadow(
    config: &Config,
    key: &str,
    experiment: &Experiment,
    shadow: &Shadow,
) -> Result<(), Invalid> {
    let Some(pipeline) = &experiment.pipeline else {
        return Err((
            format!("{key}.pipeline"),
            "a shadow experiment names the pipeline whose runs it merges again, e.g. pipeline = \"ask\""
                .into(),
        ));
    };
    if !config.pipelines.contains_key(pipeline) {
        return Err((
            format!("{key}.pipeline"),
            format!(
                "no pipeline named `{pipeline}` (defined: {})",
                names(config.pipelines.keys())
            ),
        ));
    }
    if !experiment.variants.is_empty() || experiment.adaptive || experiment.metric.is_some() {
        return Err((
            key.to_owned(),
            "a shadow experiment judges one synthesizer against a pipeline's: `variants`, `metric` and `adaptive` are for comparing pipelines, in an experiment of their own"
                .into(),
        ));
    }
    if !config.plugins.contains_key(&shadow.synthesizer) {
        return Err((
            format!("{key}.shadow.synthesizer"),
            format!(
                "no plugin named `{}` (defined: {})",
                shadow.synthesizer,
                names(config.plugins.keys())
            ),
        ));
    }
    if !config.models.contains_key(&shadow.judge) {
        return Err((
            format!("{key}.shadow.judge"),
            format!(
                "the judge is a model of [models], and there is no `{}` (defined: {})",
                shadow.judge,
                names(config.models.keys())
            ),
        ));
    }
    if !(shadow.share > 0.0 && shadow.share <= 1.0) {
        return Err((
            format!("{key}.shadow.share"),
            format!(
                "a share of runs is above 0 and at most 1, not {}",
                shadow.share
            ),
        ));
    }
    if !(shadow.budget_usd_per_day.is_finite() && shadow.budget_usd_per_day > 0.0) {
        return Err((
            format!("{key}.shadow.budget_usd_per_day"),
            "must be a number of dollars above 0".into(),
        ));
    }
    Ok(())
}

impl Guardrails {
    fn check(&self, key: &str) -> Result<(), Invalid> {
        for (bound, value) in [
            ("max_cost_usd", self.max_cost_usd),
            ("max_p95_seconds", self.max_p95_seconds),
        ] {
            if value.is_some_and(|v| !v.is_finite() || v <= 0.0) {
                return Err((format!("{key}.{bound}"), "must be a number above 0".into()));
            }
        }
        if self
            .max_failure_rate
            .is_some_and(|v| !(0.0..=1.0).contains(&v))
        {
            return Err((
                format!("{key}.max_failure_rate"),
                "a failure rate is between 0 and 1".into(),
            ));
        }
        if self.min_runs == Some(0) {
            return Err((
                format!("{key}.min_runs"),
                "a variant makes at least one run before it is judged".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(experiments: &str) -> Config {
        let text = format!(
            r#"
[providers.p]
base_url = "http://127.0.0.1:1/v1"
[models."m"]
[plugins.sel]
path = "s.wasm"
[pipelines.ask]
description = "d"
selector = "sel"
prompter = "sel"
synthesizer = "sel"
[pipelines.self-moa]
description = "d"
selector = "sel"
prompter = "sel"
synthesizer = "sel"
[metrics.helpful]
type = "boolean"
[metrics.score]
type = "float"
{experiments}
"#
        );
        toml::from_str(&text).unwrap()
    }

    fn refusal(experiments: &str) -> Invalid {
        check(&config(experiments)).unwrap_err()
    }

    #[test]
    fn a_well_formed_experiment_passes() {
        let config = config(
            "[experiments.ask]\nvariants = { ask = 1, self-moa = 2 }\nmetric = \"helpful\"\nadaptive = true\nguardrails = { max_cost_usd = 0.05, max_failure_rate = 0.2 }",
        );
        check(&config).unwrap();
        let shadow = self::config(
            "[experiments.merge-test]\npipeline = \"ask\"\nshadow = { synthesizer = \"sel\", share = 0.1, judge = \"m\", budget_usd_per_day = 1.0 }",
        );
        check(&shadow).unwrap();
        assert!(!shadow.experiments["merge-test"].splits_traffic());
        let experiment = &config.experiments["ask"];
        assert_eq!(experiment.variant_names(), ["ask", "self-moa"]);
        assert_eq!(experiment.confidence(), DEFAULT_CONFIDENCE);
    }

    #[test]
    fn what_an_experiment_cannot_be_is_said_with_its_key() {
        let cases = [
            (
                "[experiments.other]\nvariants = { ask = 1, self-moa = 1 }",
                "experiments.other",
                "no pipeline `other`",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1 }",
                "experiments.ask.variants",
                "at least two",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, nope = 1 }",
                "experiments.ask.variants.nope",
                "no pipeline named `nope`",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = -1 }",
                "experiments.ask.variants.self-moa",
                "0 or more",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = 1 }\nadaptive = true",
                "experiments.ask.metric",
                "name one",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = 1 }\nmetric = \"typo\"",
                "experiments.ask.metric",
                "[metrics.typo]",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = 1 }\nmetric = \"score\"\nadaptive = true",
                "metrics.score",
                "`min` and `max`",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = 1 }\nconfidence = 1.5",
                "experiments.ask.confidence",
                "between 0.5",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = 1 }\nmin_share = 0.6",
                "experiments.ask.min_share",
                "between 0 and 0.500",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = 1 }\nguardrails = { max_failure_rate = 2 }",
                "experiments.ask.guardrails.max_failure_rate",
                "between 0 and 1",
            ),
            (
                "[experiments.t]\nshadow = { synthesizer = \"sel\", share = 0.1, judge = \"m\", budget_usd_per_day = 1 }",
                "experiments.t.pipeline",
                "pipeline = \"ask\"",
            ),
            (
                "[experiments.t]\npipeline = \"ask\"\nshadow = { synthesizer = \"nope\", share = 0.1, judge = \"m\", budget_usd_per_day = 1 }",
                "experiments.t.shadow.synthesizer",
                "no plugin named `nope`",
            ),
            (
                "[experiments.t]\npipeline = \"ask\"\nshadow = { synthesizer = \"sel\", share = 0.1, judge = \"gpt\", budget_usd_per_day = 1 }",
                "experiments.t.shadow.judge",
                "a model of [models]",
            ),
            (
                "[experiments.t]\npipeline = \"ask\"\nshadow = { synthesizer = \"sel\", share = 0, judge = \"m\", budget_usd_per_day = 1 }",
                "experiments.t.shadow.share",
                "above 0",
            ),
            (
                "[experiments.t]\npipeline = \"ask\"\nmetric = \"helpful\"\nshadow = { synthesizer = \"sel\", share = 0.1, judge = \"m\", budget_usd_per_day = 1 }",
                "experiments.t",
                "in an experiment of their own",
            ),
            (
                "[experiments.ask]\nvariants = { ask = 1, self-moa = 1 }\npipeline = \"ask\"",
                "experiments.ask.pipeline",
                "give `shadow` too",
            ),
        ];
        for (toml, key, words) in cases {
            let (found, message) = refusal(toml);
            assert_eq!(found, key, "{toml}");
            assert!(message.contains(words), "{toml}: {message}");
        }
    }
}
