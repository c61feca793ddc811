//! The per-call sandbox: a fresh store for every plugin call, with WASI that
//! grants nothing (no files, network, env or args), fixed clocks, guest
//! stdout/stderr captured into tracing (bounded), one memory cap for all of
//! the plugin's memories and tables together, fuel that hands control back
//! every few milliseconds (the CPU budget itself is the threads' CPU
//! clocks: `own_time`), and the host imports' side of things: bounded
//! logs, progress and batches.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::{Engine, ResourceLimiter, Store};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, ResourceTable, WasiCtx, WasiCtxView, WasiView,
};

use super::output::GuestOutput;
use super::own_time::OwnTime;
use super::services::HostServices;
use crate::llm::{ChatRequest, Completion};

/// How much fuel a guest burns between yields to the async runtime: fuel
/// only gets control back, so a busy guest never starves the other tasks,
/// its CPU clock is looked at (`own_time`), and a call stopped at a budget
/// or a deadline stops within a few milliseconds (about 2.3 ms of a tight
/// loop on the machines chorus is built on; yielding much more often costs
/// the guest a third of its speed). The fuel itself is never the limit.
const YIELD_EVERY: u64 = 100_000_000;
/// Bytes a table element is counted as against the memory cap.
const TABLE_ELEMENT_BYTES: usize = 8;

/// `host.log` messages logged per call; more are counted, not logged.
pub const MAX_LOG_MESSAGES: u32 = 200;
/// `host.progress` messages passed on per call; more are counted, not sent.
pub const MAX_PROGRESS_MESSAGES: u32 = 100;
/// Bytes kept of one log message and of one progress message.
const MAX_LOG_BYTES: usize = 4096;
const MAX_PROGRESS_BYTES: usize = 500;

/// The wall clock plugins see: 2000-01-01T00:00:00Z, always.
pub const FIXED_WALL_CLOCK: Duration = Duration::from_secs(946_684_800);

/// What one call of a plugin may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallLimits {
    pub cpu_time: Duration,
    pub wall_time: Duration,
    pub max_memory_mib: u32,
    /// The largest `host.complete` batch (limits.max_calls_per_run).
    pub max_batch: u32,
}

/// Why the sandbox stopped a call, when it was the host that stopped it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    #[error(
        "it asked host.complete for {asked} chat completions in one batch; the most a run may make is {max} (limits.max_calls_per_run)"
    )]
    BatchTooLarge { asked: usize, max: u32 },
    #[error("its host.complete request {index} (\"{label}\") cannot be sent: {why}")]
    BadRequest {
        index: usize,
        label: String,
        why: String,
    },
}

