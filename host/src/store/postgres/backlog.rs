//! The PostgreSQL writer's backlog bounds: what is kept in memory while
//! the database cannot be reached is held to a number of events and to
//! the attachment bytes they hold on to. Over either, the oldest events
//! go first — for bytes, those that carry them — and a run's end last of
//! all: an end over the byte bound keeps its run and lets go of the bytes,
//! which the run then records as not kept, with why.

use std::collections::VecDeque;

use crate::attach::Body;
use crate::store::event::Msg;

/// What a bound let go of.
#[derive(Debug, Default, PartialEq)]
pub struct LetGo {
    /// Events dropped.
    pub events: usize,
    /// Attachment bytes no longer held (counted per event).
    pub bytes: u64,
    /// Runs' ends kept without their attachment bytes.
    pub ends_stripped: usize,
}

/// The attachment bytes `msg` holds on to. Events of one run share them,
/// so a sum over events is a bound from above.
pub fn held_bytes(msg: &Msg) -> u64 {
    let files = match msg {
        Msg::Begin(begin) | Msg::End { begin, .. } => &begin.files,
        Msg::CallStarted { request, .. } => &request.attachments,
        _ => return 0,
    };
    files
        .iter()
        .map(|a| match &a.body {
            Body::Url(_) => 0,
            Body::Base64(data) if data.is_empty() => 0,
            _ => a.bytes as u64,
        })
        .sum()
}

/// Holds `pending` to `max_events` events and `max_bytes` attachment
/// bytes (see the module's note).
pub fn bound(pending: &mut VecDeque<Msg>, max_events: usize, max_bytes: u64) -> LetGo {
    let mut let_go = LetGo::default();
    let mut over = pending.len().saturating_sub(max_events);
    if over > 0 {
        let before = pending.len();
        pending.retain(|m| {
            if over > 0 && !matches!(m, Msg::End { .. }) {
                over -= 1;
                let_go.bytes += held_bytes(m);
                false
            } else {
                true
            }
        });
        while over > 0 {
            let Some(m) = pending.pop_front() else { break };
            let_go.bytes += held_bytes(&m);
            over -= 1;
        }
        let_go.events = before - pending.len();
    }

    let mut held: u64 = pending.iter().map(held_bytes).sum();
    if held <= max_bytes {
        return let_go;
    }
    let before = pending.len();
    pending.retain(|m| {
        let bytes = held_bytes(m);
        if held > max_bytes && bytes > 0 && !matches!(m, Msg::End { .. }) {
            held -= bytes;
            let_go.bytes += bytes;
            false
        } else {
            true
        }
    });
    let_go.events += before - pending.len();
    let why = format!(
        "the run store could not be reached, and the runs waiting for it held more than {} of attachments",
        crate::text::show_bytes(max_bytes)
    );
    for m in pending.iter_mut() {
        if held <= max_bytes {
            break;
        }
        let bytes = held_bytes(m);
        if let Msg::End { begin, .. } = m
            && bytes > 0
        {
            begin.files = begin.files.without_bytes();
            begin.bytes_let_go = Some(why.clone());
            held -= bytes;
            let_go.bytes += bytes;
            let_go.ends_stripped += 1;
        }
    }
    let_go
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::attach::{Attachment, Attachments, Kind};
    use crate::plugins::Request;
    use crate::store::event::{Begin, End};

    fn begin(run: &str, bytes: usize) -> Begin {
        let files = (bytes > 0).then(|| Attachment {
            id: 1,
            name: "a.png".into(),
            kind: Kind::Image,
            mime: "image/png".into(),
            bytes,
            sha256: "00".into(),
            shape: Default::default(),
            body: Body::Base64(Arc::from("A".repeat(bytes * 4 / 3))),
        });
        Begin {
            experiment: None,
            request: Arc::new(Request {
                run_id: run.into(),
                pipeline: "ask".into(),
                prompt: "q".into(),
                options: json!({}),
                attachments: Vec::new(),
                tools: None,
            }),
            follow_up_of: None,
            resynthesis_of: None,
            client: None,
            attachments: None,
            files: Attachments::new(files.into_iter().collect()),
            bytes_let_go: None,
            started_at: 0,
            deadline_at: i64::MAX,
        }
    }

    fn end(run: &str, bytes: usize) -> Msg {
        Msg::End {
            begin: begin(run, bytes),
            plan: None,
            end: End::Cancelled,
            lost_events: 0,
            at: 0,
            ack: None,
        }
    }

    /// An event that carries no bytes.
    fn other() -> Msg {
        Msg::Flush(tokio::sync::oneshot::channel().0)
    }

    fn kinds(pending: &VecDeque<Msg>) -> Vec<(&'static str, u64)> {
        pending
            .iter()
            .map(|m| {
                let kind = match m {
                    Msg::Begin(_) => "begin",
                    Msg::End { .. } => "end",
                    _ => "other",
                };
                (kind, held_bytes(m))
            })
            .collect()
    }

    #[test]
    fn events_with_bytes_go_first_and_ends_keep_their_runs_without_them() {
        let mut pending: VecDeque<Msg> = VecDeque::from([
            Msg::Begin(begin("r1", 600)),
            other(),
            Msg::Begin(begin("r2", 600)),
            end("r1", 600),
            end("r2", 600),
        ]);
        // Under both bounds: nothing goes.
        assert_eq!(bound(&mut pending, 10, 10_000), LetGo::default());
        assert_eq!(pending.len(), 5);

        // 2400 bytes held, 1000 allowed: both begins go (they carry bytes;
        // the event without goes nowhere), then the older end lets go of
        // its bytes and keeps its run.
        let let_go = bound(&mut pending, 10, 1000);
        assert_eq!(
            let_go,
            LetGo {
                events: 2,
                bytes: 1800,
                ends_stripped: 1
            }
        );
        assert_eq!(kinds(&pending), [("other", 0), ("end", 0), ("end", 600)]);
        let Msg::End { begin, .. } = &pending[1] else {
            unreachable!()
        };
        assert_eq!(begin.request.run_id, "r1");
        assert_eq!(begin.files.len(), 1, "what was attached is still said");
        assert_eq!(begin.files.iter().next().unwrap().bytes, 600);
        assert!(
            begin
                .bytes_let_go
                .as_deref()
                .is_some_and(|why| why.contains("more than 1000 bytes of attachments")),
            "{:?}",
            begin.bytes_let_go
        );
    }

    #[test]
    fn the_event_bound_still_drops_the_oldest_and_ends_last() {
        let mut pending: VecDeque<Msg> =
            VecDeque::from([end("r1", 0), Msg::Begin(begin("r2", 5)), other()]);
        let let_go = bound(&mut pending, 1, u64::MAX);
        assert_eq!(let_go.events, 2);
        assert_eq!(let_go.bytes, 5);
        assert_eq!(kinds(&pending), [("end", 0)]);
    }
}
