//! A run's money: the ceiling (`limits.max_cost_usd`, or a call's lower
//! `max_cost_usd` option), what has been spent, and what calls in flight
//! could still cost. A call whose worst case — its prompt (estimated) plus
//! its `max_tokens`, at the model's prices, plus its web search's price —
//! would cross the ceiling is not started; the reason names `max_cost_usd`.

use std::sync::Mutex;

use crate::llm::{ChatRequest, Llm, estimate_prompt_tokens};
use crate::record::show_usd;

/// Where the ceiling comes from, for messages.
#[derive(Debug, Clone)]
pub struct Ceiling {
    pub usd: f64,
    /// `limits.max_cost_usd` or `the call's max_cost_usd option`.
    pub source: String,
}

pub struct Budget {
    ceiling: Option<Ceiling>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    spent: f64,
    in_flight: f64,
}

/// The worst case a started call holds against the ceiling until it ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reservation {
    worst: f64,
}

impl Budget {
    pub fn new(ceiling: Option<Ceiling>) -> Self {
        Self {
            ceiling,
            state: Mutex::new(State::default()),
        }
    }

    /// Admits `request` (searching the web for `search_usd` more, if it
    /// does) or says why not. Without a ceiling, every call is.
    pub fn reserve(
        &self,
        llm: &Llm,
        request: &ChatRequest,
        search_usd: f64,
    ) -> Result<Reservation, String> {
        let Some(ceiling) = &self.ceiling else {
            return Ok(Reservation::default());
        };
        let worst = worst_case(llm, request, search_usd).map_err(|why| {
            format!(
                "not started: its worst-case cost is unknown ({why}), and the run may spend at most {} \
                 (max_cost_usd, from {})",
                show_usd(ceiling.usd),
                ceiling.source
            )
        })?;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let total = state.spent + state.in_flight + worst.usd;
        if total > ceiling.usd {
            return Err(format!(
                "not started: its worst case ({}: ~{} prompt tokens + {} max_tokens{}) would take the run to {}, \
                 over max_cost_usd = {} (from {}; {} spent, {} in flight)",
                show_usd(worst.usd),
                worst.prompt_tokens,
                worst.max_tokens,
                if search_usd > 0.0 {
                    format!(" + {} of web search", show_usd(search_usd))
                } else {
                    String::new()
                },
                show_usd(total),
                show_usd(ceiling.usd),
                ceiling.source,
                show_usd(state.spent),
                show_usd(state.in_flight)
            ));
        }
        state.in_flight += worst.usd;
        Ok(Reservation { worst: worst.usd })
    }

    /// A call ended: its cost (the provider's figure or an estimate)
    /// replaces its worst case. Unknown cost counts as the worst case.
    pub fn settle(&self, reservation: Reservation, cost: Option<f64>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.in_flight = (state.in_flight - reservation.worst).max(0.0);
        state.spent += cost
            .filter(|c| c.is_finite() && *c >= 0.0)
            .unwrap_or(reservation.worst);
    }

    pub fn ceiling(&self) -> Option<&Ceiling> {
        self.ceiling.as_ref()
    }

    /// USD the run may still commit: the ceiling less what was spent and
    /// what calls in flight could still cost; `None` without a ceiling.
    pub fn left(&self) -> Option<f64> {
        let ceiling = self.ceiling.as_ref()?;
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Some((ceiling.usd - state.spent - state.in_flight).max(0.0))
    }
}

/// A request's worst-case cost in USD: its prompt (estimated) plus its
/// `max_tokens` (or the model's limit) at the model's prices; why not, when
/// that is unknown.
pub fn worst_case_usd(llm: &Llm, request: &ChatRequest) -> Result<f64, String> {
    worst_case(llm, request, 0.0).map(|worst| worst.usd)
}

struct Worst {
    usd: f64,
    prompt_tokens: u64,
    max_tokens: u64,
}

/// The worst case, `search_usd` of web search included.
fn worst_case(llm: &Llm, request: &ChatRequest, search_usd: f64) -> Result<Worst, String> {
    let Some(model) = llm.model(&request.model) else {
        // An unknown model fails before it is sent: it costs nothing.
        return Ok(Worst {
            usd: 0.0,
            prompt_tokens: 0,
            max_tokens: 0,
        });
    };
    let prompt_tokens = estimate_prompt_tokens(request);
    let max_tokens = llm
        .max_tokens(request)
        .or(model.max_output_tokens)
        .map(u64::from)
        .or_else(|| {
            model
                .context_window
                .map(|w| u64::from(w).saturating_sub(prompt_tokens))
        })
        .ok_or_else(|| {
            format!(
                "no max_tokens, and no max_output_tokens or context_window for `{}`",
                model.id
            )
        })?;
    let usd = model.cost(prompt_tokens, max_tokens).ok_or_else(|| {
        format!(
            "no prices for `{}`: set models.\"{}\".input_price and output_price (0 for a free model), \
             or let the provider's catalog fill them",
            model.id, model.id
        )
    })?;
    Ok(Worst {
        usd: usd + search_usd,
        prompt_tokens,
        max_tokens,
    })
}
