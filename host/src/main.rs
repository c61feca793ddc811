//! The `chorus` command: `serve` (the default) speaks MCP on stdio, `ask`
//! runs a pipeline from the terminal, `check` validates a configuration.

use std::process::ExitCode;

fn main() -> ExitCode {
    chorus::cli::main()
}
