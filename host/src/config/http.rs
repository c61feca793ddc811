//! `[http]`: how `chorus serve --http` treats connections (timeouts, how
//! many, how long to drain), with its defaults and its check. Its
//! `[[http.clients]]` are `clients.rs`'s.

use std::time::Duration;

use serde::Deserialize;

use super::check::{Invalid, MAX_TIMEOUT, count, duration};

/// Connections to `chorus serve --http` (read at startup).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http {
    /// A connection that sends no complete request head within this long
    /// (after connecting, or between requests) is closed.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// A connection whose peer takes none of a response for this long (a
    /// client that stopped reading a stream) is closed: it cannot hold a
    /// connection, nor the run it was streaming (that one goes on to its
    /// end, and is kept).
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
    /// Connections open at once. When full, the oldest connection that has
    /// not yet made an accepted request is closed for a new one; capped
    /// below the process's descriptor limit, with a margin for the store,
    /// upstream requests and plugins.
    pub max_connections: usize,
    /// Connections from one address that have not yet made an accepted
    /// request; past it, that address's oldest such connection is closed.
    pub max_connections_per_peer: usize,
    /// On SIGTERM or SIGINT, how long runs already going may take to
    /// finish (new requests are refused meanwhile) before they are stopped.
    pub drain_seconds: u64,
    /// `[[http.clients]]`: who may use the server, each with a token of its
    /// own; none means the one `CHORUS_TOKEN` (an admin with no limits).
    pub clients: Vec<super::HttpClient>,
}

impl Default for Http {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(30),
            max_connections: 512,
            max_connections_per_peer: 64,
            drain_seconds: 30,
            clients: Vec::new(),
        }
    }
}

impl Http {
    /// `Err((key, message))` for the first connection key out of its
    /// bounds (the clients are checked with the pipelines they name).
    pub(super) fn check(&self) -> Result<(), Invalid> {
        duration("http.header_timeout", self.header_timeout, MAX_TIMEOUT)?;
        duration("http.write_timeout", self.write_timeout, MAX_TIMEOUT)?;
        count("http.max_connections", self.max_connections, 1, 1 << 20)?;
        count(
            "http.max_connections_per_peer",
            self.max_connections_per_peer,
            1,
            self.max_connections,
        )?;
        let drain = usize::try_from(self.drain_seconds).unwrap_or(usize::MAX);
        count("http.drain_seconds", drain, 0, 3600)
    }
}
