//! OpenAI-compatible providers as they really behave: several at once,
//! model lists, failures and the upstream fault matrix, timeouts,
//! streaming, first tokens, fairness, money, prompt caching, web search,
//! gateways, secrets.

pub(crate) mod catalog;
pub(crate) mod failures;
pub(crate) mod fairness;
pub(crate) mod first_token;
pub(crate) mod gateways;
pub(crate) mod money;
pub(crate) mod prompt_cache;
pub(crate) mod secrets;
pub(crate) mod several;
pub(crate) mod streaming;
pub(crate) mod timeouts;
pub(crate) mod upstream;
pub(crate) mod web_search;
