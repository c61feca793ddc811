//! Gives the memory a burst of runs freed back to the system once chorus
//! is idle. glibc's allocator keeps freed memory in its arenas: it trims
//! an arena only from the top, and only past a threshold that grows with
//! use, so a server that once ran many runs at a time would stay that
//! large, idle, for the rest of its life. Once the last run in flight has
//! ended and none has started for [`IDLE_FOR`], `malloc_trim` hands every
//! free page back. Other allocators (musl's, macOS's, Windows') return
//! memory on their own: there this does nothing.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;

/// How long no run must be in flight before the heap is trimmed.
pub const IDLE_FOR: Duration = Duration::from_secs(1);

/// Trims the heap whenever `metrics` says chorus went idle, for the life
/// of the process.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn start(metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        loop {
            metrics.went_idle().await;
            tokio::time::sleep(IDLE_FOR).await;
            if metrics.runs_in_flight() == 0 {
                // A walk over the arenas: milliseconds, off the workers.
                // SAFETY: malloc_trim only releases free memory; it is
                // safe to call from any thread at any time.
                let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
            }
        }
    });
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn start(_metrics: Arc<Metrics>) {}
