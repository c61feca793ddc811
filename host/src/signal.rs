//! The signals that stop a server: the first SIGINT (Ctrl-C) or SIGTERM
//! (Ctrl-C alone where there is no SIGTERM) begins a graceful stop — a
//! drain over HTTP, an end of the session on stdio.

use crate::notice::notice;
use tokio_util::sync::CancellationToken;

/// Fires `stop` on the first SIGINT (Ctrl-C) or SIGTERM.
pub async fn on_signal(stop: CancellationToken) {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    // The stop first: saying so may fail (stderr gone), stopping may not.
    stop.cancel();
    notice!("chorus: shutting down");
}
