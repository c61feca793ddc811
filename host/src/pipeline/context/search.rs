//! A call's admission with its web search: the search's price is part of
//! its worst case, and a provider that cannot search is said out loud in
//! the run's notes (once per provider), not silently dropped.

use super::RunContext;
use crate::llm::{ChatRequest, SearchPlan};
use crate::pipeline::budget::Reservation;

impl RunContext {
    /// Reserves `request`'s worst case, web search included, or says why
    /// not.
    pub(super) fn reserve(&self, request: &ChatRequest) -> Result<Reservation, String> {
        let plan = self.llm.search_plan(&request.model, self.search.as_ref());
        if let SearchPlan::Unsupported { provider } = &plan {
            let mut named = self.unsearched.lock().unwrap_or_else(|e| e.into_inner());
            if !named.contains(provider) {
                named.push(provider.clone());
                self.note(format!(
                    "web search was asked, but provider `{provider}` cannot search \
                     (providers.{provider}.web_search = \"none\"): `{}` answered without it.",
                    request.model
                ));
            }
        }
        self.budget.reserve(&self.llm, request, plan.usd())
    }
}
