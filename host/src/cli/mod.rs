//! Command-line parsing, logging setup and the subcommands. Logs always go
//! to stderr: in `serve`, stdout belongs to MCP.

use crate::notice::notice;
mod answer;
mod ask;
mod check;
mod disconnects;
mod dry_run;
mod eval;
mod experiments;
mod gateway;
mod init;
mod model_uses;
mod models;
mod plugin;
mod runs;
mod runtime;
mod serve;
mod ui;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::app::Chorus;
use crate::attach::pdf;
use crate::config::{self, Loaded, Overrides};

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
    /// The log's format on stderr: `text`, or `json` (one object a line,
    /// for a log collector). $CHORUS_LOG_FORMAT
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t,
        env = "CHORUS_LOG_FORMAT"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Clone, Copy, Default, clap::ValueEnum)]
enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default), or over HTTP with --http ADDR.
    Serve(serve::Args),
    /// Run a pipeline once: progress on stderr, the answer on stdout.
    Ask(ask::Args),
    /// Validate the configuration, load every plugin, check model ids against the providers' lists.
    Check(CheckArgs),
    /// Write the fully commented default configuration to PATH, to edit.
    Init(init::Args),
    /// List the models the providers offer (cached on disk), matching QUERY.
    Models(models::Args),
    /// The run history: list, show, export, prune, re-synthesize.
    Runs(runs::Args),
    /// The run viewer in a browser: serves it on 127.0.0.1 and prints a sign-in link.
    Ui(ui::Args),
    /// Score pipelines and models on a dataset of questions with expected answers.
    Eval(eval::Args),
    /// Where each experiment ([experiments.NAME]) stands: variants, shares, ratings, status.
    Experiments(experiments::Args),
    /// Write strategy plugins (`chorus plugin new NAME --kind KIND --lang LANG`);
    /// publish and fetch them on OCI registries (`push`, `pull`, `inspect`).
    #[command(subcommand)]
    Plugin(plugin::Command),
    /// Not for people: parses one PDF from stdin, bounded, for the server
    /// that runs it (attach::pdf::worker).
    #[command(name = "__pdf", hide = true, subcommand)]
    Pdf(pdf::worker::Job),
}

