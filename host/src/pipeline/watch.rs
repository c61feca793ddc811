//! A presentation-neutral account of a run in progress, built from its
//! events: which stage it is in, which calls are awaited and since when,
//! which answered or failed. The MCP progress notifications, the task
//! status a client polls, and the terminal all read it; none of them keeps
//! state of its own, so a heartbeat says what is true now rather than
//! repeating the last message.
//!
//! Progress is a fraction that only grows: each stage owns a band of the
//! scale, and calls move it within their band as they finish. It stays
//! below 1 until the run's result exists ([`Watch::finish`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::events::{Event, Stage};

/// Where each stage's band of the progress scale starts; the last band ends
/// short of 1, which only a finished run reaches.
const BANDS: [(Stage, f64); 4] = [
    (Stage::Select, 0.0),
    (Stage::Prompt, 0.05),
    (Stage::FanOut, 0.10),
    (Stage::Synthesize, 0.85),
];
const UNFINISHED_CEILING: f64 = 0.99;
/// Awaited calls named in a status line; the rest are counted.
const NAMED: usize = 3;

#[derive(Debug)]
struct Call {
    model: String,
    /// `fan-out`, or the plugin that made the call.
    stage: Arc<str>,
    /// The stage of the run when the call was sent: its progress band.
    band: Stage,
    since: Instant,
    /// Tokens streamed so far (answer and reasoning), while awaited.
    tokens: u32,
    /// Requests ahead of it while it waits for a provider permit.
    queued_behind: Option<u32>,
    outcome: Option<bool>,
}

/// The state of one run, as its events have told it.
#[derive(Debug)]
pub struct Watch {
    started: Instant,
    stage: Option<Stage>,
    /// Requests the fan-out announced.
    fan_out: Option<usize>,
    calls: BTreeMap<u32, Call>,
    finished: bool,
}

impl Default for Watch {
    fn default() -> Self {
        Self::new()
    }
}

