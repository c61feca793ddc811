//! MCP as clients meet it: the official SDKs and the conformance suite, the
//! protocol in raw JSON, tools and resources, tasks, subscriptions,
//! logging, cancellation, load, live reloads.

pub(crate) mod apps;
pub(crate) mod broken_stderr;
pub(crate) mod cancel;
pub(crate) mod clients;
pub(crate) mod conformance;
pub(crate) mod live_swap;
pub(crate) mod load;
pub(crate) mod logging;
pub(crate) mod protocol;
pub(crate) mod runs;
pub(crate) mod schema;
pub(crate) mod subscriptions;
pub(crate) mod tasks;
