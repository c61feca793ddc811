//! A run's calls on a time axis, as an SVG drawn here: one row per call
//! from when it was asked for to when it ended — the wait for a provider
//! permit drawn apart (queued → sent), a mark at its first token —
//! coloured by how it ended, with retries and cut stragglers named. No
//! script, no external library.

use std::collections::HashMap;

use maud::{Markup, html};

use crate::record::StoredRun;

const WIDTH: f64 = 960.0;
const LABEL: f64 = 300.0;
const ROW: f64 = 26.0;
const TOP: f64 = 24.0;

/// One call's bar: offsets from the run's start, in ms.
struct Bar {
    label: String,
    status: String,
    start: f64,
    /// When it was sent: after its wait for a permit, if it had one.
    sent: f64,
    /// When its first token came, if it is known where on the bar: a call
    /// retried keeps only its last attempt's, from a send not on record.
    first_token: Option<f64>,
    end: f64,
    note: String,
}

/// The timeline of `run`; `starts` maps call ids to when each was sent
/// (unix ms). A call with no start (runs kept in memory) is placed at the
/// run's start if it is the panel's, else after the panel's last answer.
pub fn svg(run: &StoredRun, starts: &[(u32, i64)]) -> Markup {
    let starts: HashMap<u32, i64> = starts.iter().copied().collect();
    let panel_end = run
        .calls
        .iter()
        .filter(|c| c.call.stage == "fan-out")
        .map(|c| {
            let start = starts.get(&c.call.id).map_or(0, |s| s - run.started_at);
            start as f64 + f64::from(c.call.latency_ms)
        })
        .fold(0.0, f64::max);
    let bars: Vec<Bar> = run
        .calls
        .iter()
        .map(|stored| {
            let call = &stored.call;
            let start = match starts.get(&call.id) {
                Some(at) => (at - run.started_at).max(0) as f64,
                None if call.stage == "fan-out" => 0.0,
                None => panel_end,
            };
            let mut note = Vec::new();
            if call.attempts > 1 {
                note.push(format!("{} attempts", call.attempts));
            }
            if call.reused_from.is_some() {
                note.push("reused".to_owned());
            }
            if call.cached_from.is_some() {
                note.push("cached".to_owned());
            }
            if let Some(error) = &call.error {
                note.push(error.kind.clone());
            }
            let end = start + f64::from(call.latency_ms);
            let queued = f64::from(call.queued_ms.unwrap_or(0));
            let once = call.attempts <= 1;
            let sent = if once {
                (start + queued).min(end)
            } else {
                start
            };
            if !once && queued > 0.0 {
                note.push(format!("{} queued", seconds(queued)));
            }
            let first_token = call
                .ttft_ms
                .filter(|_| once)
                .map(|ttft| (sent + f64::from(ttft)).min(end));
            Bar {
                label: format!("{} · {}", call.stage, call.model),
                status: class_of(&call.status),
                start,
                sent,
                first_token,
                end,
                note: note.join(", "),
            }
        })
        .collect();
    let total = run
        .elapsed_ms
        .map(|ms| ms as f64)
        .unwrap_or(0.0)
        .max(bars.iter().map(|b| b.end).fold(1.0, f64::max));
    let scale = (WIDTH - LABEL - 20.0) / total;
    let height = TOP + ROW * bars.len() as f64 + 8.0;
    let ticks = ticks(total);
    html! {
        svg class="timeline" viewBox=(format!("0 0 {WIDTH} {height}")) role="img"
            aria-label=(format!("Timeline of {} calls over {}", bars.len(), seconds(total))) {
            @for tick in &ticks {
                @let x = LABEL + tick * scale;
                line class="tick" x1=(x) x2=(x) y1=(TOP - 6.0) y2=(height) {}
                text class="tick-label" x=(x) y=(TOP - 10.0) text-anchor="middle" { (seconds(*tick)) }
            }
            @for (row, bar) in bars.iter().enumerate() {
                @let y = TOP + ROW * row as f64;
                text class="call-label" x=(LABEL - 8.0) y=(y + 17.0) text-anchor="end" {
                    (crate::text::ellipsized(&bar.label, 40))
                }
                @if bar.sent > bar.start {
                    rect class="queued" x=(LABEL + bar.start * scale) y=(y + 8.0)
                        width=((bar.sent - bar.start) * scale) height=(ROW - 16.0) {
                        title { (bar.label) " — queued " (seconds(bar.sent - bar.start))
                            " for a provider permit" }
                    }
                }
                rect class=(format!("bar {}", bar.status)) x=(LABEL + bar.sent * scale) y=(y + 5.0)
                    width=(((bar.end - bar.sent) * scale).max(2.0)) height=(ROW - 10.0) rx="3" {
                    title { (bar.label) " — " (bar.status) " after " (seconds(bar.end - bar.start))
                        @if bar.sent > bar.start { ", sent after " (seconds(bar.sent - bar.start)) }
                        @if let Some(at) = bar.first_token { ", first token after " (seconds(at - bar.sent)) }
                        @if !bar.note.is_empty() { " (" (bar.note) ")" } }
                }
                @if let Some(at) = bar.first_token {
                    line class="first-token" x1=(LABEL + at * scale) x2=(LABEL + at * scale)
                        y1=(y + 2.0) y2=(y + ROW - 2.0) {
                        title { (bar.label) " — first token after " (seconds(at - bar.sent)) }
                    }
                }
                @if !bar.note.is_empty() {
                    text class="bar-note" x=(LABEL + bar.end * scale + 4.0) y=(y + 17.0) { (bar.note) }
                }
            }
        }
    }
}

