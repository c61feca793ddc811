//! What an evaluation found, per pipeline or model: accuracy, cost and
//! latency (p50/p95), as a table for people, as JSON for programs, and as
//! an SVG chart of accuracy against cost.

use std::fmt::Write as _;

use serde::Serialize;

use super::Outcome;
use crate::record::show_usd;

/// One target's results over the dataset.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub target: String,
    pub questions: usize,
    pub correct: usize,
    /// Runs that failed outright (no answer to grade); counted as wrong.
    pub failed: usize,
    pub accuracy: f64,
    pub cost_usd: f64,
    pub cost_per_question_usd: f64,
    /// True when part of the cost is chorus's estimate.
    pub cost_estimated: bool,
    pub latency_p50_ms: u64,
    pub latency_p95_ms: u64,
}

/// The summaries, in the order the targets were given.
pub fn summarise(targets: &[String], outcomes: &[Outcome]) -> Vec<Summary> {
    targets
        .iter()
        .map(|target| {
            let mine: Vec<&Outcome> = outcomes.iter().filter(|o| &o.target == target).collect();
            let questions = mine.len();
            let correct = mine.iter().filter(|o| o.grade.pass).count();
            let failed = mine.iter().filter(|o| o.error.is_some()).count();
            let cost_usd: f64 = mine.iter().map(|o| o.cost_usd).sum();
            let mut latencies: Vec<u64> = mine.iter().map(|o| o.latency_ms).collect();
            latencies.sort_unstable();
            let per = |total: f64| {
                if questions == 0 {
                    0.0
                } else {
                    total / questions as f64
                }
            };
            Summary {
                target: target.clone(),
                questions,
                correct,
                failed,
                accuracy: per(correct as f64),
                cost_usd: crate::record::round_usd(cost_usd),
                cost_per_question_usd: crate::record::round_usd(per(cost_usd)),
                cost_estimated: mine.iter().any(|o| o.cost_estimated),
                latency_p50_ms: percentile(&latencies, 50),
                latency_p95_ms: percentile(&latencies, 95),
            }
        })
        .collect()
}

/// The nearest-rank percentile of sorted values (0 for none).
fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// A plain-text table, one row per target.
pub fn table(summaries: &[Summary]) -> String {
    let width = summaries
        .iter()
        .map(|s| s.target.chars().count())
        .max()
        .unwrap_or(0)
        .max("target".len());
    let mut out = format!(
        "{:<width$}  {:>8}  {:>9}  {:>6}  {:>10}  {:>12}  {:>8}  {:>8}\n",
        "target", "accuracy", "correct", "failed", "cost", "per question", "p50", "p95"
    );
    for s in summaries {
        let mark = if s.cost_estimated { "~" } else { "" };
        let _ = writeln!(
            out,
            "{:<width$}  {:>7.1}%  {:>9}  {:>6}  {:>10}  {:>12}  {:>8}  {:>8}",
            s.target,
            s.accuracy * 100.0,
            format!("{}/{}", s.correct, s.questions),
            s.failed,
            format!("{mark}{}", show_usd(s.cost_usd)),
            format!("{mark}{}", show_usd(s.cost_per_question_usd)),
            seconds(s.latency_p50_ms),
            seconds(s.latency_p95_ms),
        );
    }
    out
}

fn seconds(ms: u64) -> String {
    format!("{:.2}s", ms as f64 / 1000.0)
}

/// An SVG scatter chart: accuracy (up) against cost per question (right),
/// one labelled point per target.
pub fn chart(summaries: &[Summary], title: &str) -> String {
    const W: f64 = 640.0;
    const H: f64 = 420.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 30.0;
    const TOP: f64 = 50.0;
    const BOTTOM: f64 = 60.0;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let max_cost = summaries
        .iter()
        .map(|s| s.cost_per_question_usd)
        .fold(0.0_f64, f64::max);
    let max_cost = if max_cost > 0.0 {
        max_cost * 1.15
    } else {
        1e-6
    };
    let x = |cost: f64| LEFT + cost / max_cost * plot_w;
    let y = |accuracy: f64| TOP + (1.0 - accuracy) * plot_h;
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{cx}" y="24" text-anchor="middle" font-size="15">{title}</text>
<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>
<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/>
<text x="{cx}" y="{xlabel}" text-anchor="middle">cost per question (USD)</text>
<text x="18" y="{cy}" text-anchor="middle" transform="rotate(-90 18 {cy})">accuracy</text>
"##,
        cx = LEFT + plot_w / 2.0,
        cy = TOP + plot_h / 2.0,
        bottom = TOP + plot_h,
        right = LEFT + plot_w,
        xlabel = H - 18.0,
        title = escape(title),
    );
    for tick in 0..=4 {
        let accuracy = f64::from(tick) / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{py}" x2="{right}" y2="{py}" stroke="#ddd"/><text x="{tx}" y="{ty}" text-anchor="end">{label}%</text>"##,
            py = y(accuracy),
            right = LEFT + plot_w,
            tx = LEFT - 6.0,
            ty = y(accuracy) + 4.0,
            label = tick * 25,
        );
        let cost = max_cost * f64::from(tick) / 4.0;
        let _ = writeln!(
            svg,
            r##"<text x="{px}" y="{ty}" text-anchor="middle">{label}</text>"##,
            px = x(cost),
            ty = TOP + plot_h + 18.0,
            label = escape(&show_usd(cost)),
        );
    }
    for s in summaries {
        let (px, py) = (x(s.cost_per_question_usd), y(s.accuracy));
        let _ = writeln!(
            svg,
            r##"<circle cx="{px:.1}" cy="{py:.1}" r="6" fill="#3465a4"/><text x="{tx:.1}" y="{ty:.1}">{label} ({accuracy:.0}%)</text>"##,
            tx = px + 9.0,
            ty = py - 8.0,
            label = escape(&s.target),
            accuracy = s.accuracy * 100.0,
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::grade::Grade;

    fn outcome(target: &str, pass: bool, cost: f64, latency: u64) -> Outcome {
        Outcome {
            item: "i".into(),
            target: target.into(),
            question_hash: String::new(),
            run_id: None,
            answer: Some("a".into()),
            error: None,
            grade: Grade {
                pass,
                why: String::new(),
            },
            cost_usd: cost,
            cost_estimated: false,
            latency_ms: latency,
        }
    }

    #[test]
    fn summaries_count_accuracy_cost_and_percentiles() {
        let outcomes: Vec<Outcome> = (1..=20)
            .map(|i| outcome("ask", i % 4 != 0, 0.001, i * 100))
            .chain([outcome("model:m", true, 0.0002, 50)])
            .collect();
        let summaries = summarise(&["ask".into(), "model:m".into()], &outcomes);
        let ask = &summaries[0];
        assert_eq!((ask.questions, ask.correct), (20, 15));
        assert!((ask.accuracy - 0.75).abs() < 1e-12);
        assert_eq!(ask.cost_usd, 0.02);
        assert_eq!(ask.cost_per_question_usd, 0.001);
        assert_eq!((ask.latency_p50_ms, ask.latency_p95_ms), (1000, 1900));
        let table = table(&summaries);
        assert!(table.contains("75.0%"), "{table}");
        assert!(table.contains("15/20"), "{table}");
        let svg = chart(&summaries, "a <test>");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &lt;test&gt;"));
        assert_eq!(svg.matches("<circle").count(), 2);
    }
}
