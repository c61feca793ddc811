//! The web-search keys of the configuration: how much of the web a model
//! reads (`web_search_context`) and how a provider is asked to search
//! (`providers.NAME.web_search`). What a run sends is decided in
//! `llm::search`.

use serde::{Deserialize, Serialize};

/// `web_search_context`: how much search context a model is given, as the
/// providers' `search_context_size` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchContext {
    Low,
    Medium,
    High,
}

impl SearchContext {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// `providers.NAME.web_search`: the switch a provider understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SearchStyle {
    /// OpenRouter's web plugin: `plugins: [{"id": "web", "max_results": N}]`
    /// (and `web_search_options` when a context size is asked).
    OpenrouterPlugin,
    /// The OpenAI-compatible `web_search_options: {"search_context_size": …}`.
    WebSearchOptions,
    /// The provider cannot search; a run that asks says so in its notes.
    None,
}

impl SearchStyle {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenrouterPlugin => "openrouter-plugin",
            Self::WebSearchOptions => "web-search-options",
            Self::None => "none",
        }
    }
}
