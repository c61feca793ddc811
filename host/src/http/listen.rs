//! Accepting connections for `serve --http`, bounded, so that connections
//! which never make a request cannot lock out the clients that do:
//!
//! - a connection that sends no complete request head within
//!   `http.header_timeout` (after connecting, or between requests) is
//!   closed (hyper's header-read timeout);
//! - a connection whose peer takes nothing of a response for
//!   `http.write_timeout` (its receive window and our send buffer full:
//!   a client that stopped reading a stream) is closed, and with it the
//!   response's body;
//! - at most `http.max_connections` are open, capped below the descriptor
//!   limit with a margin for the store, upstream requests and plugins;
//! - a connection is *unproven* until one of its requests passed a token
//!   or session check (the middleware that checked it marks the response
//!   [`Proven`]; open paths — `/health`, `/sign-in`, assets, discovery, a
//!   404 — prove nothing), and an address keeps at most
//!   `http.max_connections_per_peer` proven ones (past that, its newer
//!   ones stay unproven). When the server is full, the
//!   oldest unproven connection is closed to make room for a newcomer (a
//!   new client's first request is on an unproven connection, so a flood
//!   of idle sockets cannot keep it out); an address with more than
//!   `http.max_connections_per_peer` unproven connections loses its
//!   oldest one the same way — one that has had `PER_PEER_GRACE` to send
//!   its request: a burst of clients behind one address (a load balancer,
//!   a bench) opens many connections at once, and one of them, closed
//!   while its request is being read, would lose an answer it had begun.
//!   Only when every connection is proven is a newcomer turned away.
//!
//! Shutdown: once `stop` fires no connection is accepted, and every open
//! one finishes its request in flight and closes.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::config::Http;

/// Put in a response's extensions by the middleware that let its request
/// in on a client's token or session (or as the open server's one local
/// client): the mark that proves its connection.
#[derive(Debug, Clone, Copy)]
pub struct Proven;

/// Descriptors kept for everything but inbound connections.
const DESCRIPTOR_MARGIN: usize = 128;
/// How long a new connection has to send its request before its address's
/// share (`http.max_connections_per_peer`) may close it for a newcomer.
const PER_PEER_GRACE: Duration = Duration::from_secs(1);

/// The bounds in force, once checked against the descriptor limit.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub header_timeout: Duration,
    pub write_timeout: Duration,
    pub max_connections: usize,
    pub max_per_peer: usize,
}

impl Bounds {
    /// From the config; `max_connections` lowered to fit `descriptors`
    /// (the process's limit, when known) less the margin.
    pub fn new(http: &Http, descriptors: Option<usize>) -> Self {
        let fits = descriptors.map_or(usize::MAX, |d| d.saturating_sub(DESCRIPTOR_MARGIN).max(1));
        if http.max_connections > fits {
            tracing::warn!(
                "http.max_connections = {} does not fit the descriptor limit ({}) less {DESCRIPTOR_MARGIN} kept for other work: using {fits}; raise `ulimit -n` for more",
                http.max_connections,
                descriptors.unwrap_or_default(),
            );
        }
        let max_connections = http.max_connections.min(fits);
        Self {
            header_timeout: http.header_timeout,
            write_timeout: http.write_timeout,
            max_connections,
            max_per_peer: http.max_connections_per_peer.min(max_connections),
        }
    }
}

/// The process's limit on open descriptors.
#[cfg(unix)]
pub fn descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (status == 0 && limit.rlim_cur != libc::RLIM_INFINITY)
        .then(|| usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX))
}

#[cfg(not(unix))]
pub fn descriptor_limit() -> Option<usize> {
    None
}

struct Entry {
    peer: IpAddr,
    proven: bool,
    opened: Instant,
    close: CancellationToken,
}

/// The open connections, oldest first.
#[derive(Default)]
struct Open {
    next: u64,
    entries: BTreeMap<u64, Entry>,
}

struct Connections {
    bounds: Bounds,
    open: Mutex<Open>,
    /// Told when a connection closes (for shutdown).
    closed: tokio::sync::Notify,
}

