//! `/experiments`: where each experiment stands, for an admin client (its
//! numbers add up every client's runs, so a client that sees only its own
//! runs does not see them). Per experiment: the status, the table
//! `chorus experiments` prints, and two plots drawn here as SVG, readable
//! without script — each variant's mean rating over its runs with its
//! anytime-valid interval, and cost per run against quality.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};

use super::Viewer;
use super::layout::{dollars, page, problem};
use crate::app::experiments::Shown;
use crate::client::Client;
use crate::experiment::shadow::Standing;
use crate::experiment::timeline::{self, Window};
use crate::experiment::{Status, Verdict};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 34.0;
const TOP: f64 = 16.0;
const RIGHT: f64 = 120.0;
/// Points of the plot over time.
const WINDOWS: usize = 20;
/// One colour per variant, in the order configured.
const COLOURS: [&str; 6] = [
    "#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#57606a",
];

pub async fn page_of(
    State(viewer): State<Arc<Viewer>>,
    Extension(client): Extension<Arc<Client>>,
) -> Response {
    if !client.admin {
        return problem(
            StatusCode::FORBIDDEN,
            "Experiments are for an admin",
            "An experiment's numbers add up every client's runs: sign in as an admin client (admin = true in [[http.clients]], or CHORUS_TOKEN) to see them.",
        );
    }
    let chorus = &viewer.chorus;
    let mut shown = Vec::new();
    for name in chorus.experiment_names() {
        match chorus.experiment(&name).await {
            Some(Ok(one)) => shown.push(one),
            Some(Err(e)) => {
                return problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The run store could not be read",
                    &e.to_string(),
                );
            }
            None => {}
        }
    }
    page(
        "Experiments",
        html! {
            h1 { "Experiments" }
            @if shown.is_empty() {
                p class="muted" { "This chorus has no experiment. One is a pipeline name served by several variants: see docs/experiments.md, e.g. " code { "[experiments.ask] variants = { ask = 1, self-moa = 1 }" } "." }
            }
            @for one in &shown { (experiment(one)) }
        },
    )
}

fn experiment(shown: &Shown) -> Markup {
    match shown {
        Shown::Variants { verdict, timeline } => variants(verdict, timeline),
        Shown::Shadow(standing) => shadow(standing),
    }
}

/// A shadow experiment: the candidate's record against the pipeline's
/// merge, and what each costs.
fn shadow(s: &Standing) -> Markup {
    let cost = |c: Option<f64>| c.map_or_else(|| "–".to_owned(), dollars);
    html! {
        section id=(s.name) {
            h2 { "Experiment " code { (s.name) } " (shadow)" }
            ul class="facts" {
                li { "candidate " code { (s.synthesizer) } " against " code { (s.pipeline) } "'s merge" }
                li { "judge " code { (s.judge) } }
                li { (format!("{:.0} %", s.share * 100.0)) " of runs" }
                li { "spent today " (dollars(s.spent_today_usd)) " of " (dollars(s.budget_usd_per_day)) }
            }
            p { strong { (s.status) } }
            table class="runs" {
                thead { tr { th { "judged" } th { "wins" } th { "losses" } th { "ties" } th { "win rate" } th { "interval" } th { "pipeline's merge/run" } th { "candidate/run" } th { "judge/run" } } }
                tbody { tr {
                    td { (s.judged) } td { (s.wins) } td { (s.losses) } td { (s.ties) }
                    td { (s.win_rate.map_or_else(|| "–".to_owned(), |r| format!("{r:.3}"))) }
                    td { (s.interval.map_or_else(|| "–".to_owned(), |[l, h]| format!("[{l:.3}, {h:.3}]"))) }
                    td { (cost(s.baseline_cost_per_run_usd)) }
                    td { (cost(s.candidate_cost_per_run_usd)) }
                    td { (cost(s.judge_cost_per_run_usd)) }
                } }
            }
            p class="muted" { "A win is the judge preferring the candidate's merge in both orders; a tie or a disagreement between the orders counts half." }
        }
    }
}

