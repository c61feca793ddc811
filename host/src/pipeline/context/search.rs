//! A call's admission with its web search: the run's search goes to the
//! panel's calls, the search's price is part of its worst case, and a provider that cannot search is said out loud in
//! the run's notes (once per provider), not silently dropped.

use super::RunContext;
use crate::llm::{ChatRequest, SearchPlan, WebSearch};
use crate::pipeline::budget::Reservation;

/// The stage of the panel's calls: the run's search is theirs (a
/// synthesizer's or judge's call searches only if its model does).
const PANEL_STAGE: &str = "fan-out";

/// A run's web search (`search`) as it applies to calls of `stage`.
pub fn search_of_stage<'a>(search: Option<&'a WebSearch>, stage: &str) -> Option<&'a WebSearch> {
    search.filter(|_| stage == PANEL_STAGE)
}

impl RunContext {
    /// The run's web search for calls of `stage`.
    pub(super) fn search_for(&self, stage: &str) -> Option<&WebSearch> {
        search_of_stage(self.search.as_ref(), stage)
    }

    /// Reserves `request`'s worst case, web search included, or says why
    /// not.
    pub(super) fn reserve(
        &self,
        request: &ChatRequest,
        search: Option<&WebSearch>,
    ) -> Result<Reservation, String> {
        let plan = self.llm.search_plan(&request.model, search);
        if let SearchPlan::Unsupported { provider } = &plan {
            let mut named = self.unsearched.lock().unwrap_or_else(|e| e.into_inner());
            if !named.contains(provider) {
                named.push(provider.clone());
                self.note(format!(
                    "web search was asked, but provider `{provider}` cannot search \
                     (providers.{provider}.web_search = \"none\"): its models answer without \
                     searching (the first was `{}`).",
                    request.model
                ));
            }
        }
        self.budget.reserve(&self.llm, request, plan.usd())
    }
}
