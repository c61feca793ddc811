//! Cancelling a call over HTTP.
//!
//! A client on MCP 2026-07-28 cancels a call by closing its response
//! stream; rmcp turns that into the handler's cancellation, which drops the
//! run and its upstream requests. A client on an older revision (the
//! 2025-11-25 handshake) sends `notifications/cancelled` in a POST of its
//! own, and keeps the call's stream open. A stateless server cannot tie
//! that notification to a call by itself — request ids are the client's,
//! and every client counts from 0 — so this layer remembers each request
//! in flight by its caller and JSON-RPC id. The caller is the client's
//! address, its `Mcp-Session-Id` and its credentials (a digest of the
//! `Authorization` header: the secret itself is not kept). Clients behind
//! one proxy, or on one machine, can still look alike, so a cancellation
//! stops a call only when nothing else could be meant: exactly one call of
//! that caller with that id is in flight, and no call of that caller with
//! that id ended lately (a client whose own call was just answered may
//! still send its cancellation for it). Otherwise it is ignored rather
//! than risk stopping someone else's run.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::message::{self, Message};
use crate::http::refuse;
use crate::mcp::server::StopCall;

/// How long an ended call's key makes a cancellation naming it ambiguous.
const RECENT_FOR: Duration = Duration::from_secs(120);
/// Ended calls remembered at most (the oldest are forgotten first).
const RECENT_MAX: usize = 4096;

/// Who sent a request, as well as a stateless server can tell.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Caller {
    ip: IpAddr,
    /// SHA-256 of the `Mcp-Session-Id` and `Authorization` headers.
    credentials: [u8; 32],
}

impl Caller {
    fn of(peer: SocketAddr, headers: &HeaderMap) -> Self {
        let mut digest = Sha256::new();
        for name in ["mcp-session-id", header::AUTHORIZATION.as_str()] {
            for value in headers.get_all(name) {
                digest.update(value.as_bytes());
                digest.update([0]);
            }
            digest.update([0xff]);
        }
        Self {
            ip: peer.ip(),
            credentials: digest.finalize().into(),
        }
    }

    fn key(&self, id: String) -> Key {
        Key {
            caller: self.clone(),
            id,
        }
    }
}

/// A request: its caller and its JSON-RPC id, as JSON text (so `1` and
/// `"1"` differ, as they do on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    caller: Caller,
    id: String,
}

#[derive(Default)]
struct Calls {
    in_flight: HashMap<Key, Vec<(u64, CancellationToken)>>,
    /// Calls that ended lately, oldest first.
    ended: VecDeque<(Instant, Key)>,
}

pub struct InFlight {
    calls: Mutex<Calls>,
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
            .in_flight
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

    /// Cancels the one request in flight under `key`, unless another one
    /// under it ended lately; says whether it did.
    fn cancel(&self, key: &Key) -> bool {
        let mut calls = self.lock();
        let now = Instant::now();
        while calls
            .ended
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > RECENT_FOR)
        {
            calls.ended.pop_front();
        }
        if calls.ended.iter().any(|(_, ended)| ended == key) {
            return false;
        }
        match calls.in_flight.get(key).map(Vec::as_slice) {
            Some([(_, token)]) => {
                token.cancel();
                true
            }
            _ => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests now in flight (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().in_flight.values().map(Vec::len).sum()
    }
}

/// Forgets its request when the response is over (sent, or dropped
/// because the client went away), and remembers that it ended.
struct Registration {
    in_flight: Arc<InFlight>,
    key: Key,
    serial: u64,
    token: CancellationToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut calls = self.in_flight.lock();
        if let Some(entries) = calls.in_flight.get_mut(&self.key) {
            entries.retain(|(serial, _)| *serial != self.serial);
            if entries.is_empty() {
                calls.in_flight.remove(&self.key);
            }
        }
        // A call that was cancelled needs no guard against its own
        // cancellation arriving twice.
        if !self.token.is_cancelled() {
            if calls.ended.len() >= RECENT_MAX {
                calls.ended.pop_front();
            }
            calls.ended.push_back((Instant::now(), self.key.clone()));
        }
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
    if crate::http::values_at_most(&bytes) > crate::http::MAX_VALUES {
        return refuse(
            &parts.headers,
            StatusCode::BAD_REQUEST,
            format!(
                "chorus: the request holds more than {} JSON values; an MCP message needs a few thousand at most.\n",
                crate::http::MAX_VALUES
            ),
        );
    }
    // A body sent as something else than JSON is rmcp's to refuse (415).
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        });
    let message = match message::classify(&bytes) {
        Ok(message) => message,
        Err(invalid) if json => return invalid.into_response(),
        Err(_) => Message::Other,
    };
    let caller = Caller::of(peer, &parts.headers);
    let request = Request::from_parts(parts, Body::from(bytes));
    match message {
        Message::Request { id, tool_call } => {
            let registration = in_flight.register(caller.key(id.clone()));
            let mut request = request;
            if tool_call {
                request
                    .extensions_mut()
                    .insert(super::per_minute::ToolCall { id: id.clone() });
            }
            request
                .extensions_mut()
                .insert(StopCall(registration.token.clone()));
            let response = undeserializable(next.run(request).await, Some(&id)).await;
            track_response(response, registration)
        }
        Message::Cancelled { request_id } => {
            let key = caller.key(request_id);
            if in_flight.cancel(&key) {
                tracing::info!(id = %key.id, "call cancelled by the client (notifications/cancelled)");
            } else {
                tracing::debug!(id = %key.id, "notifications/cancelled names no single call of this caller in flight here; ignored");
            }
            next.run(request).await
        }
        Message::Other => undeserializable(next.run(request).await, None).await,
    }
}