impl Watch {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            stage: None,
            fan_out: None,
            calls: BTreeMap::new(),
            finished: false,
        }
    }

    /// Takes in one event. Returns a line saying what happened when it is
    /// worth telling someone (a stage began, a call answered or failed, a
    /// plugin said something); `None` for bookkeeping events.
    pub fn observe(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::Stage(stage) => {
                self.stage = Some(*stage);
                Some(match stage {
                    Stage::Synthesize => format!("synthesizing ({})", self.tally()),
                    _ => stage.as_str().to_owned(),
                })
            }
            Event::FanOut { calls } => {
                self.fan_out = Some(*calls);
                None
            }
            Event::CallStarted { id, stage, request } => {
                self.calls.insert(
                    *id,
                    Call {
                        model: request.model.clone(),
                        stage: stage.clone(),
                        band: self.stage.unwrap_or(Stage::Select),
                        since: Instant::now(),
                        tokens: 0,
                        queued_behind: None,
                        outcome: None,
                    },
                );
                None
            }
            Event::CallTokens { id, tokens } => {
                if let Some(call) = self.calls.get_mut(id) {
                    call.tokens = *tokens;
                }
                None
            }
            Event::CallQueued { id, behind } => {
                // Said once when the run's calls start to queue; the status
                // line says it while they wait.
                let already = self.calls.values().any(|c| c.queued_behind.is_some());
                let call = self.calls.get_mut(id)?;
                call.queued_behind = *behind;
                let behind = behind.filter(|_| !already)?;
                Some(format!(
                    "{} queued behind {} for the provider (max_concurrency)",
                    who(&call.model, &call.stage),
                    requests(behind)
                ))
            }
            Event::CallFinished(record) => {
                let ok = record.error.is_none();
                if let Some(call) = self.calls.get_mut(&record.id) {
                    call.outcome = Some(ok);
                    call.queued_behind = None;
                }
                let who = who(&record.model, &record.stage);
                let secs = f64::from(record.latency_ms) / 1000.0;
                let what = match &record.error {
                    None => format!("{who} answered in {secs:.1} s"),
                    Some(error) => format!("{who} failed after {secs:.1} s: {error}"),
                };
                Some(format!("{what} ({})", self.tally()))
            }
            Event::Note { plugin, message } => Some(format!("{plugin}: {message}")),
            Event::Fallback { id, from, to, why } => Some(format!(
                "chorus: call {id}: {from} failed ({why}); asking its fallback {to}"
            )),
            _ => None,
        }
    }

    /// Marks the run's result as ready: progress reaches 1.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// How far the run is, in [0, 1]: below 1 until [`Self::finish`].
    pub fn progress(&self) -> f64 {
        if self.finished {
            return 1.0;
        }
        let Some(stage) = self.stage else {
            return 0.0;
        };
        let (low, high) = band(stage);
        let (done, expected) = self.band_calls(stage);
        let within = if expected == 0 {
            0.0
        } else {
            done as f64 / expected as f64
        };
        (low + (high - low) * within).min(UNFINISHED_CEILING)
    }

    /// Where progress goes next if nothing unexpected happens: the value
    /// after the next call finishes, or the end of the stage's band. A
    /// heartbeat may creep toward it without ever reaching it.
    pub fn next_milestone(&self) -> f64 {
        if self.finished {
            return 1.0;
        }
        let Some(stage) = self.stage else {
            return band(Stage::Select).1;
        };
        let (low, high) = band(stage);
        let (done, expected) = self.band_calls(stage);
        if done < expected {
            low + (high - low) * (done + 1) as f64 / expected as f64
        } else {
            high
        }
        .min(UNFINISHED_CEILING)
    }

    /// Calls finished and expected within `stage`'s band.
    fn band_calls(&self, stage: Stage) -> (usize, usize) {
        let in_band = || self.calls.values().filter(move |c| c.band == stage);
        let done = in_band().filter(|c| c.outcome.is_some()).count();
        let started = in_band().count();
        let expected = match (stage, self.fan_out) {
            (Stage::FanOut, Some(n)) => n.max(started),
            _ => started,
        };
        (done, expected)
    }

    /// The calls still awaited, longest first: model (and stage when it is
    /// not the fan-out, and the tokens streamed so far once there are some)
    /// and how long they have been waited on.
    pub fn awaited(&self, now: Instant) -> Vec<(String, Duration)> {
        let mut awaited: Vec<(String, Duration)> = self
            .calls
            .values()
            .filter(|c| c.outcome.is_none())
            .map(|c| {
                let mut who = who(&c.model, &c.stage);
                if let Some(behind) = c.queued_behind {
                    who.push_str(&format!(" [queued behind {}]", requests(behind)));
                } else if c.tokens > 0 {
                    who.push_str(&format!(" [{} tokens so far]", c.tokens));
                }
                (who, now.saturating_duration_since(c.since))
            })
            .collect();
        awaited.sort_by_key(|(_, waited)| std::cmp::Reverse(*waited));
        awaited
    }

    /// One line on where the run stands now, e.g. `3/5 answered; waiting on
    /// x-ai/grok-4 for 41 s`. Built from the state, never from an earlier
    /// line.
    pub fn status(&self, now: Instant) -> String {
        let head = match self.stage {
            None => "starting".to_owned(),
            Some(Stage::FanOut) => self.tally(),
            Some(Stage::Synthesize) => format!("synthesizing ({})", self.tally()),
            Some(stage) => stage.as_str().to_owned(),
        };
        let awaited = self.awaited(now);
        if awaited.is_empty() {
            return format!(
                "{head}; {} s in",
                now.saturating_duration_since(self.started).as_secs()
            );
        }
        format!("{head}; waiting on {}", waiting_on(&awaited))
    }

    /// `k/n answered`, with failures when there are some.
    fn tally(&self) -> String {
        let fan_out = || self.calls.values().filter(|c| &*c.stage == "fan-out");
        let answered = fan_out().filter(|c| c.outcome == Some(true)).count();
        let failed = fan_out().filter(|c| c.outcome == Some(false)).count();
        let total = self.fan_out.unwrap_or_else(|| fan_out().count());
        if failed == 0 {
            format!("{answered}/{total} answered")
        } else {
            format!("{answered}/{total} answered, {failed} failed")
        }
    }
}

fn band(stage: Stage) -> (f64, f64) {
    let at = BANDS
        .iter()
        .position(|(s, _)| *s == stage)
        .unwrap_or_default();
    let low = BANDS[at].1;
    let high = BANDS.get(at + 1).map_or(UNFINISHED_CEILING, |(_, l)| *l);
    (low, high)
}

fn requests(n: u32) -> String {
    if n == 1 {
        "1 request".to_owned()
    } else {
        format!("{n} requests")
    }
}

fn who(model: &str, stage: &str) -> String {
    if stage == "fan-out" {
        model.to_owned()
    } else {
        format!("{model} ({stage})")
    }
}