/// A CSS class for a call's status: ours are plain words; anything else
/// is `other`.
fn class_of(status: &str) -> String {
    match status {
        "ok" | "failed" | "cut" | "skipped" | "running" | "unfinished" => status.to_owned(),
        _ => "other".to_owned(),
    }
}

fn seconds(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

/// About five round ticks from 0 to `total` ms.
fn ticks(total: f64) -> Vec<f64> {
    let raw = total / 5.0;
    let magnitude = 10f64.powf(raw.max(1.0).log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(magnitude * 10.0);
    (0..=5)
        .map(|i| f64::from(i) * step)
        .take_while(|t| *t <= total)
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_within_the_run() {
        assert_eq!(ticks(1000.0), vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        assert_eq!(ticks(4500.0), vec![0.0, 1000.0, 2000.0, 3000.0, 4000.0]);
        assert_eq!(ticks(1.0), vec![0.0, 1.0]);
    }

    /// A run of one call: sent once after waiting `queued` ms for a
    /// permit, its first token `ttft` ms later, done after 1 s in all.
    pub(in crate::web) fn run(attempts: u32, queued: Option<u32>, ttft: Option<u32>) -> StoredRun {
        use crate::record::{CallRecord, RunStatus, StoredCall, Totals};
        let call = CallRecord {
            id: 0,
            stage: "fan-out".into(),
            label: "panel".into(),
            model: "m1".into(),
            status: "ok".into(),
            latency_ms: 1000,
            attempts,
            queued_ms: queued,
            ttft_ms: ttft,
            completion_tokens: Some(7),
            reply: Some(std::sync::Arc::new("an answer".into())),
            ..CallRecord::default()
        };
        StoredRun {
            experiment: None,
            run_id: "r".into(),
            pipeline: "ask".into(),
            status: RunStatus::Done,
            started_at: 1_000,
            finished_at: Some(2_000),
            prompt: "q".into(),
            options: serde_json::json!({}),
            plan: None,
            follow_up_of: None,
            resynthesis_of: None,
            client: None,
            attachments: Vec::new(),
            kind: None,
            summary: None,
            answer: None,
            notes: Vec::new(),
            details: None,
            error: None,
            usage: Totals::default(),
            elapsed_ms: Some(1000),
            calls: vec![StoredCall {
                call,
                request: None,
            }],
        }
    }

    #[test]
    fn the_wait_for_a_permit_is_drawn_apart_and_the_first_token_marked() {
        let drawn = svg(&run(1, Some(100), Some(300)), &[(0, 1_000)]).into_string();
        assert!(drawn.contains(r#"class="queued""#), "{drawn}");
        assert!(
            drawn.contains("queued 100 ms for a provider permit"),
            "{drawn}"
        );
        assert!(drawn.contains(r#"class="first-token""#), "{drawn}");
        assert!(drawn.contains("first token after 300 ms"), "{drawn}");
        // The bar starts once sent: 100 ms into a 1 s run.
        let x = LABEL + 100.0 * (WIDTH - LABEL - 20.0) / 1000.0;
        assert!(
            drawn.contains(&format!(r#"class="bar ok" x="{x}""#)),
            "{drawn}"
        );

        let plain = svg(&run(1, None, None), &[(0, 1_000)]).into_string();
        assert!(!plain.contains("queued") && !plain.contains("first-token"));

        let retried = svg(&run(2, Some(100), Some(300)), &[(0, 1_000)]).into_string();
        assert!(
            !retried.contains("first-token"),
            "a retried call's first token has no place on the bar"
        );
        assert!(retried.contains("2 attempts, 100 ms queued"), "{retried}");
    }

    #[test]
    fn unknown_statuses_get_a_plain_class() {
        assert_eq!(class_of("cut"), "cut");
        assert_eq!(class_of("x\" onload=\"y"), "other");
    }
}
