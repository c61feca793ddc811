//! chorus: an MCP server that asks several LLMs at once and merges their
//! answers, with the strategy decisions made by WebAssembly plugins.
//!
//! Dependencies point one way (docs/architecture.md draws it):
//! `cli` -> {`eval`, `web`, `anthropic` -> `openai`, `mcp`} -> `http` (the front door)
//! -> `app` -> {`telemetry`, `metrics`, `respcache`, `budget`} ->
//! {`pipeline`, `store`} -> `events` -> `plugins` -> {`oci`, `record`} ->
//! {`llm`, `client`} -> `config` -> `attach` -> {`text`, `notice`,
//! `token`, `signal`}. A module uses only those below it;
//! where a lower one needs a higher one's service it declares a port (the
//! pipeline's `CallCache`, implemented by `respcache`, plugged in by `app`).
//!
//! Where things go: a store backend is one `impl store::Backend`; a door
//! (MCP, OpenAI's API, Anthropic's, the viewer, a command) calls `app` and never checks a limit
//! itself (`app/gate.rs` is the one gate); an HTTP door is an `http::Door`
//! the front door serves, behind `http::check`; a config section is a file
//! of `config/` with its struct, default and `check`; unit tests live in
//! a `tests.rs` beside their module, end-to-end tests in `tests/e2e/`, one
//! file per feature.
//!
//! Nothing prints with `print!`/`eprint!` (or their `ln` forms) but the
//! terminal commands of `cli` that allow it: a server's lines go through
//! `tracing` or [`notice`], which a closed stderr cannot make panic.

#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod anthropic;
pub mod app;
pub mod attach;
pub mod budget;
pub mod cli;
pub mod client;
pub mod config;
pub mod eval;
pub mod events;
pub mod experiment;
pub mod http;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod notice;
pub mod oci;
pub mod openai;
pub mod pipeline;
pub mod plugins;
pub mod record;
pub mod respcache;
pub mod signal;
pub mod store;
pub mod telemetry;
pub mod text;
pub mod token;
pub mod web;
