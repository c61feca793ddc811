//! End to end: the real `chorus` binary, driven over stdio by a real MCP
//! client (rmcp), against a mock provider on 127.0.0.1.

#[path = "../support/mod.rs"]
mod support;

mod cancel;
mod cli;
mod failures;
mod load;
mod polyglot;
mod runs;
mod sandbox;
mod scaffold;
mod selectors;
mod strategies;
mod toolchains;
mod upstream;
