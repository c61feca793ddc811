//! The per-call sandbox: a fresh store for every plugin call, with WASI that
//! grants nothing (no files, network, env or args), guest stdout/stderr
//! captured into tracing (bounded), a memory cap, and a CPU-time budget
//! counted in epoch ticks while the guest runs.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use crate::llm::{ChatRequest, Completion, ModelInfo};

/// How often the engine's epoch advances: the granularity of CPU budgets.
pub const TICK: Duration = Duration::from_millis(10);

/// Guest output logged per call and stream; the rest is counted, not kept.
const OUTPUT_LIMIT: usize = 16 * 1024;
/// Lines of stderr kept for error messages.
const LAST_WORDS: usize = 3;

/// What a plugin may ask of the host, provided by the run that calls it.
pub trait HostServices: Send + Sync {
    /// Runs chat completions at once; outcomes in request order.
    fn complete(&self, plugin: &str, requests: Vec<ChatRequest>) -> BoxFuture<'_, Vec<Completion>>;
    /// Progress for the user.
    fn progress(&self, plugin: &str, message: String);
    /// The model catalog.
    fn models(&self) -> Vec<ModelInfo>;
}

/// Why the sandbox stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("used up its CPU time budget")]
pub struct CpuExhausted;

pub struct State {
    pub plugin: Arc<str>,
    pub host: Arc<dyn HostServices>,
    wasi: WasiCtx,
    table: ResourceTable,
    pub limiter: MemoryCap,
    ticks_left: u64,
    outputs: [GuestOutput; 2],
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl State {
    /// Logs what is left of the guest's output once the call is over.
    pub fn finish(&self) {
        for output in &self.outputs {
            output.finish();
        }
    }

    /// The guest's last lines on stderr (a panic message, usually).
    pub fn last_words(&self) -> Option<String> {
        let state = self.outputs[1]
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut lines: Vec<String> = state.last.iter().cloned().collect();
        if !state.line.is_empty() {
            lines.push(
                String::from_utf8_lossy(&state.line[..state.line.len().min(300)]).into_owned(),
            );
        }
        (!lines.is_empty()).then(|| lines.join(" / "))
    }
}

/// Builds the store for one call.
pub fn store(
    engine: &Engine,
    plugin: Arc<str>,
    host: Arc<dyn HostServices>,
    cpu_time: Duration,
    max_memory_bytes: usize,
) -> Store<State> {
    let outputs = [
        GuestOutput::new(plugin.clone(), "stdout"),
        GuestOutput::new(plugin.clone(), "stderr"),
    ];
    let mut wasi = WasiCtx::builder();
    wasi.stdout(outputs[0].clone()).stderr(outputs[1].clone());
    let ticks = (cpu_time.as_nanos() / TICK.as_nanos()).max(1) as u64;
    let state = State {
        plugin,
        host,
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limiter: MemoryCap {
            max_bytes: max_memory_bytes,
            denied: None,
        },
        ticks_left: ticks,
        outputs,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut cx| {
        // Called each time the guest runs past a tick. Time spent in host
        // calls (waiting for models) does not reach here but once.
        let state = cx.data_mut();
        state.ticks_left = state.ticks_left.saturating_sub(1);
        if state.ticks_left == 0 {
            return Err(wasmtime::Error::new(CpuExhausted));
        }
        // Yield so a busy guest never starves the runtime's other tasks.
        Ok(UpdateDeadline::Yield(1))
    });
    store
}

/// Caps each linear memory and remembers a denied growth, so the error can
/// say "memory cap" rather than the guest's own confused abort.
pub struct MemoryCap {
    max_bytes: usize,
    pub denied: Option<usize>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.denied = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
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

/// A guest's stdout or stderr: complete lines go to tracing at debug level,
/// tagged with the plugin; after `OUTPUT_LIMIT` bytes the rest is counted.
/// Writes always succeed, so a chatty guest is never trapped for it.
#[derive(Clone)]
struct GuestOutput {
    plugin: Arc<str>,
    stream: &'static str,
    inner: Arc<Mutex<OutputState>>,
}

#[derive(Default)]
struct OutputState {
    line: Vec<u8>,
    logged: usize,
    dropped: usize,
    /// The last few complete lines, for error messages (a panic's message
    /// is followed by a note, so one line is not enough).
    last: VecDeque<String>,
}

impl GuestOutput {
    fn new(plugin: Arc<str>, stream: &'static str) -> Self {
        Self {
            plugin,
            stream,
            inner: Arc::default(),
        }
    }

    fn accept(&self, mut bytes: &[u8]) {
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = OUTPUT_LIMIT.saturating_sub(state.logged + state.line.len());
        if bytes.len() > room {
            state.dropped += bytes.len() - room;
            bytes = &bytes[..room];
        }
        for &b in bytes {
            if b == b'\n' {
                let line = std::mem::take(&mut state.line);
                state.logged += line.len() + 1;
                self.emit(&line);
                if !line.iter().all(u8::is_ascii_whitespace) {
                    if state.last.len() == LAST_WORDS {
                        state.last.pop_front();
                    }
                    state.last.push_back(
                        String::from_utf8_lossy(&line[..line.len().min(300)]).into_owned(),
                    );
                }
            } else {
                state.line.push(b);
            }
        }
    }

    fn emit(&self, line: &[u8]) {
        tracing::debug!(plugin = %self.plugin, stream = self.stream, "{}", String::from_utf8_lossy(line));
    }

    fn finish(&self) {
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if !state.line.is_empty() {
            let line = std::mem::take(&mut state.line);
            self.emit(&line);
        }
        if state.dropped > 0 {
            tracing::warn!(
                plugin = %self.plugin,
                stream = self.stream,
                "the plugin wrote {} more bytes than the {OUTPUT_LIMIT} logged; they were dropped",
                state.dropped
            );
            state.dropped = 0;
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.accept(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.accept(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