/// rmcp's answer to a message whose envelope was fine but whose content
/// it cannot read (a known method with malformed params): `415` and plain
/// text. Turned into what JSON-RPC says: 400 with an invalid-request error.
async fn undeserializable(response: Response, id: Option<&str>) -> Response {
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    // rmcp's 415 bodies are one short line; anything longer is not one.
    let Ok(text) = axum::body::to_bytes(response.into_body(), 4096).await else {
        return message::error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            id,
            message::INVALID_REQUEST,
            "the request could not be read",
        );
    };
    let text = String::from_utf8_lossy(&text);
    let Some(reason) = text.strip_prefix("fail to deserialize request body") else {
        return message::error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            id,
            message::INVALID_REQUEST,
            text.trim(),
        );
    };
    message::error_response(
        StatusCode::BAD_REQUEST,
        id,
        message::INVALID_REQUEST,
        &format!(
            "the message is not a valid MCP request ({}); check the method's params",
            reason.trim()
        ),
    )
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

    fn caller(ip: [u8; 4], authorization: &str) -> Caller {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, authorization.parse().unwrap());
        Caller::of(SocketAddr::from((ip, 1)), &headers)
    }

    fn key(ip: [u8; 4], id: &str) -> Key {
        caller(ip, "Bearer t").key(id.to_owned())
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
        drop((a, b, c));
        assert_eq!(in_flight.len(), 0, "finished requests are forgotten");
    }

    #[test]
    fn a_late_cancellation_of_an_answered_call_stops_no_one_elses() {
        let in_flight = Arc::new(InFlight::new(1024));
        // Client B's id 1 is answered; client A's id 1, from the same
        // address with the same token, is in flight.
        drop(in_flight.register(key([127, 0, 0, 1], "1")));
        let a = in_flight.register(key([127, 0, 0, 1], "1"));
        assert!(!in_flight.cancel(&key([127, 0, 0, 1], "1")));
        assert!(!a.token.is_cancelled());
        // Another id of the same caller is no doubt.
        let other = in_flight.register(key([127, 0, 0, 1], "2"));
        assert!(in_flight.cancel(&key([127, 0, 0, 1], "2")));
        assert!(other.token.is_cancelled());
    }

    #[test]
    fn callers_with_other_credentials_or_sessions_are_told_apart() {
        let in_flight = Arc::new(InFlight::new(1024));
        let a = in_flight.register(caller([127, 0, 0, 1], "Bearer one").key("1".into()));
        assert!(!in_flight.cancel(&caller([127, 0, 0, 1], "Bearer two").key("1".into())));
        let mut session = HeaderMap::new();
        session.insert(header::AUTHORIZATION, "Bearer one".parse().unwrap());
        session.insert("mcp-session-id", "s-1".parse().unwrap());
        let other = Caller::of(SocketAddr::from(([127, 0, 0, 1], 2)), &session);
        assert!(!in_flight.cancel(&other.key("1".into())));
        assert!(!a.token.is_cancelled());
        assert!(in_flight.cancel(&caller([127, 0, 0, 1], "Bearer one").key("1".into())));
        assert!(a.token.is_cancelled());
    }
}
