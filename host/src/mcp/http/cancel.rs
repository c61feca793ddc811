//! Cancelling a call over HTTP.
//!
//! A client on MCP 2026-07-28 cancels a call by closing its response
//! stream; rmcp turns that into the handler's cancellation, which drops the
//! run and its upstream requests. A client on an older revision (the
//! 2025-11-25 handshake) sends `notifications/cancelled` in a POST of its
//! own, and keeps the call's stream open. A stateless server cannot tie
//! that notification to a call by itself — request ids are the client's,
//! and every client counts from 0 — so this layer remembers each request
//! in flight by (client address, JSON-RPC id). A cancellation that names
//! exactly one of them stops that call and ends its response stream, as a
//! disconnect would. One that names none (the call already
//! answered, or running on another instance) or several (clients behind
//! one proxy reusing an id) is ignored rather than risk stopping someone
//! else's run.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::access::refuse;
use crate::mcp::server::StopCall;

/// A request in flight: who sent it and its JSON-RPC id, as JSON text
/// (so `1` and `"1"` differ, as they do on the wire).
type Key = (IpAddr, String);

pub struct InFlight {
    calls: Mutex<HashMap<Key, Vec<(u64, CancellationToken)>>>,
    next: AtomicU64,
    /// Largest request body read (rmcp is given the same bound).
    max_body: usize,
}

impl InFlight {
    pub fn new(max_body: usize) -> Self {
        Self {
            calls: Mutex::default(),
            next: AtomicU64::new(0),
            max_body,
        }
    }

    fn register(self: &Arc<Self>, key: Key) -> Registration {
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        self.lock()
            .entry(key.clone())
            .or_default()
            .push((serial, token.clone()));
        Registration {
            in_flight: self.clone(),
            key,
            serial,
            token,
        }
    }

    /// Cancels the one request in flight under `key`; says whether it did.
    fn cancel(&self, key: &Key) -> bool {
        match self.lock().get(key).map(Vec::as_slice) {
            Some([(_, token)]) => {
                token.cancel();
                true
            }
            _ => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<(u64, CancellationToken)>>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests now in flight (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }
}

/// Forgets its request when the response is over (sent, or dropped
/// because the client went away).
struct Registration {
    in_flight: Arc<InFlight>,
    key: Key,
    serial: u64,
    token: CancellationToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut calls = self.in_flight.lock();
        if let Some(entries) = calls.get_mut(&self.key) {
            entries.retain(|(serial, _)| *serial != self.serial);
            if entries.is_empty() {
                calls.remove(&self.key);
            }
        }
    }
}

/// What a POST carries, as far as this layer cares.
enum Message {
    Request { id: String },
    Cancelled { request_id: String },
    Other,
}

fn classify(body: &[u8]) -> Message {
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(body) else {
        return Message::Other;
    };
    let id = message.get("id").filter(|id| !id.is_null());
    let method = message.get("method").and_then(Value::as_str);
    match (method, id) {
        (Some(_), Some(id)) => Message::Request { id: id.to_string() },
        (Some("notifications/cancelled"), None) => message
            .get("params")
            .and_then(|params| params.get("requestId"))
            .filter(|id| !id.is_null())
            .map_or(Message::Other, |id| Message::Cancelled {
                request_id: id.to_string(),
            }),
        _ => Message::Other,
    }
}

/// The middleware, in front of rmcp's service.
pub async fn track(
    State(in_flight): State<Arc<InFlight>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, in_flight.max_body).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let too_big = std::error::Error::source(&error)
                .is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
            return if too_big {
                refuse(
                    &parts.headers,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "chorus: the request is larger than {} bytes; send a shorter prompt.\n",
                        in_flight.max_body
                    ),
                )
            } else {
                refuse(
                    &parts.headers,
                    StatusCode::BAD_REQUEST,
                    format!("chorus: could not read the request body: {error}\n"),
                )
            };
        }
    };
    let message = classify(&bytes);
    let request = Request::from_parts(parts, Body::from(bytes));
    match message {
        Message::Request { id } => {
            let registration = in_flight.register((peer.ip(), id));
            let mut request = request;
            request
                .extensions_mut()
                .insert(StopCall(registration.token.clone()));
            let response = next.run(request).await;
            track_response(response, registration)
        }
        Message::Cancelled { request_id } => {
            let key = (peer.ip(), request_id);
            if in_flight.cancel(&key) {
                tracing::info!(id = %key.1, "call cancelled by the client (notifications/cancelled)");
            } else {
                tracing::debug!(id = %key.1, "notifications/cancelled names no single call in flight here; ignored");
            }
            next.run(request).await
        }
        Message::Other => next.run(request).await,
    }
}

