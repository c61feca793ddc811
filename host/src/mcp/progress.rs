//! Turns a run's events into MCP progress notifications, with a heartbeat
//! while nothing else happens: clients (the TypeScript SDK among them)
//! abandon a call after ~60 s without progress.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::sync::mpsc;

use crate::pipeline::{Event, Progress};

const HEARTBEAT: Duration = Duration::from_secs(10);
/// Events buffered per run; past this a slow client misses some, the run
/// never waits.
const BUFFER: usize = 256;

/// A `Progress` for the pipeline and the task that forwards it. The task
/// ends when the run (which owns the sender) is over or dropped.
pub fn forwarder(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Progress {
    let Some(token) = token else {
        return crate::pipeline::events::ignore();
    };
    let (sender, receiver) = mpsc::channel(BUFFER);
    tokio::spawn(forward(peer, token, receiver));
    std::sync::Arc::new(move |event| {
        let _ = sender.try_send(event);
    })
}

async fn forward(peer: Peer<RoleServer>, token: ProgressToken, mut events: mpsc::Receiver<Event>) {
    let mut step = 0.0;
    let mut total: Option<f64> = None;
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.tick().await;
    let mut last = String::from("starting");
    loop {
        let message = tokio::select! {
            event = events.recv() => match event {
                Some(event) => {
                    heartbeat.reset();
                    match describe(&event, &mut total) {
                        Some(message) => message,
                        None => continue,
                    }
                }
                None => return,
            },
            _ = heartbeat.tick() => format!("still working: {last}"),
        };
        step += 1.0;
        last.clone_from(&message);
        let mut param = ProgressNotificationParam::new(token.clone(), step).with_message(message);
        if let Some(total) = total {
            param = param.with_total(total.max(step));
        }
        if peer.notify_progress(param).await.is_err() {
            return;
        }
    }
}

fn describe(event: &Event, total: &mut Option<f64>) -> Option<String> {
    Some(match event {
        Event::Stage(stage) => stage.as_str().to_owned(),
        Event::FanOut { calls } => {
            // select + prompt + each call + synthesis: a rough but honest scale.
            *total = Some(*calls as f64 + 4.0);
            return None;
        }
        Event::CallFinished(call) => {
            let who = if call.stage == "fan-out" {
                call.model.clone()
            } else {
                format!("{} ({})", call.model, call.stage)
            };
            let secs = f64::from(call.latency_ms) / 1000.0;
            match &call.error {
                None => format!(
                    "{who} answered in {secs:.1}s ({} tokens)",
                    call.completion_tokens.unwrap_or(0)
                ),
                Some(error) => format!("{who} failed after {secs:.1}s: {error}"),
            }
        }
        Event::Started(_) | Event::Planned(_) | Event::CallStarted { .. } => return None,
        Event::CallTokens { .. } => return None,
        Event::Note { plugin, message } => format!("{plugin}: {message}"),
    })
}
