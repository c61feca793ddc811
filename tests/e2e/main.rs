//! End to end: the real `chorus` binary, driven over stdio by a real MCP
//! client (rmcp), against a mock provider on 127.0.0.1.

#[path = "../support/mod.rs"]
mod support;

mod adaptive;
mod analysis;
mod apps;
mod attachments;
mod cancel;
mod catalog;
mod cli;
mod clients;
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
mod history;
mod http;
mod live_swap;
mod load;
mod metrics;
mod money;
mod no_config;
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
mod sign_in;
mod stragglers;
mod strategies;
mod streaming;
mod tasks;
mod teams;
mod timeouts;
mod toolchains;
mod traces;
mod upstream;
mod viewer;
mod web_search;