/// How long a call's response is still read after its client went away,
/// for the call to see its [`StopCall`] and answer into rmcp's channel.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// The response body of a request in flight. The client's copy ends as
/// soon as the request is cancelled. When it ends early — cancelled, or
/// the client gone — the call is stopped through its [`StopCall`] and
/// rmcp's side is read to its end in the background, so the call's last
/// message takes rmcp's ordinary path. (Dropping rmcp's stream would cancel
/// the call too, but rmcp then reports the undeliverable answer as an
/// error, for every call a client abandons.)
struct Tracked {
    inner: Option<BodyDataStream>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    registration: Registration,
}

fn track_response(response: Response, registration: Registration) -> Response {
    let (parts, body) = response.into_parts();
    let tracked = Tracked {
        inner: Some(body.into_data_stream()),
        cancelled: Box::pin(registration.token.clone().cancelled_owned()),
        registration,
    };
    Response::from_parts(parts, Body::from_stream(tracked))
}

impl Stream for Tracked {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.cancelled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let next = Pin::new(inner).poll_next(cx);
        if let Poll::Ready(None) = next {
            self.inner = None;
        }
        next
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let Some(mut inner) = self.inner.take() else {
            return;
        };
        self.registration.token.cancel();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let drained = async { while inner.next().await.is_some() {} };
                let _ = tokio::time::timeout(DRAIN_LIMIT, drained).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: [u8; 4], id: &str) -> Key {
        (IpAddr::from(ip), id.to_owned())
    }

    #[test]
    fn messages_are_told_apart() {
        let request = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#;
        assert!(matches!(classify(request), Message::Request { id } if id == "7"));
        let string_id = br#"{"jsonrpc":"2.0","id":"7","method":"ping"}"#;
        assert!(matches!(classify(string_id), Message::Request { id } if id == "\"7\""));
        let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"x"}}"#;
        assert!(matches!(classify(cancel), Message::Cancelled { request_id } if request_id == "7"));
        for other in [
            &br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            br#"[1,2]"#,
            b"garbage",
        ] {
            assert!(matches!(classify(other), Message::Other));
        }
    }

    #[test]
    fn a_cancellation_stops_the_one_call_it_names_and_nothing_ambiguous() {
        let in_flight = Arc::new(InFlight::new(1024));
        let a = in_flight.register(key([10, 0, 0, 1], "1"));
        let b = in_flight.register(key([10, 0, 0, 2], "1"));
        assert!(!in_flight.cancel(&key([10, 0, 0, 1], "2")));
        assert!(!in_flight.cancel(&key([10, 0, 0, 3], "1")));
        assert!(in_flight.cancel(&key([10, 0, 0, 1], "1")));
        assert!(a.token.is_cancelled() && !b.token.is_cancelled());

        // Two clients behind one address using the same id: neither is
        // stopped, since either could be meant.
        let c = in_flight.register(key([10, 0, 0, 2], "1"));
        assert!(!in_flight.cancel(&key([10, 0, 0, 2], "1")));
        assert!(!b.token.is_cancelled() && !c.token.is_cancelled());
        drop(c);
        assert!(in_flight.cancel(&key([10, 0, 0, 2], "1")));

        drop((a, b));
        assert_eq!(in_flight.len(), 0, "finished requests are forgotten");
    }
}
