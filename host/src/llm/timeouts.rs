//! One attempt's clocks, kept over the byte stream with tokio timers (not
//! reqwest's `read_timeout`, which also bounds the wait for the response
//! head and cannot say which limit fired):
//!
//! - `first_token_timeout`: from sending the request to the first token of
//!   the answer or its reasoning. Keep-alive comments do not satisfy it.
//! - `idle_timeout`: the longest silence once the body has started;
//!   any bytes, keep-alive comments included, count as life.
//! - `request_timeout`: the whole attempt.
//!
//! (`connect_timeout` is the HTTP client's: it is a true connect bound.)
//! A failure names the setting, its value and the provider.
//!
//! The same clocks say when the body began and when its first token came
//! ([`Watch::first_token_after`]): the attempt's time to first token.

use std::time::Duration;

use tokio::time::Instant;

use super::types::{Failure, FailureKind};
use crate::config::{Provider, show_duration};

/// A provider's limits, with its name for messages.
#[derive(Debug, Clone)]
pub struct Limits {
    pub provider: String,
    pub connect: Duration,
    pub first_token: Duration,
    pub idle: Duration,
    pub request: Duration,
}

impl Limits {
    pub fn of(name: &str, config: &Provider) -> Self {
        Self {
            provider: name.to_owned(),
            connect: config.connect_timeout,
            first_token: config.first_token_timeout,
            idle: config.idle_timeout,
            request: config.request_timeout,
        }
    }

    /// The failure for a connection not made within `connect_timeout`.
    pub fn connect_failure(&self, host: &str) -> Failure {
        Failure::new(
            FailureKind::Timeout,
            format!(
                "cannot connect to {host} within connect_timeout = {} (providers.{})",
                show_duration(self.connect),
                self.provider
            ),
        )
    }
}

/// Which limit ends an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fired {
    FirstToken,
    Idle,
    Request,
}

/// The clocks of one attempt.
#[derive(Debug)]
pub struct Watch<'a> {
    limits: &'a Limits,
    first_token_by: Instant,
    request_by: Instant,
    /// When the request was sent (the clocks started).
    sent: Instant,
    /// When the body last showed life; `None` until it starts.
    last_bytes: Option<Instant>,
    /// When the body began to arrive.
    first_bytes: Option<Instant>,
    /// When the first token of the answer or its reasoning arrived.
    first_token: Option<Instant>,
}

impl<'a> Watch<'a> {
    /// Starts the clocks: the request is being sent now.
    pub fn start(limits: &'a Limits) -> Self {
        let now = Instant::now();
        Self {
            limits,
            first_token_by: now + limits.first_token,
            request_by: now + limits.request,
            sent: now,
            last_bytes: None,
            first_bytes: None,
            first_token: None,
        }
    }

    /// The next moment a limit fires, and which.
    pub fn deadline(&self) -> (Instant, Fired) {
        let mut next = (self.request_by, Fired::Request);
        if self.first_token.is_none() && self.first_token_by < next.0 {
            next = (self.first_token_by, Fired::FirstToken);
        }
        if let Some(last) = self.last_bytes {
            let idle_by = last + self.limits.idle;
            if idle_by < next.0 {
                next = (idle_by, Fired::Idle);
            }
        }
        next
    }

    /// Bytes of the body arrived (comments included).
    pub fn bytes(&mut self) {
        let now = Instant::now();
        self.last_bytes = Some(now);
        self.first_bytes.get_or_insert(now);
    }

    /// A token of the answer or its reasoning arrived.
    pub fn token(&mut self) {
        self.first_token.get_or_insert_with(Instant::now);
    }

    /// The time to first token: from sending the request to the first
    /// token of a stream (`streamed`), or to the first bytes of a whole
    /// body, which brings every token at once. `None` if it never came.
    pub fn first_token_after(&self, streamed: bool) -> Option<Duration> {
        let at = if streamed {
            self.first_token
        } else {
            self.first_bytes
        };
        at.map(|at| at.duration_since(self.sent))
    }

    /// Runs `future` until it ends or the next limit fires.
    pub async fn bound<T>(&self, future: impl Future<Output = T>) -> Result<T, Failure> {
        let (at, fired) = self.deadline();
        tokio::time::timeout_at(at, future)
            .await
            .map_err(|_| self.failure(fired))
    }

    pub fn failure(&self, fired: Fired) -> Failure {
        let l = self.limits;
        let message = match fired {
            Fired::FirstToken => format!(
                "no token within first_token_timeout = {} (providers.{})",
                show_duration(l.first_token),
                l.provider
            ),
            Fired::Idle => format!(
                "the response went silent for idle_timeout = {} (providers.{})",
                show_duration(l.idle),
                l.provider
            ),
            Fired::Request => format!(
                "the attempt did not finish within request_timeout = {} (providers.{})",
                show_duration(l.request),
                l.provider
            ),
        };
        Failure::new(FailureKind::Timeout, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            provider: "p".into(),
            connect: Duration::from_secs(1),
            first_token: Duration::from_secs(300),
            idle: Duration::from_secs(2),
            request: Duration::from_secs(600),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn keep_alives_keep_idle_away_but_not_first_token() {
        let limits = limits();
        let mut watch = Watch::start(&limits);
        assert_eq!(watch.deadline().1, Fired::FirstToken, "before the body");
        for _ in 0..200 {
            tokio::time::advance(Duration::from_secs(1)).await;
            watch.bytes();
            assert_eq!(watch.deadline().1, Fired::Idle);
        }
        tokio::time::advance(Duration::from_secs(101)).await;
        watch.bytes();
        assert_eq!(
            watch.deadline().1,
            Fired::FirstToken,
            "comments alone never start"
        );
        watch.token();
        assert_eq!(watch.deadline().1, Fired::Idle);
        assert_eq!(
            watch.first_token_after(true),
            Some(Duration::from_secs(301)),
            "the first token, not the first keep-alive"
        );
        assert_eq!(watch.first_token_after(false), Some(Duration::from_secs(1)));
        assert_eq!(
            watch.failure(Fired::FirstToken).message,
            "no token within first_token_timeout = 300s (providers.p)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_request_limit_bounds_everything() {
        let mut limits = limits();
        limits.request = Duration::from_secs(1);
        let watch = Watch::start(&limits);
        let result = watch.bound(std::future::pending::<()>()).await;
        assert_eq!(
            result.unwrap_err().message,
            "the attempt did not finish within request_timeout = 1s (providers.p)"
        );
    }
}
