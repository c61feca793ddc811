//! Fallback models, walked by the run: when a seat's model fails for good
//! (not found or retired, the account out of credit, the provider down
//! after its retries), the next model of its chain is asked the same
//! request, once each, within the run's deadline, call budget and cost
//! ceiling. The call's record names what was tried before
//! (`fallback_from`), and the result's notes say which seat was filled by
//! whom. chorus walks the chain itself, so it works with every provider.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::{Live, RunContext};
use crate::events::Event;
use crate::llm::{CallHooks, ChatRequest, Completion, Failure, FailureKind};
use crate::pipeline::budget::Reservation;

/// Whether `failure` is one another model could avoid: the model is gone
/// or refused, the account cannot pay, or the provider stayed down through
/// its retries. A cut, a budget stop, a cancellation, a token limit or the
/// run's own deadline are not.
pub(super) fn lasting(failure: &Failure) -> bool {
    match failure.kind {
        FailureKind::UnknownModel
        | FailureKind::MissingApiKey
        | FailureKind::Connection
        | FailureKind::RateLimited => true,
        FailureKind::HttpStatus => !matches!(failure.status, Some(400 | 413 | 422)),
        _ => false,
    }
}

impl RunContext {
    /// Sends `request`, then down its model's fallback chain while the
    /// failure is lasting. Returns the completion, the request it answers
    /// (the last one sent), its cost reservation, and what was tried before
    /// it (`model: failure`).
    pub(super) async fn send_with_fallbacks(
        &self,
        id: u32,
        mut request: Arc<ChatRequest>,
        mut reservation: Reservation,
        live: &Live,
        hooks: &CallHooks<'_>,
    ) -> (Completion, Arc<ChatRequest>, Reservation, Vec<String>) {
        let chain = self
            .limits
            .fallbacks
            .get(&request.model)
            .cloned()
            .unwrap_or_default();
        let first = request.model.clone();
        let mut completion = self.send(&request, hooks, live).await;
        let mut tried = Vec::new();
        for next in chain {
            let Err(failure) = &completion.outcome else {
                break;
            };
            if !lasting(failure) || Instant::now() >= self.deadline {
                break;
            }
            let why = self.said(&request.model, failure);
            let mut asked = ChatRequest::clone(&request);
            asked.model = next.clone();
            if self.calls.take().is_none() {
                self.note(format!(
                    "{} failed ({why}); its fallback {next} was not asked: the run's calls are spent (limits.max_calls_per_run).",
                    request.model
                ));
                break;
            }
            let next_reservation = match self.reserve(&asked, hooks.search) {
                Ok(r) => r,
                Err(over) => {
                    self.note(format!(
                        "{} failed ({why}); its fallback {next} was not asked: {over}",
                        request.model
                    ));
                    break;
                }
            };
            let spent = self.streamed_cost(&request, live).or(Some(0.0));
            self.budget.settle(reservation, spent);
            reservation = next_reservation;
            tried.push(format!("{}: {why}", request.model));
            self.emit(Event::Fallback {
                id,
                from: request.model.clone(),
                to: next.clone(),
                why,
            });
            request = Arc::new(asked);
            // What the failed model streamed is settled above; the
            // fallback's tokens and lost attempts count afresh.
            live.tokens.store(0, Ordering::Relaxed);
            live.attempts.lost_tokens.store(0, Ordering::Relaxed);
            live.attempts.lost_attempts.store(0, Ordering::Relaxed);
            *live.serving.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((request.clone(), tried.clone()));
            // Boxed: held inline, a fallback's send and what the loop keeps
            // beside it would enlarge every call's future, fallback or not.
            completion = Box::pin(self.send(&request, hooks, live)).await;
        }
        completion.attempts = live.attempts.started();
        if !tried.is_empty() {
            let outcome = match &completion.outcome {
                Ok(_) => format!("its seat was filled by {}", request.model),
                Err(f) => format!(
                    "{} failed too ({})",
                    request.model,
                    self.said(&request.model, f)
                ),
            };
            self.note(format!(
                "{first} failed for good; tried its fallbacks: {}, then {outcome}.",
                tried.join("; ")
            ));
        }
        (completion, request, reservation, tried)
    }

    /// A failure as the notes say it: an account out of credit (402) is
    /// the account's problem at its provider, not a dead model.
    fn said(&self, model: &str, failure: &Failure) -> String {
        if failure.status == Some(402) {
            let provider = self
                .llm
                .model(model)
                .map(|m| m.provider.clone())
                .unwrap_or_else(|| "the provider".to_owned());
            return format!(
                "HTTP 402: the account is out of credit at {provider} ({})",
                failure.message
            );
        }
        failure.to_string()
    }
}
