//! End to end: the real `chorus` binary, driven over stdio by a real MCP
//! client (rmcp), against a mock provider on 127.0.0.1.

#[path = "../support/mod.rs"]
mod support;

mod adaptive;
mod analysis;
mod apps;
mod attachment_history;
mod attachments;
mod balanced;
mod broken_stderr;
mod cancel;
mod catalog;
mod cli;
mod cli_door;
mod clients;
mod cold_start;
mod conformance;
// wait4 measures the CPU a run took: Unix only.
#[cfg(unix)]
mod deadlines;
mod dist;
mod drain;
mod dry_run;
mod eval;
mod failover;
mod failures;
mod fairness;
mod fallbacks;
mod first_contact;
mod first_token;
mod fitting;
mod gateways;
mod history;
mod http;
#[cfg(target_os = "linux")]
mod image;
mod live_swap;
mod load;
mod logging;
mod metrics;
mod money;
mod no_config;
mod oci_plugins;
mod openai;
mod pdf_bombs;
mod pdf_text;
mod plugin_attachments;
mod polyglot;
mod postgres;
mod prompt_cache;
mod protocol;
mod providers;
mod response_cache;
mod runs;
mod sandbox;
mod scaffold;
mod schema;
mod secrets;
mod selectors;
mod serving;
mod shared_limits;
mod sign_in;
mod single_attachments;
mod stragglers;
mod strategies;
mod streaming;
mod subscriptions;
mod tasks;
mod teams;
mod tenants;
mod timeouts;
mod toolchains;
mod traces;
mod upstream;
mod url_attachments;
mod viewer;
mod wal;
mod web_search;
