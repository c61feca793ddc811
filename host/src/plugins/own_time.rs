//! A plugin call's own time: wall-clock time outside `host.complete`. The
//! CPU budget (fuel) does not see a guest that sleeps or waits on a pollable,
//! so this bounds the rest: a call may spend at most its `wall_time` of its
//! own, however long the model calls it makes take.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// How often a paused watch (a call waiting on `host.complete`) looks again.
const PAUSED_RECHECK: Duration = Duration::from_millis(250);

/// The stopwatch of one call; clones share it.
#[derive(Clone)]
pub struct OwnTime(Arc<Mutex<Watch>>);

struct Watch {
    limit: Duration,
    used: Duration,
    /// When the current stretch of own time began; `None` while the call
    /// waits on the host.
    since: Option<Instant>,
}

/// The call ran past its own time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded;

impl OwnTime {
    pub fn start(limit: Duration) -> Self {
        Self(Arc::new(Mutex::new(Watch {
            limit,
            used: Duration::ZERO,
            since: Some(Instant::now()),
        })))
    }

    fn watch(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The call starts waiting on the host.
    pub fn pause(&self) {
        let mut watch = self.watch();
        if let Some(since) = watch.since.take() {
            watch.used += since.elapsed();
        }
    }

    /// The host returned to the call.
    pub fn resume(&self) {
        let mut watch = self.watch();
        if watch.since.is_none() {
            watch.since = Some(Instant::now());
        }
    }

    /// Own time left, or `None` while paused.
    fn left(&self) -> Option<Duration> {
        let watch = self.watch();
        let since = watch.since?;
        Some(watch.limit.saturating_sub(watch.used + since.elapsed()))
    }

    /// Runs `call`, stopping it (by dropping it) once its own time is spent.
    pub async fn bound<F: Future>(&self, call: F) -> Result<F::Output, Exceeded> {
        tokio::pin!(call);
        loop {
            let wait = match self.left() {
                Some(left) if left.is_zero() => return Err(Exceeded),
                Some(left) => left,
                None => PAUSED_RECHECK,
            };
            tokio::select! {
                output = &mut call => return Ok(output),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn own_time_runs_out_but_not_while_waiting_on_the_host() {
        let own = OwnTime::start(Duration::from_secs(1));
        let waiting = own.clone();
        let call = async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            waiting.pause();
            tokio::time::sleep(Duration::from_secs(30)).await;
            waiting.resume();
            tokio::time::sleep(Duration::from_millis(300)).await;
            "done"
        };
        assert_eq!(own.bound(call).await, Ok("done"), "0.9 s of own time");

        let own = OwnTime::start(Duration::from_secs(1));
        let sleeper = tokio::time::sleep(Duration::from_secs(3600));
        let started = Instant::now();
        assert_eq!(own.bound(sleeper).await, Err(Exceeded));
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }
}