impl Connections {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes room for a connection from `peer`, closing unproven ones as
    /// needed; `None` when every connection is proven and none may close.
    fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        self.admit_at(peer, Instant::now())
    }

    fn admit_at(self: &Arc<Self>, peer: IpAddr, now: Instant) -> Option<Slot> {
        let mut open = self.lock();
        let unproven_here = open
            .entries
            .values()
            .filter(|e| !e.proven && e.peer == peer)
            .count();
        if unproven_here >= self.bounds.max_per_peer {
            Self::evict(&mut open, |e| {
                e.peer == peer && now.saturating_duration_since(e.opened) >= PER_PEER_GRACE
            });
        }
        if open.entries.len() >= self.bounds.max_connections && !Self::evict(&mut open, |_| true) {
            return None;
        }
        let serial = open.next;
        open.next += 1;
        let close = CancellationToken::new();
        open.entries.insert(
            serial,
            Entry {
                peer,
                proven: false,
                opened: now,
                close: close.clone(),
            },
        );
        Some(Slot {
            connections: self.clone(),
            serial,
            close,
        })
    }

    /// Closes the oldest unproven connection that `which` picks.
    fn evict(open: &mut Open, which: impl Fn(&Entry) -> bool) -> bool {
        let oldest = open
            .entries
            .iter()
            .find(|(_, e)| !e.proven && which(e))
            .map(|(serial, _)| *serial);
        let Some(serial) = oldest else {
            return false;
        };
        if let Some(entry) = open.entries.remove(&serial) {
            tracing::debug!(peer = %entry.peer, "closed a connection that made no accepted request, for a new one");
            entry.close.cancel();
        }
        true
    }

    fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

/// One connection's place; given back when dropped.
struct Slot {
    connections: Arc<Connections>,
    serial: u64,
    close: CancellationToken,
}

impl Slot {
    /// Marks the connection proven, unless its address already holds its
    /// share of proven connections (then it stays evictable).
    fn prove(&self) {
        let share = self.connections.bounds.max_per_peer;
        let mut open = self.connections.lock();
        let Some(peer) = open.entries.get(&self.serial).map(|e| e.peer) else {
            return;
        };
        let proven_here = open
            .entries
            .values()
            .filter(|e| e.proven && e.peer == peer)
            .count();
        if let Some(entry) = open.entries.get_mut(&self.serial)
            && !entry.proven
            && proven_here < share
        {
            entry.proven = true;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connections.lock().entries.remove(&self.serial);
        self.connections.closed.notify_waiters();
    }
}

/// Serves `app` on `listener` until `stop`, then waits for open
/// connections to finish (the caller bounds that wait).
pub async fn serve(listener: TcpListener, app: Router, bounds: Bounds, stop: CancellationToken) {
    let connections = Arc::new(Connections {
        bounds,
        open: Mutex::default(),
        closed: tokio::sync::Notify::new(),
    });
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, most likely: give closing
                // connections a moment rather than spin.
                tracing::warn!("cannot accept a connection: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = connections.admit(peer.ip()) else {
            tracing::warn!(%peer, "refused a connection: all {} are in use (http.max_connections)", bounds.max_connections);
            drop(stream);
            continue;
        };
        tokio::spawn(connection(
            stream,
            peer,
            app.clone(),
            slot,
            bounds,
            stop.clone(),
        ));
    }
    drop(listener);
    loop {
        let closed = connections.closed.notified();
        if connections.len() == 0 {
            break;
        }
        closed.await;
    }
}

