//! MCP logging: `logging/setLevel`, and `notifications/message` with what a
//! client watching chorus would want to read in its log pane (the
//! Inspector's, Claude Code's debug view) — a model's attempt failing and
//! being retried, a fallback asked, a model failing, a plugin failing or
//! saying what it does, a run failing, a reload.
//!
//! - The level is the client's: set per stdio session (one client), and
//!   per client over HTTP (the one its token names; every local program
//!   alike without tokens), where requests stand alone. A request may name
//!   its own in `_meta` (`io.modelcontextprotocol/logLevel`, the 2026-07-28
//!   way), which wins for that request.
//! - Before any `setLevel`, [`DEFAULT`] (`warning`): what went wrong is
//!   sent unasked, chatter only on request.
//! - A run's messages travel with its call (on the call's own stream over
//!   HTTP) and all reach the client before the call's response.
//! - What is sent is what the result and the progress already say: failure
//!   messages scrubbed of the API keys, plugin notes; never a key, a
//!   prompt or an answer. On stdio they are JSON-RPC like everything else.
//!
//! Logging is deprecated in MCP 2026-07-28 (SEP-2577), hence the allows;
//! the 2025-11-25 clients in use today still ask for it.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, RequestMetaObject};
use rmcp::service::Peer;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::events::{Event, Progress};

/// The level before a client sets one.
pub const DEFAULT: LoggingLevel = LoggingLevel::Warning;
/// Messages of one call waiting to be sent; past this, more are dropped
/// (a run never waits on its log).
const BACKLOG: usize = 256;

/// Severity, for comparing levels (`LoggingLevel` has no order).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Whether a message at `level` is sent to a client at `threshold`.
pub fn admits(threshold: LoggingLevel, level: LoggingLevel) -> bool {
    rank(level) >= rank(threshold)
}

/// The level each client set, by client name. Bounded by the clients the
/// configuration names (and the local user).
#[derive(Default)]
pub struct Levels {
    set: Mutex<HashMap<String, LoggingLevel>>,
}

impl Levels {
    pub fn set(&self, client: &Client, level: LoggingLevel) {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(client.name.clone(), level);
    }

    /// The level `client` set, or [`DEFAULT`].
    pub fn of(&self, client: &Client) -> LoggingLevel {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&client.name)
            .copied()
            .unwrap_or(DEFAULT)
    }

    /// The level for one request: its own (`_meta`), else its client's.
    pub fn for_request(&self, client: &Client, meta: &RequestMetaObject) -> LoggingLevel {
        meta.log_level().unwrap_or_else(|| self.of(client))
    }
}

/// Sends a message to `peer` now (for what is not part of a call: a
/// reload). A client gone is not an error worth more than a debug line.
pub async fn send(peer: &Peer<RoleServer>, level: LoggingLevel, text: String) {
    let param =
        LoggingMessageNotificationParam::new(level, Value::String(text)).with_logger("chorus");
    if let Err(e) = peer.notify_logging_message(param).await {
        tracing::debug!("notifications/message not sent: {e}");
    }
}

/// One call's log: turns its run's events into messages and sends those
/// the client's level admits, in order, until [`Self::finish`].
pub struct CallLog {
    level: LoggingLevel,
    queue: mpsc::Sender<(LoggingLevel, String)>,
    finish: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl CallLog {
    pub fn start(peer: Peer<RoleServer>, level: LoggingLevel) -> Self {
        let (queue, mut queued) = mpsc::channel::<(LoggingLevel, String)>(BACKLOG);
        let (finish, mut finished) = oneshot::channel();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    next = queued.recv() => match next {
                        Some((level, text)) => send(&peer, level, text).await,
                        None => return,
                    },
                    _ = &mut finished => {
                        // What the run said before its result; anything
                        // later (a straggler's end) has no call to go with.
                        while let Ok((level, text)) = queued.try_recv() {
                            send(&peer, level, text).await;
                        }
                        return;
                    }
                }
            }
        });
        Self {
            level,
            queue,
            finish: Some(finish),
            task: Some(task),
        }
    }

    /// The `Progress` to hand the run. Never blocks.
    pub fn progress(&self) -> Progress {
        let queue = self.queue.clone();
        let threshold = self.level;
        Arc::new(move |event: Event| {
            let Some((level, text)) = message(&event) else {
                return;
            };
            if admits(threshold, level) {
                let _ = queue.try_send((level, text));
            }
        })
    }

    /// The run failed (its result says why, as an error): said at `error`.
    pub fn failed(&self, text: String) {
        self.say(LoggingLevel::Error, text);
    }

    fn say(&self, level: LoggingLevel, text: String) {
        if admits(self.level, level) {
            let _ = self.queue.try_send((level, text));
        }
    }

    /// Sends what is queued and returns once it is handed to the
    /// transport: the call's response comes after its log.
    pub async fn finish(mut self) {
        if let (Some(finish), Some(task)) = (self.finish.take(), self.task.take()) {
            let _ = finish.send(());
            let _ = task.await;
        }
    }
}

