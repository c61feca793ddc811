//! chorus: an MCP server that asks several LLMs at once and merges their
//! answers, with the strategy decisions made by WebAssembly plugins.
//!
//! Dependencies point one way:
//! `cli`/`mcp`/`web` -> `app` -> {`pipeline`, `store`, `metrics`,
//! `telemetry`, `budget`}; `budget` -> `store`; `store`, `metrics` and
//! `telemetry` watch `pipeline`'s events (`telemetry` names models'
//! providers and runs' failures as `metrics` does);
//! `pipeline` -> {`plugins`, `llm`} -> `config`; `plugins` -> `oci` (plugin
//! components on registries) -> `config`; everything may use `record`,
//! the leaf that describes a run, `client`, the leaf that says who asks,
//! and `text`, the leaf that cuts strings.
//!
//! Nothing prints with `print!`/`eprint!` (or their `ln` forms) but the
//! terminal commands of `cli` that allow it: a server's lines go through
//! `tracing` or [`notice`], which a closed stderr cannot make panic.

#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod app;
pub mod attach;
pub mod budget;
pub mod cli;
pub mod client;
pub mod config;
pub mod eval;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod notice;
pub mod oci;
pub mod pipeline;
pub mod plugins;
pub mod record;
pub mod respcache;
pub mod store;
pub mod telemetry;
pub mod text;
pub mod web;
