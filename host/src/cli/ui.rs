//! `chorus ui`: the run viewer on its own, for one person on this machine.
//! It listens on 127.0.0.1 (a free port unless `--port`), makes a fresh
//! one-time sign-in token, and prints the link that uses it; the browser
//! that opens it gets a session, and the link is then spent. It shows the
//! runs of the run store the configuration names, and re-synthesizes with
//! this configuration's plugins and providers.

use crate::notice::notice;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use crate::app::Chorus;
use crate::http;
use crate::web;

#[derive(clap::Args)]
pub struct Args {
    /// The port to listen on, on 127.0.0.1. Default: a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The viewer re-synthesizes runs: through the same gateway.
    #[command(flatten)]
    pub gateway: super::gateway::Gateway,
}

pub async fn run(chorus: Arc<Chorus>, args: Args) -> ExitCode {
    match serve(chorus, args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            notice!("chorus: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(chorus: Arc<Chorus>, args: Args) -> Result<(), String> {
    let listen = format!("127.0.0.1:{}", args.port);
    // CHORUS_TOKEN, when set, also works as `Authorization: Bearer` (scripts).
    let token = std::env::var("CHORUS_TOKEN").ok();
    let options =
        http::Options::new(&listen, token.as_deref(), &[], &[]).map_err(|e| e.to_string())?;
    let one_time = crate::text::hex(&web::random()?);
    let viewer = web::Viewer::new(chorus.clone(), options.access(), Some(&one_time))?;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    notice!(
        "chorus: the run viewer of {} is at http://{local}/ — open this link once to sign in (Ctrl-C stops it):",
        chorus.store.describe()
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "http://{local}/sign-in?token={one_time}");
    let _ = out.flush();
    drop(out);
    http::serve_pages(listener, web::router(viewer), &chorus).await;
    Ok(())
}
