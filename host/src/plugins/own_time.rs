//! A plugin call's two clocks and their budgets:
//!
//! - its **CPU time** (`cpu_time`): what the threads that ran it spent,
//!   read from each thread's own CPU clock around every poll of the call
//!   (`thread_cpu`). The guest yields to the runtime every few
//!   milliseconds of work (fuel only gets control back), so a loop is
//!   looked at that often, and stopped within one such stretch of its
//!   budget — on a fast machine or a slow one, busy or idle;
//! - its **own time** (`wall_time`): wall-clock time outside
//!   `host.complete`, which bounds what the CPU clock does not see (a
//!   guest that sleeps or waits on a pollable), however long the model
//!   calls it makes take.
//!
//! Either one spent stops the call, and says how much of both it used.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use super::thread_cpu;

/// How often a paused watch (a call waiting on `host.complete`) looks again.
const PAUSED_RECHECK: Duration = Duration::from_millis(250);

/// The clocks of one call; clones share them.
#[derive(Clone)]
pub struct OwnTime(Arc<Clocks>);

struct Clocks {
    wall: Mutex<Watch>,
    cpu_limit: Duration,
    /// Nanoseconds of CPU spent so far.
    cpu_used: AtomicU64,
}

struct Watch {
    limit: Duration,
    used: Duration,
    /// When the current stretch of own time began; `None` while the call
    /// waits on the host.
    since: Option<Instant>,
}

/// Which budget a call ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Cpu,
    Wall,
}

/// The call ran out of a budget, having used `cpu` and `wall` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded {
    pub spent: Spent,
    pub cpu: Duration,
    pub wall: Duration,
}

impl OwnTime {
    /// A call's clocks, started: at most `wall` of own time and `cpu` of CPU.
    pub fn start(wall: Duration, cpu: Duration) -> Self {
        Self(Arc::new(Clocks {
            wall: Mutex::new(Watch {
                limit: wall,
                used: Duration::ZERO,
                since: Some(Instant::now()),
            }),
            cpu_limit: cpu,
            cpu_used: AtomicU64::new(0),
        }))
    }

    fn watch(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.0.wall.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Own time used so far.
    fn wall_used(&self) -> Duration {
        let watch = self.watch();
        watch.used + watch.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// CPU used so far.
    pub fn cpu_used(&self) -> Duration {
        Duration::from_nanos(self.0.cpu_used.load(Ordering::Relaxed))
    }

    /// Counts `cpu` more; the total.
    fn spend(&self, cpu: Duration) -> Duration {
        let nanos = u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX);
        let total = self.0.cpu_used.fetch_add(nanos, Ordering::Relaxed);
        Duration::from_nanos(total.saturating_add(nanos))
    }

    fn exceeded(&self, spent: Spent) -> Exceeded {
        Exceeded {
            spent,
            cpu: self.cpu_used(),
            wall: self.wall_used(),
        }
    }

    /// Runs `call`, stopping it (by dropping it) once its CPU or its own
    /// time is spent.
    pub async fn bound<F: Future>(&self, call: F) -> Result<F::Output, Exceeded> {
        let mut call = pin!(call);
        // Each poll runs on one thread, start to end: its CPU clock's move
        // over the poll is what the call spent.
        let mut metered = pin!(std::future::poll_fn(|cx| {
            let before = thread_cpu::now();
            let polled = call.as_mut().poll(cx);
            let used = self.spend(thread_cpu::now().saturating_sub(before));
            match polled {
                Poll::Ready(output) => Poll::Ready(Ok(output)),
                Poll::Pending if used >= self.0.cpu_limit => {
                    Poll::Ready(Err(self.exceeded(Spent::Cpu)))
                }
                Poll::Pending => Poll::Pending,
            }
        }));
        loop {
            let wait = match self.left() {
                Some(left) if left.is_zero() => return Err(self.exceeded(Spent::Wall)),
                Some(left) => left,
                None => PAUSED_RECHECK,
            };
            tokio::select! {
                output = &mut metered => return output,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOTS: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn own_time_runs_out_but_not_while_waiting_on_the_host() {
        let own = OwnTime::start(Duration::from_secs(1), LOTS);
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

        let own = OwnTime::start(Duration::from_secs(1), LOTS);
        let sleeper = tokio::time::sleep(Duration::from_secs(3600));
        let started = Instant::now();
        let stopped = own.bound(sleeper).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        assert_eq!(stopped.spent, Spent::Wall);
        assert_eq!(stopped.wall, Duration::from_secs(1));
        assert!(stopped.cpu < Duration::from_millis(100), "{stopped:?}");
    }

    /// A call that works a few milliseconds of CPU, then yields, forever:
    /// a guest's loop as the fuel yields cut it.
    async fn spin() {
        loop {
            let start = thread_cpu::now();
            let mut x: u64 = 1;
            while thread_cpu::now() - start < Duration::from_millis(2) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_loop_is_stopped_by_the_cpu_it_spent_however_long_that_takes() {
        let own = OwnTime::start(LOTS, Duration::from_millis(200));
        let stopped = own.bound(spin()).await.unwrap_err();
        assert_eq!(stopped.spent, Spent::Cpu);
        // Stopped at the first yield past the budget: within one stretch.
        assert!(
            stopped.cpu >= Duration::from_millis(200) && stopped.cpu < Duration::from_millis(250),
            "{stopped:?}"
        );
        assert!(stopped.wall >= stopped.cpu.mul_f64(0.9), "{stopped:?}");
    }
}