pub struct State {
    pub plugin: Arc<str>,
    pub host: Arc<dyn HostServices>,
    wasi: WasiCtx,
    table: ResourceTable,
    pub limiter: MemoryCap,
    outputs: [GuestOutput; 2],
    own_time: OwnTime,
    max_batch: u32,
    logs: u32,
    progress: u32,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Builds the store for one call; `own_time` is the call's stopwatch.
pub fn store(
    engine: &Engine,
    plugin: Arc<str>,
    host: Arc<dyn HostServices>,
    limits: &CallLimits,
    own_time: OwnTime,
) -> wasmtime::Result<Store<State>> {
    let outputs = [
        GuestOutput::new(plugin.clone(), "stdout"),
        GuestOutput::new(plugin.clone(), "stderr"),
    ];
    let mut wasi = WasiCtx::builder();
    wasi.stdout(outputs[0].clone())
        .stderr(outputs[1].clone())
        .wall_clock(FixedWallClock)
        .monotonic_clock(VirtualMonotonicClock::default());
    let state = State {
        plugin,
        host,
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limiter: MemoryCap::new((limits.max_memory_mib as usize) << 20),
        outputs,
        own_time,
        max_batch: limits.max_batch,
        logs: 0,
        progress: 0,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    // As much as a store holds: `cpu_time` is decided by the CPU clock.
    store.set_fuel(u64::MAX)?;
    store.fuel_async_yield_interval(Some(YIELD_EVERY))?;
    Ok(store)
}

impl State {
    /// Logs what is left of the guest's output once the call is over, and
    /// what the bounds dropped.
    pub fn finish(&self) {
        for output in &self.outputs {
            output.finish();
        }
        let plugin = &*self.plugin;
        if self.logs > MAX_LOG_MESSAGES {
            tracing::warn!(
                plugin,
                "the plugin logged {} more messages than the {MAX_LOG_MESSAGES} a call may; they were dropped",
                self.logs - MAX_LOG_MESSAGES
            );
        }
        if self.progress > MAX_PROGRESS_MESSAGES {
            tracing::warn!(
                plugin,
                "the plugin sent {} more progress messages than the {MAX_PROGRESS_MESSAGES} a call may; they were dropped",
                self.progress - MAX_PROGRESS_MESSAGES
            );
        }
    }

    /// The guest's last lines on stderr (a panic message, usually).
    pub fn last_words(&self) -> Option<String> {
        self.outputs[1].last_words()
    }

    /// `host.log`, whatever the contract version.
    pub fn log(&mut self, level: tracing::Level, message: String) {
        self.logs = self.logs.saturating_add(1);
        if self.logs > MAX_LOG_MESSAGES {
            return;
        }
        let message = bounded(message, MAX_LOG_BYTES);
        let plugin = &*self.plugin;
        match level {
            tracing::Level::TRACE => tracing::trace!(plugin, "{message}"),
            tracing::Level::DEBUG => tracing::debug!(plugin, "{message}"),
            tracing::Level::INFO => tracing::info!(plugin, "{message}"),
            tracing::Level::WARN => tracing::warn!(plugin, "{message}"),
            tracing::Level::ERROR => tracing::error!(plugin, "{message}"),
        }
    }

    /// `host.progress`, whatever the contract version.
    pub fn progress(&mut self, message: String) {
        self.progress = self.progress.saturating_add(1);
        if self.progress > MAX_PROGRESS_MESSAGES {
            return;
        }
        self.host
            .progress(&self.plugin, bounded(message, MAX_PROGRESS_BYTES));
    }

    /// `host.complete`, whatever the contract version: the batch is bounded,
    /// and the time spent waiting is not the plugin's own.
    pub async fn complete(
        &mut self,
        requests: Vec<ChatRequest>,
    ) -> wasmtime::Result<Vec<Completion>> {
        if requests.len() > self.max_batch as usize {
            return Err(wasmtime::Error::new(Stopped::BatchTooLarge {
                asked: requests.len(),
                max: self.max_batch,
            }));
        }
        self.own_time.pause();
        let completions = self.host.complete(&self.plugin, requests).await;
        self.own_time.resume();
        Ok(completions)
    }

    /// `host.complete-answer` (contract 0.5): one call whose reply is the
    /// run's answer, streamed where the run is.
    pub async fn complete_answer(&mut self, request: ChatRequest) -> Completion {
        self.own_time.pause();
        let completion = self.host.complete_answer(&self.plugin, request).await;
        self.own_time.resume();
        completion
    }
}

/// Caps the plugin's memories and tables together, and remembers a denied
/// growth, so the error can say "memory cap" rather than the guest's own
/// confused abort.
pub struct MemoryCap {
    max_bytes: usize,
    used: usize,
    pub denied: Option<usize>,
}

impl MemoryCap {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            used: 0,
            denied: None,
        }
    }

    fn grow(&mut self, by: usize) -> bool {
        let total = self.used.saturating_add(by);
        if total > self.max_bytes {
            self.denied = Some(total);
            return false;
        }
        self.used = total;
        true
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(desired.saturating_sub(current)))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(
            desired
                .saturating_sub(current)
                .saturating_mul(TABLE_ELEMENT_BYTES),
        ))
    }

    fn instances(&self) -> usize {
        64
    }
    fn tables(&self) -> usize {
        64
    }
    fn memories(&self) -> usize {
        16
    }
}

/// The wall clock plugins see: a fixed instant, so a plugin cannot tell
/// when it runs (and its output does not depend on it).
struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        FIXED_WALL_CLOCK
    }
}

/// The monotonic clock plugins see: it starts at zero and each reading
/// advances it by one microsecond — monotonic, deterministic, and not the
/// host's, so it cannot be used to time the host.
#[derive(Default)]
struct VirtualMonotonicClock {
    now: AtomicU64,
}

impl HostMonotonicClock for VirtualMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        self.now.fetch_add(1_000, Ordering::Relaxed) + 1_000
    }
}

pub fn bounded(mut text: String, max: usize) -> String {
    if text.len() > max {
        text.truncate(crate::text::cut_at_char_boundary(&text, max).len());
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_at_a_char_boundary() {
        assert_eq!(bounded("héllo".into(), 2), "h…");
        assert_eq!(bounded("short".into(), 10), "short");
    }

    #[test]
    fn the_memory_cap_counts_every_memory_and_table_together() {
        let mut cap = MemoryCap::new(10 << 20);
        assert!(cap.memory_growing(0, 6 << 20, None).unwrap());
        assert!(
            !cap.memory_growing(0, 6 << 20, None).unwrap(),
            "a second memory counts against the same cap"
        );
        assert_eq!(cap.denied, Some(12 << 20));
        assert!(cap.memory_growing(0, 3 << 20, None).unwrap());
        assert!(
            !cap.table_growing(0, (2 << 20) / TABLE_ELEMENT_BYTES, None)
                .unwrap(),
            "tables count too"
        );
        assert!(cap.memory_growing(6 << 20, 7 << 20, None).unwrap());
    }

    #[test]
    fn the_clocks_are_not_the_hosts() {
        assert_eq!(FixedWallClock.now(), FIXED_WALL_CLOCK);
        let clock = VirtualMonotonicClock::default();
        let (a, b) = (clock.now(), clock.now());
        assert_eq!((a, b), (1_000, 2_000));
    }
}