impl Drop for CallLog {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What an event says in the log, and at what level; `None` for what only
/// progress and the record need.
pub fn message(event: &Event) -> Option<(LoggingLevel, String)> {
    Some(match event {
        Event::CallRetrying {
            id,
            model,
            attempt,
            wait,
            error,
        } => (
            LoggingLevel::Warning,
            format!(
                "{model} (call {id}): attempt {attempt} failed: {error}; retrying in {}",
                seconds(*wait)
            ),
        ),
        Event::Fallback { id, from, to, why } => (
            LoggingLevel::Warning,
            format!("{from} (call {id}) failed for good ({why}); asking its fallback {to}"),
        ),
        Event::CallFinished(record) => {
            let took = seconds(Duration::from_millis(u64::from(record.latency_ms)));
            let who = &record.model;
            match (&record.error, record.status.as_str()) {
                (None, _) => (
                    LoggingLevel::Debug,
                    format!("{who} (call {}) answered in {took}", record.id),
                ),
                // The fan-out's own choice (quorum reached, cost ceiling):
                // said, but nothing went wrong.
                (Some(error), "cut" | "skipped") => (
                    LoggingLevel::Info,
                    format!(
                        "{who} (call {}) {}: {}",
                        record.id, record.status, error.message
                    ),
                ),
                (Some(error), _) if error.kind == "cancelled" => return None,
                (Some(error), _) => (
                    LoggingLevel::Warning,
                    format!("{who} (call {}) failed after {took}: {error}", record.id),
                ),
            }
        }
        Event::PluginReturned {
            plugin,
            export,
            error: Some(kind),
            ..
        } => (
            LoggingLevel::Error,
            format!("plugin {plugin} failed in {export}: {kind}"),
        ),
        Event::Note { plugin, message } => (LoggingLevel::Info, format!("{plugin}: {message}")),
        Event::Stage(stage) => (LoggingLevel::Debug, stage.as_str().to_owned()),
        _ => return None,
    })
}

fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_admits_itself_and_what_is_more_severe() {
        assert!(admits(LoggingLevel::Warning, LoggingLevel::Warning));
        assert!(admits(LoggingLevel::Warning, LoggingLevel::Error));
        assert!(!admits(LoggingLevel::Warning, LoggingLevel::Info));
        assert!(!admits(LoggingLevel::Error, LoggingLevel::Warning));
        assert!(admits(LoggingLevel::Debug, LoggingLevel::Debug));
    }

    #[test]
    fn a_retry_is_a_warning_and_a_plugin_note_is_info() {
        let (level, text) = message(&Event::CallRetrying {
            id: 2,
            model: Arc::from("m1"),
            attempt: 1,
            wait: Duration::from_millis(150),
            error: "http-status (HTTP 503): overloaded".into(),
        })
        .unwrap();
        assert_eq!(level, LoggingLevel::Warning);
        assert_eq!(
            text,
            "m1 (call 2): attempt 1 failed: http-status (HTTP 503): overloaded; retrying in 0.1 s"
        );
        let (level, _) = message(&Event::Note {
            plugin: "heavy".into(),
            message: "planning".into(),
        })
        .unwrap();
        assert_eq!(level, LoggingLevel::Info);
        assert!(message(&Event::FanOut { calls: 5 }).is_none());
    }

    #[test]
    fn levels_are_each_clients_own() {
        let levels = Levels::default();
        let mut alice = Client::local().as_ref().clone();
        alice.name = "alice".into();
        let mut bob = alice.clone();
        bob.name = "bob".into();
        levels.set(&alice, LoggingLevel::Debug);
        assert_eq!(levels.of(&alice), LoggingLevel::Debug);
        assert_eq!(levels.of(&bob), DEFAULT);
        let mut meta = RequestMetaObject::new();
        meta.set_log_level(LoggingLevel::Error);
        assert_eq!(levels.for_request(&alice, &meta), LoggingLevel::Error);
    }
}