/// A variants experiment: its table and plots.
fn variants(verdict: &Verdict, points: &[crate::store::experiments::Point]) -> Markup {
    let windows = timeline::windows(points, WINDOWS);
    html! {
        section id=(verdict.name) {
            h2 { "Experiment " code { (verdict.name) } }
            ul class="facts" {
                li { "status " strong { (verdict.status_line()) } }
                @if let Some(metric) = &verdict.metric { li { "metric " strong { (metric) } } }
                li { @if verdict.adaptive { "adaptive, " (format!("{:.0}", verdict.confidence * 100.0)) " % anytime-valid" } @else { "fixed weights" } }
                li { (points.len()) " latest runs" }
            }
            @if let Status::Winner { said, .. } = &verdict.status { p { (said) } }
            @for note in &verdict.notes { p class="muted" { (note) } }
            table class="runs" {
                thead { tr { th { "variant" } th { "share" } th { "runs" } th { "failed" } th { "cost/run" } th { "p95" } th { "rated" } th { "mean" } th { "interval" } th { "" } } }
                tbody {
                    @for v in &verdict.variants {
                        tr {
                            td { code { (v.name) } }
                            td { (format!("{:.0} %", v.share * 100.0)) }
                            td { (v.runs) }
                            td { (v.failure_rate.map_or_else(|| "–".to_owned(), |r| format!("{:.0} %", r * 100.0))) }
                            td { (v.cost_per_run_usd.map_or_else(|| "–".to_owned(), dollars)) }
                            td { (v.p95_ms.map_or_else(|| "–".to_owned(), |ms| format!("{:.1} s", ms as f64 / 1000.0))) }
                            td { (v.rated) }
                            td { (v.mean.map_or_else(|| "–".to_owned(), |m| format!("{m:.3}"))) }
                            td { (v.interval.map_or_else(|| "–".to_owned(), |[l, h]| format!("[{l:.3}, {h:.3}]"))) }
                            td { @if let Some(reason) = &v.stopped { span class="failed" { "stopped: " (reason) } } }
                        }
                    }
                }
            }
            @if verdict.metric.is_some() && !windows.is_empty() {
                h3 { "Mean rating over time" }
                (over_time(verdict, &windows))
            }
            h3 { "Cost against quality" }
            (cost_quality(verdict))
        }
    }
}

/// The range a plot's y axis spans: the intervals' and means' own.
fn y_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    if !low.is_finite() || !high.is_finite() {
        return (0.0, 1.0);
    }
    if high - low < 1e-9 {
        (low - 0.5, high + 0.5)
    } else {
        (low, high)
    }
}

/// A variant's mean rating at the end of one window, and its interval.
struct Mark {
    window: usize,
    mean: f64,
    band: Option<[f64; 2]>,
}

/// One variant's line: its colour's index, its name, its marks.
struct Series<'a> {
    colour: &'static str,
    name: &'a str,
    marks: Vec<Mark>,
}

/// Each variant's cumulative mean rating at the end of each window, with
/// its interval as a band.
fn over_time(verdict: &Verdict, windows: &[Window]) -> Markup {
    let series: Vec<Series<'_>> = verdict
        .variants
        .iter()
        .enumerate()
        .map(|(i, v)| Series {
            colour: COLOURS[i % COLOURS.len()],
            name: &v.name,
            marks: windows
                .iter()
                .enumerate()
                .filter_map(|(window, w)| {
                    let (mean, n) = *w.means.get(&v.name)?;
                    Some(Mark {
                        window,
                        mean,
                        band: verdict.band(n, mean),
                    })
                })
                .collect(),
        })
        .collect();
    let (low, high) = y_range(series.iter().flat_map(|s| {
        s.marks
            .iter()
            .flat_map(|m| [Some(m.mean), m.band.map(|b| b[0]), m.band.map(|b| b[1])])
            .flatten()
    }));
    let x = |w: usize| LEFT + (WIDTH - LEFT - RIGHT) * w as f64 / (windows.len().max(2) - 1) as f64;
    let y = |v: f64| TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - (v - low) / (high - low));
    let point = |w: usize, v: f64| format!("{:.1},{:.1}", x(w), y(v));
    html! {
        svg class="experiment" viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
            aria-label=(format!("Mean rating of each variant of {} over its latest runs", verdict.name)) {
            (axes(low, high, &y))
            text class="tick-label" x=(LEFT) y=(HEIGHT - 8.0) { "oldest" }
            text class="tick-label" x=(WIDTH - RIGHT) y=(HEIGHT - 8.0) text-anchor="end" { "latest runs" }
            @for s in &series {
                @let upper = s.marks.iter().filter_map(|m| Some(point(m.window, m.band?[1])));
                @let lower = s.marks.iter().rev().filter_map(|m| Some(point(m.window, m.band?[0])));
                @let band: Vec<String> = upper.chain(lower).collect();
                @if band.len() > 2 {
                    polygon points=(band.join(" ")) fill=(s.colour) fill-opacity="0.12" stroke="none" {}
                }
                @let line: Vec<String> = s.marks.iter().map(|m| point(m.window, m.mean)).collect();
                polyline points=(line.join(" ")) fill="none" stroke=(s.colour) stroke-width="2" {}
                @for m in &s.marks {
                    circle cx=(x(m.window)) cy=(y(m.mean)) r="2.5" fill=(s.colour) {
                        title { (s.name) ": mean " (format!("{:.3}", m.mean)) @if let Some([l, h]) = m.band { " [" (format!("{l:.3}, {h:.3}")) "]" } }
                    }
                }
                @if let Some(m) = s.marks.last() {
                    text x=(x(m.window) + 6.0) y=(y(m.mean) + 4.0) fill=(s.colour) { (s.name) }
                }
            }
        }
    }
}

