//! An experiment over time: its latest runs cut into windows of equal
//! count, each with the share of runs each variant served and each
//! variant's mean rating so far (cumulative, so the line settles as
//! ratings come) — what `chorus experiments` prints and the viewer plots.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::store::experiments::Point;

/// One window of consecutive runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    /// When its first and last run started, unix ms.
    pub from: i64,
    pub to: i64,
    pub runs: usize,
    /// The share of its runs each variant served.
    pub shares: BTreeMap<String, f64>,
    /// Each variant's mean rating over every rated run up to the window's
    /// end, and how many that is.
    pub means: BTreeMap<String, (f64, u64)>,
}

/// `points` (oldest first) cut into at most `count` windows.
pub fn windows(points: &[Point], count: usize) -> Vec<Window> {
    if points.is_empty() || count == 0 {
        return Vec::new();
    }
    let size = points.len().div_ceil(count);
    let mut sums: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    points
        .chunks(size)
        .map(|chunk| {
            let mut served: BTreeMap<String, usize> = BTreeMap::new();
            for point in chunk {
                *served.entry(point.variant.clone()).or_default() += 1;
                if let Some(value) = point.value {
                    let sum = sums.entry(point.variant.clone()).or_default();
                    sum.0 += value;
                    sum.1 += 1;
                }
            }
            Window {
                from: chunk[0].at,
                to: chunk[chunk.len() - 1].at,
                runs: chunk.len(),
                shares: served
                    .into_iter()
                    .map(|(variant, n)| (variant, n as f64 / chunk.len() as f64))
                    .collect(),
                means: sums
                    .iter()
                    .map(|(variant, (sum, n))| (variant.clone(), (sum / *n as f64, *n)))
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(variant: &str, at: i64, value: Option<f64>) -> Point {
        Point {
            variant: variant.into(),
            at,
            value,
        }
    }

    #[test]
    fn runs_are_cut_into_windows_with_shares_and_running_means() {
        let points = vec![
            point("a", 1, Some(0.0)),
            point("b", 2, Some(1.0)),
            point("b", 3, Some(1.0)),
            point("b", 4, None),
        ];
        let windows = windows(&points, 2);
        assert_eq!(windows.len(), 2);
        assert_eq!(windows[0].shares["a"], 0.5);
        assert_eq!(windows[1].shares["b"], 1.0);
        assert_eq!(windows[1].means["b"], (1.0, 2));
        assert_eq!(windows[1].means["a"], (0.0, 1));
        assert_eq!((windows[1].from, windows[1].to), (3, 4));
    }
}
