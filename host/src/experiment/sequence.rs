//! The statistics of an experiment, on ratings scaled to [0, 1] (higher is
//! better): an anytime-valid confidence interval for each variant's mean,
//! and the chance that each variant is the best.
//!
//! **Anytime-valid.** A classic 95 % interval holds at one sample size
//! fixed in advance; looked at after every run, it will exclude the truth
//! sooner or later. The interval here is a *confidence sequence* (the
//! normal-mixture boundary of Howard, Ramdas, McAuliffe and Sekhon, "Time-
//! uniform, nonparametric, nonasymptotic confidence sequences", 2021): for
//! values in [0, 1] (sub-Gaussian with σ = ½), with probability at least
//! 1 − α the true mean lies inside the interval *at every n at once*. So
//! an experiment may be looked at after every run, and stopped the first
//! time one variant's interval lies above every other's, and still be
//! wrong with probability at most α. Each of k variants gets α / k (a
//! union bound), so all k intervals hold together. The traffic a variant
//! gets may depend on the ratings so far (the bandit): the guarantee is on
//! each variant's own sequence of ratings and holds all the same.
//!
//! **Chance of being best.** Each variant's ratings give a Beta posterior
//! (Beta(1 + sum, 1 + n − sum), a uniform prior); the chance a variant is
//! best is estimated from draws of every posterior at once. Serving each
//! variant with that chance is Thompson sampling.

use rand::Rng;
use rand_distr::{Beta, Distribution};

/// The variance proxy of a value in [0, 1].
const SIGMA2: f64 = 0.25;
/// The ratings at which the interval is tightest relative to the others
/// (the mixture's precision, ρ = σ² · this): around the tens of ratings an
/// experiment decides on.
const TUNED_FOR: f64 = 30.0;

/// An interval for a mean in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// Nothing known: the whole range.
    pub const WHOLE: Interval = Interval {
        low: 0.0,
        high: 1.0,
    };

    /// The interval of a value mapped by `f`, increasing.
    pub fn map(self, f: impl Fn(f64) -> f64) -> Interval {
        Interval {
            low: f(self.low),
            high: f(self.high),
        }
    }

    /// The interval of `1 − mean`.
    pub fn flipped(self) -> Interval {
        Interval {
            low: 1.0 - self.high,
            high: 1.0 - self.low,
        }
    }
}

/// The confidence sequence of the mean of `n` values in [0, 1] that sum to
/// `sum`, at error `alpha`, at this `n`.
pub fn interval(n: u64, sum: f64, alpha: f64) -> Interval {
    if n == 0 {
        return Interval::WHOLE;
    }
    let n = n as f64;
    let rho = SIGMA2 * TUNED_FOR;
    let v = SIGMA2 * n;
    let radius = ((v + rho) * ((v + rho) / (rho * alpha * alpha)).ln()).sqrt() / n;
    let mean = sum / n;
    Interval {
        low: (mean - radius).max(0.0),
        high: (mean + radius).min(1.0),
    }
}

/// For each `(n, sum)` (ratings in [0, 1]), the chance that its mean is
/// the highest, from `draws` draws of every Beta posterior.
pub fn chance_best(arms: &[(u64, f64)], draws: usize, rng: &mut impl Rng) -> Vec<f64> {
    if arms.is_empty() {
        return Vec::new();
    }
    let posteriors: Vec<Option<Beta<f64>>> = arms
        .iter()
        .map(|&(n, sum)| {
            let sum = sum.clamp(0.0, n as f64);
            Beta::new(1.0 + sum, 1.0 + n as f64 - sum).ok()
        })
        .collect();
    let mut wins = vec![0usize; arms.len()];
    for _ in 0..draws {
        let mut best = (0, f64::NEG_INFINITY);
        for (i, posterior) in posteriors.iter().enumerate() {
            let draw = posterior.as_ref().map_or(0.5, |p| p.sample(rng));
            if draw > best.1 {
                best = (i, draw);
            }
        }
        wins[best.0] += 1;
    }
    wins.iter()
        .map(|&w| w as f64 / draws.max(1) as f64)
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn the_interval_narrows_with_ratings_and_holds_its_mean() {
        let few = interval(10, 8.0, 0.025);
        let many = interval(400, 320.0, 0.025);
        assert!(few.low < 0.8 && few.high > 0.8);
        assert!(many.low < 0.8 && many.high > 0.8);
        assert!(many.high - many.low < few.high - few.low);
        assert!(many.high - many.low < 0.2, "{many:?}");
        assert_eq!(interval(0, 0.0, 0.05), Interval::WHOLE);
    }

    /// The guarantee itself: over many experiments of a fair coin looked at
    /// after every rating up to 2,000, the interval misses the true mean at
    /// some point in at most about α of them (a fixed-n interval looked at
    /// so often misses far more).
    #[test]
    fn looked_at_every_rating_it_still_misses_at_most_alpha() {
        let mut rng = StdRng::seed_from_u64(7);
        let (trials, alpha) = (300, 0.05);
        let mut missed = 0;
        for _ in 0..trials {
            let mut sum = 0.0;
            for n in 1..=2000u64 {
                sum += f64::from(u8::from(rng.random_bool(0.5)));
                let seen = interval(n, sum, alpha);
                if seen.low > 0.5 || seen.high < 0.5 {
                    missed += 1;
                    break;
                }
            }
        }
        assert!(
            f64::from(missed) / f64::from(trials) <= alpha,
            "{missed} of {trials} missed"
        );
    }

    #[test]
    fn the_better_arm_is_more_likely_best() {
        let mut rng = StdRng::seed_from_u64(1);
        let chances = chance_best(&[(40, 36.0), (40, 8.0)], 4000, &mut rng);
        assert!(chances[0] > 0.99, "{chances:?}");
        let even = chance_best(&[(0, 0.0), (0, 0.0)], 4000, &mut rng);
        assert!((even[0] - 0.5).abs() < 0.05, "{even:?}");
        assert!((chances.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }
}
