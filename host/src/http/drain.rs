//! Graceful shutdown of `serve --http` on SIGTERM or SIGINT: the instance
//! drains. New requests get a 503 that says it is shutting down (`/health`
//! too, so a load balancer sends them elsewhere), runs already going may
//! finish for up to `[http] drain_seconds`, then those left are stopped —
//! runs recorded as cancelled, tasks failed saying why — the store is
//! flushed, the instance's lease given back, and the process exits 0.

use crate::notice::notice;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::access;
use crate::app::Chorus;

/// Whether this instance is draining; clones share it.
#[derive(Clone, Default)]
pub struct Drain(Arc<AtomicBool>);

impl Drain {
    pub fn begin(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn on(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Refuses every request once draining began.
pub async fn refuse(State(drain): State<Drain>, request: Request, next: Next) -> Response {
    if !drain.on() {
        return next.run(request).await;
    }
    let mut response = access::plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "chorus: this instance is shutting down and takes no new requests; send it to \
         another instance (or again once this one is back).\n"
            .into(),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Waits until no run is going on here, or `within` has passed; says
/// which in the log and on stderr.
pub async fn runs_end(chorus: &Chorus, within: Duration) {
    let started = Instant::now();
    let going = || chorus.metrics.runs_in_flight();
    if going() > 0 {
        notice!(
            "chorus: shutting down: new requests are refused; {} runs may finish within {within:?}",
            going()
        );
    }
    match chorus.runs_end(within).await {
        0 => tracing::info!("every run ended within the drain ({:?})", started.elapsed()),
        left => {
            notice!("chorus: {left} runs still going after {within:?}: stopping them");
            tracing::warn!(
                "{left} runs still going after [http] drain_seconds ({within:?}): cancelled"
            );
        }
    }
}
