//! Command-line parsing, logging setup and the subcommands. Logs always go
//! to stderr: in `serve`, stdout belongs to MCP.

mod ask;
mod check;
mod dry_run;
mod eval;
mod models;
mod plugin;
mod runs;
mod serve;

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
    /// More of chorus's log on stderr (-v info, -vv debug, -vvv trace). $CHORUS_LOG
    /// overrides: a level (`debug`), or a filter (`chorus=debug,rmcp=debug`).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default), or over HTTP with --http ADDR.
    Serve(serve::Args),
    /// Run a pipeline once: progress on stderr, the answer on stdout.
    Ask(ask::Args),
    /// Validate the configuration, load every plugin, check model ids against the providers' lists.
    Check,
    /// List the models the providers offer (cached on disk), matching QUERY.
    Models(models::Args),
    /// The run history: list, show, export, prune, re-synthesize.
    Runs(runs::Args),
    /// Score pipelines and models on a dataset of questions with expected answers.
    Eval(eval::Args),
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
    let code = runtime.block_on(async {
        match cli
            .command
            .unwrap_or(Command::Serve(serve::Args::default()))
        {
            Command::Serve(args) => serve::run(config, args).await,
            Command::Ask(args) => match load(config) {
                Ok(chorus) => ask::run(chorus, args).await,
                Err(code) => code,
            },
            Command::Check => check::run(config).await,
            Command::Models(args) => match load(config) {
                Ok(chorus) => models::run(&chorus, args).await,
                Err(code) => code,
            },
            Command::Runs(args) => runs::run(config, args).await,
            Command::Eval(args) => match load(config) {
                Ok(chorus) => eval::run(chorus, args).await,
                Err(code) => code,
            },
            Command::Plugin(command) => plugin::run(command),
        }
    });
    // Do not wait for blocking threads: one may still be parked reading a
    // stdin that the client never closed (after it closed our stdout).
    runtime.shutdown_background();
    code
}

/// Loads the configuration and every plugin, reporting problems on stderr.
fn load(config: Option<&std::path::Path>) -> Result<Arc<Chorus>, ExitCode> {
    let chorus = Chorus::discover(config).map_err(|e| {
        eprintln!("chorus: {e}");
        ExitCode::from(2)
    })?;
    Ok(Arc::new(chorus))
}

/// Logs on stderr: chorus's own events at the level asked for, other crates
/// (wasmtime's compiler, hyper, rmcp) only when they report an error — their
/// debug output would drown chorus's. `CHORUS_LOG` overrides: a bare level
/// (`debug`) applies to chorus; a full filter (`chorus=debug,rmcp=trace`)
/// is used as written.
fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let ours = |level: &str| format!("{OTHER_CRATES},chorus={level}");
    let filter = match std::env::var("CHORUS_LOG") {
        Ok(spec) if is_level(&spec) => EnvFilter::new(ours(spec.trim())),
        Ok(spec) => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            eprintln!("chorus: CHORUS_LOG=`{spec}` is not a log filter ({e}); using `{level}`");
            EnvFilter::new(ours(level))
        }),
        Err(_) => EnvFilter::new(ours(level)),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

/// The level for every crate but chorus.
const OTHER_CRATES: &str = "error";

fn is_level(spec: &str) -> bool {
    ["off", "error", "warn", "info", "debug", "trace"]
        .iter()
        .any(|level| spec.trim().eq_ignore_ascii_case(level))
}
