//! End to end: the real `chorus` binary, driven over stdio by a real MCP
//! client (rmcp), against a mock provider on 127.0.0.1.

#[path = "../support/mod.rs"]
mod support;

mod attachments;
mod mcp;
mod packaging;
mod providers;
mod store;
mod strategies;
mod web;
