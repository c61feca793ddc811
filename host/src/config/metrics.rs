//! `[metrics.NAME]`: the feedback a person or a program may give on a run
//! (`helpful`, `correct`, a score), what a value of it may be, and which
//! way is better. A run is rated with `feedback` (MCP), `POST
//! /v1/feedback`, the viewer or `chorus runs feedback`; only a metric
//! declared here is taken.

use serde::Deserialize;

use super::check::Invalid;

/// The longest a metric's name may be.
pub const MAX_METRIC_NAME: usize = 64;

/// One metric: its kind and which way is better.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    #[serde(rename = "type")]
    pub kind: MetricKind,
    /// The least a `float` may be (none: no bound).
    pub min: Option<f64>,
    /// The most a `float` may be (none: no bound).
    pub max: Option<f64>,
    #[serde(default)]
    pub optimize: Optimize,
}

/// What a value of a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// `true` or `false` (kept as 1 or 0).
    Boolean,
    /// A number, within `min` and `max` when they are set.
    Float,
}

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimize {
    #[default]
    Max,
    Min,
}

impl Metric {
    /// `Err((key, message))` when the metric cannot be given.
    pub(super) fn check(&self, name: &str) -> Result<(), Invalid> {
        let key = format!("metrics.{name}");
        let name_ok = (1..=MAX_METRIC_NAME).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err((
                key,
                format!("a metric's name is 1 to {MAX_METRIC_NAME} letters, digits, `_` or `-`"),
            ));
        }
        match self.kind {
            MetricKind::Boolean if self.min.is_some() || self.max.is_some() => Err((
                key,
                "a boolean metric takes true or false: `min` and `max` are for a float".into(),
            )),
            MetricKind::Float => {
                for (bound, value) in [("min", self.min), ("max", self.max)] {
                    if value.is_some_and(|v| !v.is_finite()) {
                        return Err((format!("{key}.{bound}"), "must be a finite number".into()));
                    }
                }
                match (self.min, self.max) {
                    (Some(min), Some(max)) if min >= max => Err((
                        format!("{key}.max"),
                        format!("must be more than min ({min})"),
                    )),
                    _ => Ok(()),
                }
            }
            MetricKind::Boolean => Ok(()),
        }
    }

    /// `value` as this metric keeps it (a boolean as 1 or 0), or what is
    /// wrong with it, for the one who gave it.
    pub fn value_of(&self, name: &str, value: &serde_json::Value) -> Result<f64, String> {
        match (self.kind, value) {
            (MetricKind::Boolean, serde_json::Value::Bool(b)) => Ok(f64::from(u8::from(*b))),
            (MetricKind::Boolean, _) => Err(format!(
                "the metric `{name}` is a boolean: give true or false, not {value}"
            )),
            (MetricKind::Float, serde_json::Value::Number(n)) => {
                let v = n.as_f64().filter(|v| v.is_finite()).ok_or_else(|| {
                    format!("the metric `{name}` takes a finite number, not {value}")
                })?;
                if let Some(min) = self.min.filter(|min| v < *min) {
                    return Err(format!("the metric `{name}` is at least {min}, not {v}"));
                }
                if let Some(max) = self.max.filter(|max| v > *max) {
                    return Err(format!("the metric `{name}` is at most {max}, not {v}"));
                }
                Ok(v)
            }
            (MetricKind::Float, _) => Err(format!(
                "the metric `{name}` is a number: give one, not {value}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metric(toml: &str) -> Metric {
        toml::from_str(toml).unwrap()
    }

    #[test]
    fn a_value_is_held_to_its_metric() {
        let helpful = metric(r#"type = "boolean""#);
        assert_eq!(helpful.optimize, Optimize::Max);
        assert_eq!(helpful.value_of("helpful", &json!(true)), Ok(1.0));
        assert_eq!(helpful.value_of("helpful", &json!(false)), Ok(0.0));
        assert!(
            helpful
                .value_of("helpful", &json!(1))
                .unwrap_err()
                .contains("true or false")
        );
        let score = metric("type = \"float\"\nmin = 0\nmax = 10\noptimize = \"min\"");
        assert_eq!(score.value_of("score", &json!(7.5)), Ok(7.5));
        assert!(
            score
                .value_of("score", &json!(11))
                .unwrap_err()
                .contains("at most 10")
        );
        assert!(
            score
                .value_of("score", &json!(-1))
                .unwrap_err()
                .contains("at least 0")
        );
        assert!(
            score
                .value_of("score", &json!("7"))
                .unwrap_err()
                .contains("a number")
        );
    }

    #[test]
    fn a_metric_that_cannot_be_given_is_refused_naming_its_key() {
        let bounded_boolean = metric("type = \"boolean\"\nmax = 1");
        assert!(
            bounded_boolean
                .check("ok")
                .unwrap_err()
                .1
                .contains("for a float")
        );
        let upside_down = metric("type = \"float\"\nmin = 5\nmax = 1");
        assert_eq!(upside_down.check("s").unwrap_err().0, "metrics.s.max");
        assert!(metric(r#"type = "float""#).check("no spaces").is_err());
        assert!(toml::from_str::<Metric>(r#"type = "stars""#).is_err());
    }
}