/// A variant placed on the cost-quality plot.
struct Placed<'a> {
    colour: &'static str,
    name: &'a str,
    cost: f64,
    mean: f64,
    interval: Option<[f64; 2]>,
}

/// Each variant at (cost per run, mean rating), its interval as a bar.
fn cost_quality(verdict: &Verdict) -> Markup {
    let placed: Vec<Placed<'_>> = verdict
        .variants
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            Some(Placed {
                colour: COLOURS[i % COLOURS.len()],
                name: &v.name,
                cost: v.cost_per_run_usd?,
                mean: v.mean?,
                interval: v.interval,
            })
        })
        .collect();
    if placed.is_empty() {
        return html! { p class="muted" { "No variant has rated runs with a known cost yet." } };
    }
    let (low, high) = y_range(placed.iter().flat_map(|p| {
        [
            Some(p.mean),
            p.interval.map(|i| i[0]),
            p.interval.map(|i| i[1]),
        ]
        .into_iter()
        .flatten()
    }));
    let most = placed.iter().map(|p| p.cost).fold(0.0, f64::max).max(1e-9) * 1.1;
    let x = |cost: f64| LEFT + (WIDTH - LEFT - RIGHT) * cost / most;
    let y = |v: f64| TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - (v - low) / (high - low));
    html! {
        svg class="experiment" viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img"
            aria-label=(format!("Cost per run against mean rating for each variant of {}", verdict.name)) {
            (axes(low, high, &y))
            text class="tick-label" x=(LEFT) y=(HEIGHT - 8.0) { "$0" }
            text class="tick-label" x=(WIDTH - RIGHT) y=(HEIGHT - 8.0) text-anchor="end" { (dollars(most)) " per run" }
            @for p in &placed {
                @if let Some([l, h]) = p.interval {
                    line x1=(x(p.cost)) x2=(x(p.cost)) y1=(y(l)) y2=(y(h)) stroke=(p.colour) stroke-width="2" {}
                }
                circle cx=(x(p.cost)) cy=(y(p.mean)) r="5" fill=(p.colour) {
                    title { (p.name) ": " (dollars(p.cost)) " per run, mean " (format!("{:.3}", p.mean)) }
                }
                text x=(x(p.cost) + 8.0) y=(y(p.mean) + 4.0) fill=(p.colour) { (p.name) }
            }
        }
    }
}

/// The y axis from `low` to `high`, three labelled lines.
fn axes(low: f64, high: f64, y: &dyn Fn(f64) -> f64) -> Markup {
    html! {
        @for v in [low, (low + high) / 2.0, high] {
            line class="tick" x1=(LEFT) x2=(WIDTH - RIGHT) y1=(y(v)) y2=(y(v)) {}
            text class="tick-label" x=(LEFT - 6.0) y=(y(v) + 4.0) text-anchor="end" { (format!("{v:.2}")) }
        }
    }
}