async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    app: Router,
    slot: Slot,
    bounds: Bounds,
    stop: CancellationToken,
) {
    let slot = Arc::new(slot);
    let close = slot.close.clone();
    let service = {
        let slot = slot.clone();
        hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let (app, slot) = (app.clone(), slot.clone());
            async move {
                let response = app.oneshot(request.map(Body::new)).await;
                if let Ok(response) = &response
                    && response.extensions().get::<Proven>().is_some()
                {
                    slot.prove();
                }
                response
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout);
    // A write that makes no progress for this long fails, and the
    // connection with it: the timer runs only while a write waits.
    let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
    stream.set_write_timeout(Some(bounds.write_timeout));
    let served = builder.serve_connection(TokioIo::new(Box::pin(stream)), service);
    tokio::pin!(served);
    let outcome = tokio::select! {
        outcome = served.as_mut() => outcome,
        // Made room for another: closed at once.
        () = close.cancelled() => return,
        () = stop.cancelled() => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(error) = outcome {
        tracing::debug!(%peer, "connection ended: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connections(max_connections: usize, max_per_peer: usize) -> Arc<Connections> {
        Arc::new(Connections {
            bounds: Bounds {
                header_timeout: Duration::from_secs(5),
                write_timeout: Duration::from_secs(30),
                max_connections,
                max_per_peer,
            },
            open: Mutex::default(),
            closed: tokio::sync::Notify::new(),
        })
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn a_full_server_closes_its_oldest_unproven_connection_for_a_newcomer() {
        let connections = connections(3, 3);
        let first = connections.admit(A).unwrap();
        let proven = connections.admit(B).unwrap();
        proven.prove();
        let third = connections.admit(A).unwrap();
        let fourth = connections.admit(B).unwrap();
        assert!(
            first.close.is_cancelled(),
            "the oldest unproven one made room"
        );
        assert!(!proven.close.is_cancelled() && !third.close.is_cancelled());
        assert_eq!(connections.len(), 3);
        third.prove();
        fourth.prove();
        assert!(connections.admit(A).is_none(), "all proven: no room");
        drop(fourth);
        assert!(connections.admit(A).is_some());
    }

    #[test]
    fn one_address_cannot_hold_more_than_its_share_of_unproven_connections() {
        let connections = connections(10, 2);
        let start = Instant::now();
        let a1 = connections.admit_at(A, start).unwrap();
        let b1 = connections.admit_at(B, start).unwrap();
        let a2 = connections.admit_at(A, start).unwrap();
        let later = start + PER_PEER_GRACE;
        let _a3 = connections.admit_at(A, later).unwrap();
        assert!(a1.close.is_cancelled() && !a2.close.is_cancelled());
        assert!(!b1.close.is_cancelled(), "another address keeps its own");
    }

    #[test]
    fn a_burst_from_one_address_is_not_cut_by_its_share_before_the_grace() {
        let connections = connections(10, 2);
        let start = Instant::now();
        let burst: Vec<Slot> = (0..5)
            .map(|_| connections.admit_at(A, start).unwrap())
            .collect();
        assert!(
            burst.iter().all(|slot| !slot.close.is_cancelled()),
            "none closed while it may still be sending its request"
        );
        assert_eq!(connections.len(), 5);
        // The server's own bound still holds, grace or not.
        let full: Vec<Slot> = (0..5)
            .map(|_| connections.admit_at(A, start).unwrap())
            .collect();
        let _newcomer = connections.admit_at(B, start).unwrap();
        assert!(burst[0].close.is_cancelled(), "the oldest made room");
        assert_eq!(connections.len(), 10);
        drop(full);
    }

    #[test]
    fn one_address_cannot_hold_more_than_its_share_of_proven_connections() {
        let connections = connections(10, 2);
        let a: Vec<Slot> = (0..3).map(|_| connections.admit(A).unwrap()).collect();
        a.iter().for_each(Slot::prove);
        let proven = |slot: &Slot| connections.lock().entries[&slot.serial].proven;
        assert!(proven(&a[0]) && proven(&a[1]));
        assert!(
            !proven(&a[2]),
            "past its share, a connection stays evictable"
        );
        let b = connections.admit(B).unwrap();
        b.prove();
        assert!(proven(&b), "another address has a share of its own");
    }

    #[test]
    fn the_limit_leaves_descriptors_for_other_work() {
        let http = Http {
            max_connections: 1000,
            ..Http::default()
        };
        let bounds = Bounds::new(&http, Some(256));
        assert_eq!(bounds.max_connections, 256 - DESCRIPTOR_MARGIN);
        assert!(bounds.max_per_peer <= bounds.max_connections);
        assert_eq!(Bounds::new(&http, None).max_connections, 1000);
    }
}
