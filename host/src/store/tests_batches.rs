//! The events of one run as a writer gets them, and how a batch pairs the
//! events of one row (each backend's writer tests what it writes of them).

use std::sync::Arc;

use super::{Fixture, fixture};
use crate::store::event::{Begin, End, Msg, Part, pair};

fn begin(run: &Fixture) -> Begin {
    Begin {
        experiment: None,
        request: run.request.clone(),
        follow_up_of: Some("earlier".into()),
        resynthesis_of: None,
        client: Some("alice".into()),
        attachments: None,
        files: crate::attach::Attachments::default(),
        bytes_let_go: None,
        started_at: 1_000,
        deadline_at: 61_000,
    }
}

/// A whole run as the recorder sends it: start, plan, each call's start,
/// each call's end, the run's end.
pub(in crate::store) fn events(run: &Fixture) -> Vec<Msg> {
    let run_id = run.request.run_id.clone();
    let mut events = vec![
        Msg::Begin(begin(run)),
        Msg::Plan {
            run_id: run_id.clone(),
            plan: run.plan.clone(),
        },
    ];
    for (id, request) in (0..).zip(&run.requests) {
        events.push(Msg::CallStarted {
            run_id: run_id.clone(),
            id,
            stage: Arc::from("fan-out"),
            request: request.clone(),
            at: 1_010,
        });
    }
    for call in &run.calls {
        events.push(Msg::CallFinished {
            run_id: run_id.clone(),
            call: call.clone(),
        });
    }
    events.push(Msg::End {
        begin: begin(run),
        plan: Some(run.plan.clone()),
        end: End::Done(run.record.clone()),
        lost_events: 0,
        at: 2_000,
        ack: None,
    });
    events
}

#[test]
fn only_events_of_one_row_are_paired() {
    let a = fixture("a", "ask", 2);
    let b = fixture("b", "ask", 1);
    let [
        begin_a,
        plan_a,
        started_a0,
        started_a1,
        finished_a0,
        finished_a1,
        end_a,
    ] = <[Msg; 7]>::try_from(events(&a)).ok().unwrap();
    let [begin_b, _, started_b0, finished_b0, _] = <[Msg; 5]>::try_from(events(&b)).ok().unwrap();
    let batch = [
        started_a0,  // 0: its run's start was in an earlier batch
        begin_b,     // 1
        plan_a,      // 2: alone, its run's start not here
        started_b0,  // 3
        finished_a1, // 4: alone, its start not here
        begin_a,     // 5: alone, no plan after it
        finished_a0, // 6: with 0
        finished_b0, // 7: with 3
        end_a,       // 8
        started_a1,  // 9: its end came before it
    ];
    use Part::{Alone, With, Written};
    assert_eq!(
        pair(&batch),
        [
            With(6),
            Alone,
            Alone,
            With(7),
            Alone,
            Alone,
            Written,
            Written,
            Alone,
            Alone
        ]
    );
}
