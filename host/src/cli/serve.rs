//! `chorus serve`: MCP on stdio (the default, for a client that starts
//! chorus itself), or with `--http ADDR` over Streamable HTTP, one chorus
//! shared by many clients. Either way the configuration is reloaded live
//! (see `app::watcher`).

use crate::notice::notice;
use std::path::Path;
use std::process::ExitCode;

use crate::config::Overrides;
use crate::{http, mcp};

#[derive(clap::Args, Default)]
pub struct Args {
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp instead of stdio,
    /// and the run viewer at http://ADDR/,
    /// e.g. `127.0.0.1:8080`, `0.0.0.0:8080` or just a port (loopback).
    /// Clients send `Authorization: Bearer $CHORUS_TOKEN`; without
    /// CHORUS_TOKEN only a loopback address is allowed.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// With --http: a host name clients reach chorus by (the Host header),
    /// besides localhost and the listen address; repeatable. `*` accepts any
    /// (behind a proxy that rewrites Host).
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    allow_hosts: Vec<String>,
    /// With --http: a browser origin allowed to call chorus, e.g.
    /// `https://app.example.com`; repeatable. A request from any other web
    /// origin is refused; clients that are not browsers send none.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origins: Vec<String>,
    /// Do not watch the configuration file and the plugin files it names
    /// for changes. SIGHUP still reloads them: a good change is swapped in
    /// (runs in flight finish on what they started with), a bad one is
    /// refused and reported on stderr while the old one keeps serving.
    #[arg(long)]
    no_watch: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics without a token, for
    /// a scraper on a private network: `HOST:PORT` or a port (loopback).
    /// It answers requests for an IP address, localhost or this machine's
    /// name (and --allow-host names). With --http they are also at
    /// /metrics there, for admin clients only.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// A directory an MCP client on stdio may attach files from, besides the
    /// roots it shares; repeatable (adds to [limits] attachment_dirs).
    /// Over HTTP no path is ever read.
    #[arg(long = "allow-dir", value_name = "DIR")]
    allow_dirs: Vec<std::path::PathBuf>,
    #[command(flatten)]
    panel: super::Panel,
    /// The pipeline whose panel --models changes, and the default one.
    #[arg(long, short, env = crate::config::PIPELINE_ENV, value_name = "NAME")]
    pipeline: Option<String>,
}

impl Args {
    /// Serving MCP over HTTP, not stdio.
    pub fn over_http(&self) -> bool {
        self.http.is_some()
    }

    /// `chorus` with no subcommand: `serve` with its defaults, and what the
    /// environment sets (`CHORUS_MODELS`, ...), as `chorus serve` would read.
    pub fn from_env() -> Self {
        use clap::{Args as _, FromArgMatches as _};
        let command = Self::augment_args(clap::Command::new("serve"));
        command
            .try_get_matches_from(["serve"])
            .ok()
            .and_then(|matches| Self::from_arg_matches(&matches).ok())
            .unwrap_or_default()
    }
}

pub async fn run(config: Option<&Path>, args: Args) -> ExitCode {
    let watch = !args.no_watch;
    let mut overrides = args.panel.overrides(args.pipeline.as_deref());
    overrides.attachment_dirs = args.allow_dirs.clone();
    let metrics = args.metrics.as_deref();
    let Some(listen) = args.http else {
        return stdio(config, watch, &overrides, metrics).await;
    };
    let token = std::env::var("CHORUS_TOKEN").ok();
    let chorus = match load(config, watch, &overrides, metrics, &args.allow_hosts).await {
        Ok(chorus) => chorus,
        Err(code) => return code,
    };
    // Clients are read at startup: a reload keeps the ones it started with.
    let options = match http::Options::with_clients(
        &listen,
        token.as_deref(),
        &chorus.runner().loaded.config.http.clients,
        &args.allow_hosts,
        &args.allow_origins,
    ) {
        Ok(options) => options,
        Err(e) => {
            notice!("chorus: {e}");
            return ExitCode::from(2);
        }
    };
    tracing::info!(config = %chorus.runner().loaded.origin, "chorus {} serving MCP over HTTP", env!("CARGO_PKG_VERSION"));
    let viewer = match crate::web::Viewer::new(chorus.clone(), options.access(), None) {
        Ok(viewer) => viewer,
        Err(e) => {
            notice!("chorus: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The doors: MCP, the viewer, OpenAI's API and Anthropic's, each
    // behind the same Host, Origin and token rules.
    let doors = vec![
        mcp::http::door(chorus.clone(), options.access()),
        http::Door::routes(crate::web::router(viewer)),
        http::Door::routes(crate::openai::routes(chorus.clone(), options.access())),
        http::Door::routes(crate::anthropic::routes(chorus.clone(), options.access())),
    ];
    match http::serve(chorus, options, doors).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            notice!("chorus: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn stdio(
    config: Option<&Path>,
    watch: bool,
    overrides: &Overrides,
    metrics: Option<&str>,
) -> ExitCode {
    let chorus = match load(config, watch, overrides, metrics, &[]).await {
        Ok(chorus) => chorus,
        Err(code) => return code,
    };
    tracing::info!(config = %chorus.runner().loaded.origin, "chorus {} serving MCP on stdio", env!("CARGO_PKG_VERSION"));
    match mcp::serve(chorus).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            notice!("chorus: the MCP session failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Loads chorus, warning about missing API keys: the server starts anyway,
/// so an MCP client shows each call's readable failure instead of "server
/// disconnected". Then reloads it on SIGHUP and, with `watch`, whenever its
/// files change; and serves its metrics on `metrics`, when given.
async fn load(
    config: Option<&Path>,
    watch: bool,
    overrides: &Overrides,
    metrics: Option<&str>,
    allow_hosts: &[String],
) -> Result<std::sync::Arc<crate::app::Chorus>, ExitCode> {
    let chorus = super::load_serving(config, overrides)?;
    if let Some(addr) = metrics {
        let served = match http::metrics_hosts(allow_hosts) {
            Ok(allows) => crate::metrics::serve(addr, chorus.metrics.clone(), allows).await,
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = served {
            notice!("chorus: {e}");
            return Err(ExitCode::from(2));
        }
    }
    for problem in chorus.runner().llm.key_problems() {
        tracing::warn!("{problem}; its calls will fail");
    }
    // Model ids given on the command line are checked against the
    // provider's list without holding up the client's `initialize`.
    if !overrides.model_ids().is_empty() {
        let (chorus, overrides) = (chorus.clone(), overrides.clone());
        tokio::spawn(async move {
            if let Some(problem) = super::unlisted_models(&chorus, &overrides).await {
                tracing::error!("{problem}; their calls will fail");
            }
        });
    }
    crate::app::watcher::start(chorus.clone(), watch);
    crate::app::trim::start(chorus.metrics.clone());
    Ok(chorus)
}
