//! A guest's stdout and stderr: captured line by line into tracing (on
//! stderr, never stdout, which belongs to MCP), bounded per call, with the
//! last lines kept for error messages.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Guest output logged per call and stream; the rest is counted, not kept.
pub const OUTPUT_LIMIT: usize = 16 * 1024;
/// Lines of stderr kept for error messages.
const LAST_WORDS: usize = 3;

/// A guest's stdout or stderr: complete lines go to tracing at debug level,
/// tagged with the plugin; after `OUTPUT_LIMIT` bytes the rest is counted.
/// Writes always succeed, so a chatty guest is never trapped for it.
#[derive(Clone)]
pub struct GuestOutput {
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
    pub fn new(plugin: Arc<str>, stream: &'static str) -> Self {
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

    /// The last lines written (a panic message, usually), if any.
    pub fn last_words(&self) -> Option<String> {
        let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut lines: Vec<String> = state.last.iter().cloned().collect();
        if !state.line.is_empty() {
            lines.push(
                String::from_utf8_lossy(&state.line[..state.line.len().min(300)]).into_owned(),
            );
        }
        (!lines.is_empty()).then(|| lines.join(" / "))
    }

    /// Logs what is left once the call is over, and what was dropped.
    pub fn finish(&self) {
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
