//! `--metrics ADDR`: the metrics on a listener of their own, without a
//! token, for a Prometheus on a private network (or beside a stdio server,
//! which has no HTTP listener at all).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use super::{CONTENT_TYPE, Metrics};

/// Binds `addr` (`HOST:PORT`, or a port for loopback) and serves
/// `GET /metrics` there for as long as the process runs. The address
/// bound is returned (port 0 picks a free one) and said on stderr.
pub async fn serve(addr: &str, metrics: Arc<Metrics>) -> Result<SocketAddr, String> {
    let parsed: SocketAddr = match addr.parse::<u16>() {
        Ok(port) => SocketAddr::from(([127, 0, 0, 1], port)),
        Err(_) => addr.parse().map_err(|_| {
            format!("--metrics `{addr}` is not an address: give HOST:PORT (e.g. 127.0.0.1:9464) or a port")
        })?,
    };
    let listener = TcpListener::bind(parsed)
        .await
        .map_err(|e| format!("--metrics cannot listen on {parsed}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.render()).into_response() }
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the metrics listener stopped: {e}");
        }
    });
    eprintln!("chorus: metrics at http://{bound}/metrics");
    Ok(bound)
}
