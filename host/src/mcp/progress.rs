//! A run's progress as MCP progress notifications: one when a stage begins,
//! when a model answers or fails, when a plugin says something; a heartbeat
//! after [`HEARTBEAT`] of silence naming who is still awaited and for how
//! long. Values rise strictly (the spec requires it) on a fixed scale of
//! [`TOTAL`] and stay below it: no notification says "done", because the
//! response says it.
//!
//! Nothing is sent once the result exists ([`Reporter::finish`]), and the
//! response waits until [`QUIET`] has passed since the last notification.
//! A notification that reaches a client in the same read as the response
//! is handled after it by some clients (the TypeScript SDK dispatches
//! notifications on a later tick than responses): the call's token is
//! gone by then, and Claude Code dropped the connection over "a progress
//! notification for an unknown token".

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::events::{Event, Progress};
use crate::pipeline::watch::Watch;

/// Longest silence between two notifications while a run works. Clients
/// that reset their timeout on progress (the TypeScript SDK's
/// `resetTimeoutOnProgress`) then never time a live run out.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// The scale's end: progress is reported below 100, total 100.
pub const TOTAL: f64 = 100.0;
/// Least time between the last notification and the response: long enough
/// for a client to read them apart.
pub const QUIET: Duration = Duration::from_millis(50);
/// Lines waiting to be sent; past this the oldest are dropped (the state
/// itself is never lost: heartbeats read it whole).
const BACKLOG: usize = 64;

/// One run's state, fed by its events, read by whoever reports on it.
#[derive(Default)]
pub struct Live {
    watch: Mutex<Watch>,
    lines: Mutex<VecDeque<String>>,
    changed: Notify,
}

impl Live {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The `Progress` to hand the pipeline. Never blocks: it updates the
    /// state and queues a line.
    pub fn progress(self: &Arc<Self>) -> Progress {
        let live = self.clone();
        Arc::new(move |event: Event| {
            let Some(line) = live.watch().observe(&event) else {
                return;
            };
            let mut lines = live.lines.lock().unwrap_or_else(|e| e.into_inner());
            if lines.len() == BACKLOG {
                lines.pop_front();
            }
            lines.push_back(line);
            drop(lines);
            live.changed.notify_one();
        })
    }

    pub fn watch(&self) -> MutexGuard<'_, Watch> {
        self.watch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lines queued since the last call.
    pub fn take_lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect()
    }

    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// Sends one call's progress notifications until [`Self::finish`]; dropping
/// it (the call was cancelled) stops them at once.
pub struct Reporter {
    live: Arc<Live>,
    finish: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Reporter {
    /// Reports to `peer` under `token`; without a token (the client asked
    /// for no progress) it only keeps the state.
    pub fn start(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Self {
        let live = Live::new();
        let Some(token) = token else {
            return Self {
                live,
                finish: None,
                task: None,
            };
        };
        let (finish, finished) = oneshot::channel();
        let task = tokio::spawn(forward(live.clone(), peer, token, finished));
        Self {
            live,
            finish: Some(finish),
            task: Some(task),
        }
    }

    pub fn progress(&self) -> Progress {
        self.live.progress()
    }

    /// The result is ready: stops the notifications (what is queued is
    /// not sent: the response tells the rest) and returns once the last
    /// one sent is [`QUIET`] old, so the response may follow.
    pub async fn finish(mut self) {
        if let (Some(finish), Some(task)) = (self.finish.take(), self.task.take()) {
            let _ = finish.send(());
            let _ = task.await;
        }
        // Only now: a notification still being sent would read 100.
        self.live.watch().finish();
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn forward(
    live: Arc<Live>,
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut finished: oneshot::Receiver<()>,
) {
    let mut sender = Sender {
        peer,
        token,
        last: 0.0,
        sent_at: None,
        open: true,
    };
    let mut quiet_until = Instant::now() + HEARTBEAT;
    loop {
        tokio::select! {
            biased;
            _ = &mut finished => {
                if let Some(sent_at) = sender.sent_at {
                    tokio::time::sleep_until(sent_at + QUIET).await;
                }
                return;
            }
            () = live.changed() => {
                for line in live.take_lines() {
                    sender.send(&live, line).await;
                }
            }
            () = tokio::time::sleep_until(quiet_until) => {
                let line = live.watch().status(std::time::Instant::now());
                sender.send(&live, line).await;
            }
        }
        quiet_until = Instant::now() + HEARTBEAT;
    }
}

struct Sender {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    /// The last value sent: each must be greater.
    last: f64,
    /// When the last notification was handed to the transport.
    sent_at: Option<Instant>,
    /// False once the transport refused a notification.
    open: bool,
}

impl Sender {
    async fn send(&mut self, live: &Live, message: String) {
        let value = {
            let watch = live.watch();
            next_value(self.last, watch.progress(), watch.next_milestone())
        };
        if !self.open || value <= self.last {
            return;
        }
        self.last = value;
        let param = ProgressNotificationParam::new(self.token.clone(), value)
            .with_total(TOTAL)
            .with_message(message);
        if self.peer.notify_progress(param).await.is_err() {
            self.open = false;
        }
        self.sent_at = Some(Instant::now());
    }
}

/// The next value to send after `last`, given the run's progress and where
/// it is heading (fractions of 1). When nothing moved, creep a twentieth of the
/// way toward the next milestone: always up, never reaching it.
fn next_value(last: f64, progress: f64, milestone: f64) -> f64 {
    let now = progress * TOTAL;
    if now > last {
        return now;
    }
    let target = milestone * TOTAL;
    let target = if target > last {
        target
    } else {
        // At the ceiling of unfinished work: creep toward the total itself.
        TOTAL - 0.01
    };
    last + (target - last) / 20.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_rise_strictly_and_stay_below_the_total_until_done() {
        let mut last = 0.0;
        for (progress, milestone) in [(0.0, 0.05), (0.0, 0.05), (0.1, 0.25), (0.1, 0.25)]
            .into_iter()
            .chain(std::iter::repeat_n((0.99, 0.99), 200))
        {
            let value = next_value(last, progress, milestone);
            assert!(value > last, "{value} after {last}");
            assert!(value < TOTAL);
            last = value;
        }
        assert_eq!(next_value(last, 1.0, 1.0), TOTAL);
    }
}
