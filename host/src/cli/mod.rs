//! Command-line parsing, logging setup and the subcommands. Logs always go
//! to stderr: in `serve`, stdout belongs to MCP.

mod ask;
mod check;
mod plugin;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::app::Chorus;

#[derive(Parser)]
#[command(
    name = "chorus",
    version,
    about = "Ask several LLMs at once; get one better answer. An MCP server."
)]
struct Cli {
    /// The configuration file. Default: $CHORUS_CONFIG, else the built-in plugins.toml.
    #[arg(long, short, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug, -vvv trace). $CHORUS_LOG overrides.
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default).
    Serve,
    /// Run a pipeline once: progress on stderr, the answer on stdout.
    Ask(ask::Args),
    /// Validate the configuration, load every plugin, and describe them.
    Check,
    /// Write strategy plugins: `chorus plugin new NAME --kind KIND --lang LANG`.
    #[command(subcommand)]
    Plugin(plugin::Command),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("chorus: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = cli.config.as_deref();
    runtime.block_on(async {
        match cli.command.unwrap_or(Command::Serve) {
            Command::Serve => serve(config).await,
            Command::Ask(args) => match load(config) {
                Ok(chorus) => ask::run(chorus, args).await,
                Err(code) => code,
            },
            Command::Check => check::run(config),
            Command::Plugin(command) => plugin::run(command),
        }
    })
}

/// Loads the configuration and every plugin, reporting problems on stderr.
fn load(config: Option<&std::path::Path>) -> Result<Arc<Chorus>, ExitCode> {
    let chorus = Chorus::discover(config).map_err(|e| {
        eprintln!("chorus: {e}");
        ExitCode::from(2)
    })?;
    for (provider, var) in chorus.runner.llm.missing_keys() {
        tracing::warn!(
            "provider `{provider}` needs the environment variable {var}, which is not set; its calls will fail"
        );
    }
    Ok(Arc::new(chorus))
}

async fn serve(config: Option<&std::path::Path>) -> ExitCode {
    let chorus = match load(config) {
        Ok(chorus) => chorus,
        Err(code) => return code,
    };
    tracing::info!(config = %chorus.loaded().origin, "chorus {} serving MCP on stdio", env!("CARGO_PKG_VERSION"));
    match crate::mcp::serve(chorus).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chorus: the MCP session failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("CHORUS_LOG").unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{default},chorus={}",
            if verbose == 0 { "warn" } else { default }
        ))
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}