/// `m3, m4 for 12 s` when the waits round alike, else `m3 (41 s), judge
/// (3 s)`; past a few names, `and N more`.
fn waiting_on(awaited: &[(String, Duration)]) -> String {
    let secs = |d: &Duration| d.as_secs();
    let named = &awaited[..awaited.len().min(NAMED)];
    let more = awaited.len() - named.len();
    let all_alike = awaited.iter().all(|(_, d)| secs(d) == secs(&awaited[0].1));
    let mut text = if all_alike {
        named
            .iter()
            .map(|(who, _)| who.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        named
            .iter()
            .map(|(who, d)| format!("{who} ({} s)", secs(d)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    if all_alike {
        text.push_str(&format!(" for {} s", secs(&awaited[0].1)));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatRequest;
    use crate::record::{CallError, CallRecord};

    fn started(id: u32, model: &str, stage: &str) -> Event {
        Event::CallStarted {
            id,
            stage: Arc::from(stage),
            request: Arc::new(ChatRequest {
                label: "panel".into(),
                model: model.into(),
                messages: vec![],
                sampling: Default::default(),
                response_format: None,
                attachments: Default::default(),
                placed: Vec::new(),
                tools: None,
            }),
        }
    }

    fn finished(id: u32, model: &str, stage: &str, ok: bool) -> Event {
        Event::CallFinished(Arc::new(CallRecord {
            id,
            stage: stage.into(),
            label: "panel".into(),
            model: model.into(),
            status: if ok { "ok" } else { "failed" }.into(),
            latency_ms: 1500,
            attempts: 1,
            error: (!ok).then(|| CallError {
                kind: "timeout".into(),
                status: None,
                message: "slow".into(),
            }),
            reply: ok.then(|| Arc::new("an answer".into())),
            ..CallRecord::default()
        }))
    }

    /// A run of five panel calls and one synthesis, as events.
    fn run() -> Vec<Event> {
        let mut events = vec![
            Event::Stage(Stage::Select),
            Event::Stage(Stage::Prompt),
            Event::Stage(Stage::FanOut),
            Event::FanOut { calls: 5 },
        ];
        events.extend((0..5).map(|i| started(i, &format!("m{i}"), "fan-out")));
        events.extend((0..5).map(|i| finished(i, &format!("m{i}"), "fan-out", i != 2)));
        events.push(Event::Stage(Stage::Synthesize));
        events.push(started(5, "synth", "synthesize"));
        events.push(finished(5, "synth", "synthesize", true));
        events
    }

    #[test]
    fn progress_only_grows_and_reaches_one_only_when_finished() {
        let mut watch = Watch::new();
        let mut last = watch.progress();
        for event in run() {
            watch.observe(&event);
            let now = watch.progress();
            assert!(now >= last, "{now} < {last} after {event:?}");
            assert!(now < 1.0);
            assert!(watch.next_milestone() >= now);
            last = now;
        }
        watch.finish();
        assert_eq!(watch.progress(), 1.0);
    }

    #[test]
    fn lines_say_who_answered_and_who_is_awaited_without_snowballing() {
        let mut watch = Watch::new();
        let events = run();
        for event in &events[..9] {
            watch.observe(event);
        }
        let now = Instant::now() + Duration::from_secs(41);
        assert_eq!(
            watch.status(now),
            "0/5 answered; waiting on m0, m1, m2 and 2 more for 41 s"
        );
        assert_eq!(
            watch.observe(&events[9]).unwrap(),
            "m0 answered in 1.5 s (1/5 answered)"
        );
        for event in &events[10..12] {
            watch.observe(event);
        }
        assert_eq!(
            watch.status(now),
            "2/5 answered, 1 failed; waiting on m3, m4 for 41 s"
        );
        // The status line is rebuilt each time, never from the last one.
        assert_eq!(watch.status(now), watch.status(now));
        watch.observe(&events[12]);
        assert_eq!(
            watch.observe(&events[13]).unwrap(),
            "m4 answered in 1.5 s (4/5 answered, 1 failed)"
        );
        watch.observe(&events[14]);
        watch.observe(&events[15]);
        assert!(
            watch.status(now).starts_with(
                "synthesizing (4/5 answered, 1 failed); waiting on synth (synthesize)"
            ),
            "{}",
            watch.status(now)
        );
    }

    #[test]
    fn a_call_waiting_for_a_provider_permit_says_how_many_requests_are_ahead() {
        let mut watch = Watch::new();
        let events = run();
        for event in &events[..9] {
            watch.observe(event);
        }
        let queued = |id, behind| Event::CallQueued { id, behind };
        assert_eq!(
            watch.observe(&queued(0, Some(12))).unwrap(),
            "m0 queued behind 12 requests for the provider (max_concurrency)"
        );
        // One line when the run starts to queue, not one per call.
        assert_eq!(watch.observe(&queued(1, Some(13))), None);
        let now = Instant::now() + Duration::from_secs(41);
        assert_eq!(
            watch.status(now),
            "0/5 answered; waiting on m0 [queued behind 12 requests], \
             m1 [queued behind 13 requests], m2 and 2 more for 41 s"
        );
        watch.observe(&queued(0, None));
        watch.observe(&queued(1, None));
        assert_eq!(
            watch.status(now),
            "0/5 answered; waiting on m0, m1, m2 and 2 more for 41 s"
        );
    }

    #[test]
    fn a_streaming_call_says_how_many_tokens_arrived() {
        let mut watch = Watch::new();
        let events = run();
        for event in &events[..9] {
            watch.observe(event);
        }
        watch.observe(&Event::CallTokens { id: 1, tokens: 230 });
        let now = Instant::now() + Duration::from_secs(41);
        assert_eq!(
            watch.status(now),
            "0/5 answered; waiting on m0, m1 [230 tokens so far], m2 and 2 more for 41 s"
        );
    }
}
