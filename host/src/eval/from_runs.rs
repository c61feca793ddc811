//! A dataset from the run store (`chorus eval --from-runs`): last week's
//! real questions, each with an answer someone vouched for as its
//! reference — a run rated on the good side of a metric (a boolean `true`,
//! a float in the better half of its `min`..`max`), or the merge a shadow
//! judge preferred in both orders. Each becomes a `judge` item: the judge
//! model grades a new answer against that reference. Runs rated on the bad
//! side are left out (their answer is no reference), as is a question
//! asked again (the newest is kept).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::config::{Metric, MetricKind, Optimize};
use crate::store::experiments::Outcome;
use crate::store::{Store, StoreError};

/// What a reference answer is held to.
pub const RUBRIC: &str = "The answer is right if it is at least as good as the reference answer, \
                          which a person or a judge preferred, on every point that matters.";

/// What the dataset was built of, for the terminal.
#[derive(Debug, Default, PartialEq)]
pub struct Built {
    pub lines: Vec<Value>,
    /// Rated runs kept as references, and those left out (rated bad).
    pub rated: usize,
    pub rated_bad: usize,
    /// Shadow judgements whose preferred merge is a reference.
    pub judged: usize,
    /// Questions asked again, left out for the newest.
    pub repeated: usize,
}

/// The dataset from the runs since `since` (unix ms), at most `most`
/// questions: runs rated on `metric` (named `name`; none: ratings are not
/// used), then decisive shadow judgements. Blocking.
pub fn build(
    store: &Store,
    metric: Option<(&str, &Metric)>,
    since: i64,
    most: usize,
) -> Result<Built, StoreError> {
    let mut built = Built::default();
    let mut asked: HashSet<String> = HashSet::new();
    let mut push = |built: &mut Built, id: &str, question: &str, reference: &str| {
        if built.lines.len() >= most {
            return false;
        }
        if !asked.insert(question.trim().to_owned()) {
            built.repeated += 1;
            return false;
        }
        built.lines.push(json!({
            "id": id,
            "question": question,
            "expected": reference,
            "grader": "judge",
            "rubric": RUBRIC,
        }));
        true
    };
    if let Some((name, metric)) = metric {
        for run in store.rated_runs(name, since, most)? {
            if !good(metric, run.mean) {
                built.rated_bad += 1;
                continue;
            }
            if push(&mut built, &run.run_id, &run.prompt, &run.answer) {
                built.rated += 1;
            }
        }
    }
    for judged in store.decisive_judgements(since, most)? {
        let reference = match judged.outcome {
            Outcome::Win => &judged.candidate_answer,
            _ => &judged.answer,
        };
        let id = format!("{}:{}", judged.run_id, judged.experiment);
        if push(&mut built, &id, &judged.prompt, reference) {
            built.judged += 1;
        }
    }
    Ok(built)
}

/// Whether a run's mean rating is on the metric's good side.
fn good(metric: &Metric, mean: f64) -> bool {
    let (low, high) = match metric.kind {
        MetricKind::Boolean => (0.0, 1.0),
        MetricKind::Float => match (metric.min, metric.max) {
            (Some(min), Some(max)) => (min, max),
            // Checked before: a float metric used here has bounds.
            _ => return false,
        },
    };
    let middle = (low + high) / 2.0;
    match metric.optimize {
        Optimize::Max => mean >= middle,
        Optimize::Min => mean <= middle,
    }
}

/// Why `metric` cannot tell a good answer from a bad one, if it cannot.
pub fn unusable(name: &str, metric: &Metric) -> Option<String> {
    (metric.kind == MetricKind::Float && (metric.min.is_none() || metric.max.is_none())).then(|| {
        format!(
            "the metric `{name}` has no `min` and `max`: which ratings vouch for an answer is the better half of its range, so give it both"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_good_side_of_a_metric() {
        let helpful: Metric = toml::from_str(r#"type = "boolean""#).unwrap();
        assert!(good(&helpful, 1.0));
        assert!(!good(&helpful, 0.0));
        let errors: Metric =
            toml::from_str("type = \"float\"\nmin = 0\nmax = 10\noptimize = \"min\"").unwrap();
        assert!(good(&errors, 2.0));
        assert!(!good(&errors, 8.0));
        let open: Metric = toml::from_str(r#"type = "float""#).unwrap();
        assert!(
            unusable("score", &open)
                .unwrap()
                .contains("`min` and `max`")
        );
    }
}
