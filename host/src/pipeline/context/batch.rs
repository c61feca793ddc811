//! One batch of calls, the fan-out's or a plugin's: admit (ids, the call
//! budget, the cost reservations, attachments a model cannot take), send
//! what was admitted at once, gather under the straggler policy, and note
//! what was skipped or cut.

use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::RunContext;
use crate::llm::{Attempts, ChatRequest, Completion, Failure, FailureKind, Priority};
use crate::pipeline::budget::Reservation;
use crate::pipeline::follow_up;
use crate::pipeline::stragglers::{self, Ended};

/// A call's live state, readable after it is cut.
pub(super) struct Live {
    pub(super) started: Instant,
    pub(super) tokens: AtomicU32,
    /// Milliseconds after `started` of the last tokens event.
    pub(super) last_event_ms: AtomicU64,
    /// What the attempts did so far (retries included).
    pub(super) attempts: Attempts,
    /// Its place among the requests waiting for the provider's permits.
    pub(super) priority: Priority,
    /// While it waits for one: 1 + the requests ahead of it; 0 otherwise.
    pub(super) queued: AtomicU32,
    /// Set once a fallback is asked: the request in flight and what was
    /// tried before it, for the record if the call is cut.
    pub(super) serving: Mutex<Option<(Arc<ChatRequest>, Vec<String>)>>,
    /// Its reply is the run's answer: its text goes out as it streams
    /// (`Event::AnswerText`).
    pub(super) answer: bool,
}

/// What admission decided for one request.
enum Admission {
    /// Sent, as call `id`, with its cost reserved.
    Send(u32, Reservation),
    /// Not sent: its worst case would cross the run's cost ceiling.
    Skip(u32, String),
    /// Not sent: its model cannot take the run's attachments.
    LeftOut(u32, Failure),
    /// Not sent: the run's call budget is spent (no id).
    Refuse,
}

/// A request with what admission decided for it.
type Admitted = (Admission, Arc<ChatRequest>);

/// What is sent: (position in the batch, call id, its reservation).
type Sending = Vec<(usize, u32, Reservation)>;

impl RunContext {
    /// Runs `requests` at once under the fan-out policy and the budgets;
    /// their outcomes in request order. `answer`: the batch is the one
    /// call whose reply is the run's answer (its text streams).
    pub(super) async fn gather(
        &self,
        stage: &str,
        requests: Vec<ChatRequest>,
        answer: bool,
    ) -> Vec<Completion> {
        let stage: Arc<str> = Arc::from(stage);
        let admitted = self.admit_batch(&stage, requests).await;
        let priority = Priority {
            stage_rank: self
                .next_rank
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            run_seq: self.run_seq,
        };
        let live: Vec<Live> = admitted.iter().map(|_| live(priority, answer)).collect();
        let (mut outcomes, sending) = self.settle_unsent(&stage, &admitted);
        self.send_gather(&stage, &admitted, &sending, &live, &mut outcomes)
            .await;
        outcomes.into_iter().flatten().collect()
    }

    /// Ids and budgets are settled before anything is sent, in request
    /// order, so ids follow the order plugins see.
    async fn admit_batch(&self, stage: &Arc<str>, mut requests: Vec<ChatRequest>) -> Vec<Admitted> {
        let left_out = self.place_attachments(stage, &mut requests).await;
        requests
            .into_iter()
            .zip(left_out)
            .map(|(mut request, left_out)| {
                follow_up::insert_into(&mut request, &self.history);
                if let Some(failure) = left_out {
                    return (
                        Admission::LeftOut(self.calls.number(), failure),
                        Arc::new(request),
                    );
                }
                let admission = match self.calls.admit() {
                    None => Admission::Refuse,
                    Some(id) => match self.reserve(&request, self.search_for(stage)) {
                        Ok(reservation) => Admission::Send(id, reservation),
                        Err(why) => Admission::Skip(id, why),
                    },
                };
                (admission, Arc::new(request))
            })
            .collect()
    }

    /// The outcomes of what is not sent, recorded; and what is, as
    /// (position, id, reservation).
    fn settle_unsent(
        &self,
        stage: &Arc<str>,
        admitted: &[Admitted],
    ) -> (Vec<Option<Completion>>, Sending) {
        let mut outcomes = Vec::with_capacity(admitted.len());
        let mut sending = Vec::new();
        let mut skipped = Vec::new();
        for (i, (admission, request)) in admitted.iter().enumerate() {
            let (id, failure) = match admission {
                Admission::Refuse => {
                    outcomes.push(Some(self.refuse(request)));
                    continue;
                }
                Admission::Send(id, reservation) => {
                    outcomes.push(None);
                    sending.push((i, *id, *reservation));
                    continue;
                }
                Admission::Skip(id, why) => {
                    skipped.push(request.model.clone());
                    (*id, Failure::new(FailureKind::OverBudget, why.clone()))
                }
                Admission::LeftOut(id, failure) => (*id, failure.clone()),
            };
            let mut completion = self.failed(request, failure, Duration::ZERO);
            completion.id = Some(id);
            self.record(id, stage, &completion, None);
            outcomes.push(Some(completion));
        }
        if let (Some(first), Some(ceiling)) = (skipped.first(), self.budget.ceiling()) {
            self.note(format!(
                "{} not started: the run may spend at most {} (max_cost_usd, from {}); the first skipped was {first}.",
                plural(skipped.len(), "call was", "calls were"),
                crate::record::show_usd(ceiling.usd),
                ceiling.source
            ));
        }
        (outcomes, sending)
    }

    /// Sends what was admitted at once and gathers it under the straggler
    /// policy; a call cut by it is recorded as cut, and noted.
    async fn send_gather(
        &self,
        stage: &Arc<str>,
        admitted: &[Admitted],
        sending: &Sending,
        live: &[Live],
        outcomes: &mut [Option<Completion>],
    ) {
        let policy = self.policy();
        let calls: Vec<_> = sending
            .iter()
            .map(|&(i, id, reservation)| {
                self.call(id, stage, &admitted[i].1, reservation, &live[i])
            })
            .collect();
        let ended = stragglers::gather(calls, &policy, |c: &Completion| c.outcome.is_ok()).await;
        let mut cut = Vec::new();
        let mut reason = String::new();
        for (&(i, id, reservation), end) in sending.iter().zip(ended) {
            outcomes[i] = Some(match end {
                Ended::Done(completion) => completion,
                Ended::Cut(why) => {
                    let request = &admitted[i].1;
                    let completion = self.cut(id, stage, request, reservation, &live[i], &why);
                    cut.push(request.model.clone());
                    reason = why;
                    completion
                }
            });
        }
        if !cut.is_empty() {
            self.note(format!(
                "{} cut ({}): {reason}; the answer rests on what arrived.",
                plural(cut.len(), "call was", "calls were"),
                cut.join(", "),
            ));
        }
    }
}

fn live(priority: Priority, answer: bool) -> Live {
    Live {
        started: Instant::now(),
        tokens: AtomicU32::new(0),
        last_event_ms: AtomicU64::new(u64::MAX),
        queued: AtomicU32::new(0),
        attempts: Attempts::default(),
        priority,
        serving: Mutex::new(None),
        answer,
    }
}

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}
