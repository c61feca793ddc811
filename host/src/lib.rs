//! chorus: an MCP server that asks several LLMs at once and merges their
//! answers, with the strategy decisions made by WebAssembly plugins.
//!
//! Dependencies point one way:
//! `mcp`/`cli` -> `pipeline` -> {`plugins`, `llm`, `runs`} -> `config`.

pub mod cli;
pub mod config;
pub mod llm;
pub mod mcp;
pub mod pipeline;
pub mod plugins;
pub mod runs;
