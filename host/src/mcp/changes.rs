//! Tells clients when the tool list changes — a reload swapped pipelines
//! in or out, changed a description or an option, or the synthesizers that
//! `resynthesize` offers. A session that negotiated 2025-11-25 over stdio
//! gets `notifications/tools/list_changed` as it happens; a 2026-07-28
//! client (on stdio or HTTP, where each request stands alone) gets it on
//! the `subscriptions/listen` stream it opened.

use std::sync::{Arc, Mutex, Weak};

use rmcp::RoleServer;
use rmcp::model::{ProtocolVersion, Tool};
use rmcp::service::{Peer, SubscriptionContext};
use serde_json::Value;
use tokio::sync::watch;

use super::tools;
use super::transport::Session;
use crate::app::Chorus;
use crate::pipeline::Runner;

/// The tool list chorus serves now. Built once per runner (a config, or
/// a reload's) and shared: every `tools/call` looks its tool up here, and
/// building every pipeline's schema per call was a measurable part of a
/// run's CPU.
pub fn current(chorus: &Chorus) -> Arc<[Tool]> {
    // The runner the list was built for, held weakly: a reload's old
    // runner is dropped as usual, and its address is never reused while
    // the weak handle lives, so `ptr_eq` cannot match a newer runner.
    type Built = Option<(Weak<Runner>, Arc<[Tool]>)>;
    static BUILT: Mutex<Built> = Mutex::new(None);
    let runner = chorus.runner();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((of, tools)) = built.as_ref()
        && Weak::ptr_eq(of, &Arc::downgrade(&runner))
    {
        return tools.clone();
    }
    let tools: Arc<[Tool]> = tools::list(&runner).into();
    *built = Some((Arc::downgrade(&runner), tools.clone()));
    tools
}

/// Follows the runner swapped in by each reload, and resolves when the
/// tool list it serves differs from the one last seen.
pub struct ToolWatch {
    runners: watch::Receiver<Arc<Runner>>,
    last: Value,
}

impl ToolWatch {
    pub fn new(chorus: &Chorus) -> Self {
        let mut runners = chorus.changes();
        let last = fingerprint(&tools::list(&runners.borrow_and_update()));
        Self { runners, last }
    }

    /// Waits for the next change of the tool list; `None` once chorus is
    /// gone.
    pub async fn changed(&mut self) -> Option<()> {
        loop {
            self.runners.changed().await.ok()?;
            let now = fingerprint(&tools::list(&self.runners.borrow_and_update()));
            if now != self.last {
                self.last = now;
                return Some(());
            }
        }
    }
}

fn fingerprint(tools: &[Tool]) -> Value {
    serde_json::to_value(tools).unwrap_or(Value::Null)
}

/// Sends `notifications/tools/list_changed` to a stdio client that
/// negotiated a version before 2026-07-28, for as long as its session lasts.
pub fn announce_to_session(chorus: &Chorus, peer: Peer<RoleServer>, session: Session) {
    let mut watch = ToolWatch::new(chorus);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = watch.changed() => if changed.is_none() { return },
                () = session.ended() => return,
            }
            let legacy = peer
                .peer_info()
                .is_some_and(|info| info.protocol_version < ProtocolVersion::V_2026_07_28);
            if !legacy {
                continue; // not initialized yet, or it listens with subscriptions/listen
            }
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!("tools/list_changed not sent: {e}");
            }
        }
    });
}

/// Serves one `subscriptions/listen` stream until the client cancels it or
/// the session ends.
pub async fn listen(chorus: &Chorus, subscription: SubscriptionContext, session: &Session) {
    let mut watch = ToolWatch::new(chorus);
    loop {
        tokio::select! {
            changed = watch.changed() => if changed.is_none() { return },
            () = subscription.cancelled() => return,
            () = session.ended() => return,
        }
        if let Err(e) = subscription.sink().notify_tool_list_changed().await {
            tracing::debug!("tools/list_changed not sent on a subscription: {e}");
            return;
        }
    }
}