impl Command {
    /// Whom the command serves: one client, or many at once (its runtime's
    /// workers follow, see `runtime`).
    fn serves(&self) -> runtime::Serves {
        match self {
            Self::Serve(args) if args.over_http() => runtime::Serves::Many,
            Self::Ui(_) | Self::Eval(_) => runtime::Serves::Many,
            _ => runtime::Serves::OneClient,
        }
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // A PDF parser child: no logging, no runtime, nothing but the parse.
    if let Some(Command::Pdf(job)) = cli.command {
        return pdf::worker::serve(job);
    }
    // A server's audit lines (a run ended, a request refused) are on by
    // default; a terminal command's stderr is for its progress.
    let serving = matches!(cli.command, None | Some(Command::Serve(_)));
    init_logging(cli.verbose, cli.log_format, serving);
    // PDFs are parsed in children of this very binary, where they can be
    // held to a memory and CPU budget.
    match std::env::current_exe() {
        Ok(chorus) => pdf::use_worker(chorus),
        Err(e) => tracing::warn!("PDFs will not be read: this binary cannot find itself ({e})"),
    }
    let command = cli
        .command
        .unwrap_or_else(|| Command::Serve(serve::Args::from_env()));
    let runtime = match runtime::build(command.serves()) {
        Ok(runtime) => runtime,
        Err(e) => {
            notice!("chorus: {e}");
            return ExitCode::from(2);
        }
    };
    let config = cli.config.as_deref();
    let code = runtime.block_on(async {
        match command {
            Command::Serve(args) => serve::run(config, args).await,
            Command::Ask(args) => {
                let overrides = args.panel.overrides(args.pipeline.as_deref());
                match load(config, &overrides) {
                    Ok(chorus) => match unlisted_models(&chorus, &overrides).await {
                        None => ask::run(chorus, args).await,
                        Some(problem) => {
                            notice!("chorus: {problem}");
                            ExitCode::from(2)
                        }
                    },
                    Err(code) => code,
                }
            }
            Command::Check(args) => {
                check::run(config, &args.panel.overrides(args.pipeline.as_deref())).await
            }
            Command::Init(args) => init::run(args),
            Command::Models(args) => match load(config, &args.gateway.overrides()) {
                Ok(chorus) => models::run(&chorus, args).await,
                Err(code) => code,
            },
            Command::Runs(args) => runs::run(config, args).await,
            Command::Ui(args) => match load(config, &args.gateway.overrides()) {
                Ok(chorus) => ui::run(chorus, args).await,
                Err(code) => code,
            },
            Command::Eval(args) => {
                match load_adjusted(config, &args.gateway.overrides(), |loaded| {
                    if args.cached {
                        eval::cache_everything(loaded);
                    }
                }) {
                    Ok(chorus) => eval::run(chorus, args).await,
                    Err(code) => code,
                }
            }
            Command::Experiments(args) => match load(config, &Overrides::default()) {
                Ok(chorus) => experiments::run(chorus, args).await,
                Err(code) => code,
            },
            Command::Plugin(command) => plugin::run(command, config).await,
            Command::Pdf(job) => pdf::worker::serve(job),
        }
    });
    // Spans still queued are sent (within a bound) before the runtime goes.
    runtime.block_on(crate::telemetry::flush());
    // Do not wait for blocking threads: one may still be parked reading a
    // stdin that the client never closed (after it closed our stdout).
    runtime.shutdown_background();
    code
}

/// Loads the configuration, changed as the command line and environment
/// say, and every plugin, reporting problems on stderr.
fn load(config: Option<&std::path::Path>, overrides: &Overrides) -> Result<Arc<Chorus>, ExitCode> {
    load_adjusted(config, overrides, |_| {})
}

/// As `load`, for `serve`: plugins that must be compiled compile in the
/// background, so the client's `initialize` is answered at once (a client
/// may not wait for seconds of compiling before its first request).
fn load_serving(
    config: Option<&std::path::Path>,
    overrides: &Overrides,
) -> Result<Arc<Chorus>, ExitCode> {
    load_with(config, overrides, |_| {}, Chorus::load_serving)
}

/// As `load`, with the configuration changed by `adjust` (a command's own
/// flags) before anything is built from it.
fn load_adjusted(
    config: Option<&std::path::Path>,
    overrides: &Overrides,
    adjust: impl FnOnce(&mut Loaded),
) -> Result<Arc<Chorus>, ExitCode> {
    load_with(config, overrides, adjust, Chorus::load)
}

fn load_with(
    config: Option<&std::path::Path>,
    overrides: &Overrides,
    adjust: impl FnOnce(&mut Loaded),
    build: impl FnOnce(Loaded) -> Result<Chorus, crate::config::ConfigError>,
) -> Result<Arc<Chorus>, ExitCode> {
    let chorus = Loaded::discover(config)
        .and_then(|loaded| loaded.with_overrides(overrides))
        .map(|mut loaded| {
            adjust(&mut loaded);
            loaded
        })
        .and_then(build)
        .map_err(|e| {
            notice!("chorus: {e}");
            ExitCode::from(2)
        })?;
    Ok(Arc::new(chorus))
}

/// The panel and provider without a config file: flags, else `CHORUS_*`
/// variables (what an MCP client's `args` and `env` can set).
#[derive(clap::Args, Default)]
pub struct Panel {
    /// The panel of the pipeline (its selector's models): ids, comma-separated.
    /// Ids not in [models] are added, served by the provider.
    #[arg(long, env = config::MODELS_ENV, value_name = "ID,ID,...")]
    models: Option<String>,
    /// The synthesizer model(s), comma-separated, tried in order.
    #[arg(long, env = config::SYNTHESIZER_ENV, value_name = "ID,...")]
    synthesizer: Option<String>,
    /// Send the provider's requests to another OpenAI-compatible endpoint
    /// (a LiteLLM proxy, Ollama, a gateway); its key is read from
    /// CHORUS_API_KEY, else the provider's api_key_env (OPENROUTER_API_KEY
    /// by default), else OPENAI_API_KEY for an endpoint not OpenRouter's.
    #[arg(long, env = config::BASE_URL_ENV, value_name = "URL")]
    base_url: Option<String>,
}

impl Panel {
    /// What to change, for `pipeline` (else the configuration's default).
    pub fn overrides(&self, pipeline: Option<&str>) -> Overrides {
        let text = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Overrides {
            models: self
                .models
                .as_deref()
                .map(config::model_list)
                .unwrap_or_default(),
            synthesizers: self
                .synthesizer
                .as_deref()
                .map(config::model_list)
                .unwrap_or_default(),
            pipeline: text(&pipeline.map(str::to_owned)),
            base_url: text(&self.base_url),
            attachment_dirs: Vec::new(),
        }
    }
}

/// For `chorus check`: what the command line and environment changed.
fn describe_overrides(overrides: &Overrides, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let mut changes = Vec::new();
    if let Some(url) = &overrides.base_url {
        changes.push(format!(
            "base_url = {url} (--base-url / ${})",
            config::BASE_URL_ENV
        ));
    }
    if let Some(pipeline) = &overrides.pipeline {
        changes.push(format!(
            "pipeline = {pipeline} (--pipeline / ${})",
            config::PIPELINE_ENV
        ));
    }
    if !overrides.models.is_empty() {
        changes.push(format!(
            "panel = {} (--models / ${})",
            overrides.models.join(", "),
            config::MODELS_ENV
        ));
    }
    if !overrides.synthesizers.is_empty() {
        changes.push(format!(
            "synthesizers = {} (--synthesizer / ${})",
            overrides.synthesizers.join(", "),
            config::SYNTHESIZER_ENV
        ));
    }
    for change in changes {
        writeln!(out, "  changed: {change}")?;
    }
    Ok(())
}

#[derive(clap::Args)]
struct CheckArgs {
    #[command(flatten)]
    panel: Panel,
    /// The pipeline whose panel --models changes. Default: the config's default_pipeline.
    #[arg(long, short, env = config::PIPELINE_ENV, value_name = "NAME")]
    pipeline: Option<String>,
}

/// Model ids given with --models / --synthesizer that their provider's
/// model list does not have, with the closest it does: said before any
/// call is made. `None` when all are listed, or no list could be read.
pub async fn unlisted_models(chorus: &Chorus, overrides: &Overrides) -> Option<String> {
    let ids = overrides.model_ids();
    if ids.is_empty() {
        return None;
    }
    let runner = chorus.runner();
    let statuses = runner.llm.load_catalogs(false).await;
    for status in &statuses {
        if let Ok(catalog) = &status.result
            && catalog.models.is_empty()
        {
            notice!(
                "chorus: provider `{}` lists no models at all (an empty /models): the ids given are not checked against it",
                status.provider
            );
        }
    }
    let models = runner.llm.models();
    let problems: Vec<String> = ids
        .iter()
        .filter_map(|id| models.get(*id).filter(|m| m.listed == Some(false)))
        .map(|model| {
            let listed = statuses
                .iter()
                .filter(|s| s.provider == model.provider)
                .filter_map(|s| s.result.as_ref().ok())
                .flat_map(|c| c.models.iter().map(|m| m.id.as_str()));
            let near = crate::llm::closest(&model.id, listed, 3);
            let hint = if near.is_empty() {
                String::new()
            } else {
                format!(" (closest: {})", near.join(", "))
            };
            format!("`{}`{hint}", model.id)
        })
        .collect();
    (!problems.is_empty()).then(|| {
        format!(
            "--models / --synthesizer name model ids the provider does not list: {}. `chorus models QUERY` searches its list.",
            problems.join("; ")
        )
    })
}

/// Logs on stderr: chorus's own events at the level asked for, other crates
/// (wasmtime's compiler, hyper, rmcp) only when they report an error — their
/// debug output would drown chorus's. `CHORUS_LOG` overrides: a bare level
/// (`debug`) applies to chorus; a full filter (`chorus=debug,rmcp=trace`)
/// is used as written.
fn init_logging(verbose: u8, format: LogFormat, audit: bool) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let audit = if audit && verbose == 0 {
        format!(",{}=info", crate::app::AUDIT)
    } else {
        String::new()
    };
    let ours = |level: &str| format!("{OTHER_CRATES},chorus={level}{audit}");
    let filter = match std::env::var("CHORUS_LOG") {
        Ok(spec) if is_level(&spec) => EnvFilter::new(ours(spec.trim())),
        Ok(spec) => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            notice!("chorus: CHORUS_LOG=`{spec}` is not a log filter ({e}); using `{level}`");
            EnvFilter::new(ours(level))
        }),
        Err(_) => EnvFilter::new(ours(level)),
    };
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A stderr that cannot be written (its reader gone) loses the line;
        // tracing-subscriber would otherwise say so with `eprintln!`, which
        // panics there, in whatever task logged (see `crate::notice`).
        .log_internal_errors(false)
        .with_ansi(false);
    // Outermost, so that an ordinary disconnect reaches no layer.
    let _ = match format {
        LogFormat::Text => log
            .with_target(false)
            .finish()
            .with(disconnects::OrdinaryDisconnects)
            .try_init(),
        LogFormat::Json => log
            .json()
            .with_current_span(false)
            .finish()
            .with(disconnects::OrdinaryDisconnects)
            .try_init(),
    };
}

/// The level for every crate but chorus.
const OTHER_CRATES: &str = "error";

fn is_level(spec: &str) -> bool {
    ["off", "error", "warn", "info", "debug", "trace"]
        .iter()
        .any(|level| spec.trim().eq_ignore_ascii_case(level))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_command_line_is_well_formed() {
        // clap checks a command's arguments when it is first parsed, so a
        // clash (two `-c`) would otherwise show only when someone types it.
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
