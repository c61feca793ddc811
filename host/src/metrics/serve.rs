//! `--metrics ADDR`: the metrics on a listener of their own, without a
//! token, for a Prometheus on a private network (or beside a stdio server,
//! which has no HTTP listener at all).

use crate::notice::notice;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use super::{CONTENT_TYPE, Metrics};

/// Binds `addr` (`HOST:PORT`, or a port for loopback) and serves
/// `GET /metrics` there for as long as the process runs, to requests whose
/// Host `allows_host` accepts (the guard against DNS rebinding the main
/// listener has). The address bound is returned (port 0 picks a free one)
/// and said on stderr.
pub async fn serve(
    addr: &str,
    metrics: Arc<Metrics>,
    allows_host: impl Fn(&str) -> bool + Clone + Send + Sync + 'static,
) -> Result<SocketAddr, String> {
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
        get(move |headers: HeaderMap| {
            let metrics = metrics.clone();
            let allowed = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .is_some_and(&allows_host);
            async move {
                if !allowed {
                    return (
                        StatusCode::FORBIDDEN,
                        "chorus: this Host is not one of the metrics listener's names (this guards against DNS rebinding): \
                         scrape it by address, or name the host with `--allow-host`.\n",
                    )
                        .into_response();
                }
                ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.render()).into_response()
            }
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the metrics listener stopped: {e}");
        }
    });
    notice!("chorus: metrics at http://{bound}/metrics");
    Ok(bound)
}
