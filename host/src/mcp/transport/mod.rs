//! The thin JSON-RPC layer between stdio and rmcp. It owns what rmcp's own
//! stdio transport leaves to chance:
//!
//! - framing: one message per line, each line bounded ([`MAX_LINE`]);
//! - malformed input: answered with JSON-RPC's codes and the request's id
//!   wherever it can be read ([`wire`]); invalid params are -32602;
//! - request ids: a request reusing the id of one in flight is refused, the
//!   first untouched; rmcp sees ids of ours, and every id of the client's
//!   goes back out as the client wrote it — in responses, in a
//!   subscription's `_meta`, in `notifications/cancelled` ([`ids`]);
//! - order: messages are written in the order rmcp hands them over, and a
//!   send completes once its bytes are written, so a notification awaited
//!   before a response is on the wire before it;
//! - the end: stdin closing, or the client closing our stdout (a failed
//!   write, or [`hangup`] noticing it idle), ends the [`Session`] at once —
//!   every run watches it — rather than after rmcp's drain;
//! - the streams: stdin and stdout through the reactor where they are pipes
//!   or sockets, not a blocking thread per message ([`stdio`]).

mod hangup;
mod ids;
pub mod stdio;
pub mod wire;

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorCode, GetMeta, JsonRpcMessage,
    RequestId, ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

pub use hangup::watch_stdout;
use ids::Ids;
use wire::Parsed;

/// Longest line accepted from the client.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// Messages queued for stdout at most; past it, reading stdin waits.
const OUTBOX: usize = 64;
/// How long closing waits for queued messages to be written.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// One client connection's life. Ends when the client goes away; every run
/// started in it stops then.
#[derive(Clone, Default)]
pub struct Session {
    ended: CancellationToken,
}

impl Session {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn end(&self, why: &str) {
        if !self.ended.is_cancelled() {
            tracing::info!("session over: {why}; stopping every run");
            self.ended.cancel();
        }
    }

    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    pub fn is_over(&self) -> bool {
        self.ended.is_cancelled()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("the client is gone: {0}")]
    Closed(String),
    #[error("cannot encode a message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Lines in, messages out, over any reader and writer (stdio in `serve`,
/// in-memory pipes in tests).
pub struct LineTransport<R> {
    lines: BufReader<R>,
    /// The line being read, and its size so far (past [`MAX_LINE`] the
    /// bytes are dropped, the size still counted).
    partial: Vec<u8>,
    partial_size: usize,
    ids: Arc<Mutex<Ids>>,
    /// Our id of an `initialize` not yet answered: nothing else is handed
    /// to rmcp until it is, so a client that pipelines its first requests
    /// gets the handshake's answer first.
    handshake: Arc<watch::Sender<Option<RequestId>>>,
    outbox: mpsc::Sender<Outgoing>,
    writer: Option<tokio::task::JoinHandle<()>>,
    session: Session,
}

struct Outgoing {
    bytes: Vec<u8>,
    written: Option<oneshot::Sender<Result<(), String>>>,
}

impl<R: AsyncRead + Unpin + Send + 'static> LineTransport<R> {
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(
        reader: R,
        writer: W,
        session: Session,
    ) -> Self {
        let (outbox, queue) = mpsc::channel(OUTBOX);
        let writer = tokio::spawn(write_all(writer, queue, session.clone()));
        Self {
            lines: BufReader::new(reader),
            partial: Vec::new(),
            partial_size: 0,
            ids: Arc::default(),
            handshake: Arc::new(watch::channel(None).0),
            outbox,
            writer: Some(writer),
            session,
        }
    }

    /// Queues `bytes` (one message) without waiting for the write; waits
    /// for room in the queue, so a client that sends faster than it reads
    /// its answers is read no faster than they are written.
    async fn queue(outbox: &mpsc::Sender<Outgoing>, mut bytes: Vec<u8>) {
        bytes.push(b'\n');
        let _ = outbox
            .send(Outgoing {
                bytes,
                written: None,
            })
            .await;
    }

    async fn refuse(outbox: &mpsc::Sender<Outgoing>, error: &Value) {
        if let Ok(bytes) = serde_json::to_vec(error) {
            Self::queue(outbox, bytes).await;
        }
    }

    /// Gives rmcp our id for a request, or the refusal to answer it with.
    fn route(&self, message: ClientJsonRpcMessage) -> Result<Option<ClientJsonRpcMessage>, Value> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        match message {
            JsonRpcMessage::Request(mut request) => match ids.admit(&request.id) {
                Some(ours) => {
                    if matches!(request.request, ClientRequest::InitializeRequest(_)) {
                        self.handshake.send_replace(Some(ours.clone()));
                    }
                    request.id = ours;
                    Ok(Some(JsonRpcMessage::Request(request)))
                }
                None => {
                    drop(ids);
                    tracing::info!(id = %request.id, "refused a request reusing the id of one in flight");
                    Err(wire::error(
                        Some(request.id.into_json_value()),
                        ErrorCode::INVALID_REQUEST,
                        "a request with this id is still in flight: use a new id for each request"
                            .into(),
                    ))
                }
            },
            JsonRpcMessage::Notification(mut notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &mut notification.notification
                {
                    let Some(theirs) = cancelled.params.request_id.as_ref() else {
                        return Ok(None);
                    };
                    match ids.cancel(theirs) {
                        Some(ours) => cancelled.params.request_id = Some(ours),
                        None => {
                            tracing::debug!(id = %theirs, "cancellation of a request not in flight");
                            return Ok(None);
                        }
                    }
                }
                Ok(Some(JsonRpcMessage::Notification(notification)))
            }
            other => Ok(Some(other)),
        }
    }

    /// The next line, or `None` at end of input; an over-long line is
    /// consumed whole and reported by its size. Cancel-safe (rmcp drops
    /// `receive` whenever something else is ready first): a line read in
    /// part stays in `self.partial` for the next call.
    async fn next_line(&mut self) -> std::io::Result<Option<Result<Vec<u8>, usize>>> {
        loop {
            let buffer = self.lines.fill_buf().await?;
            if buffer.is_empty() {
                if self.partial_size == 0 {
                    return Ok(None);
                }
                return Ok(Some(self.take_partial()));
            }
            let (chunk, complete) = match buffer.iter().position(|&b| b == b'\n') {
                Some(end) => (&buffer[..end], true),
                None => (buffer, false),
            };
            self.partial_size += chunk.len();
            if self.partial_size <= MAX_LINE {
                self.partial.extend_from_slice(chunk);
            } else {
                self.partial = Vec::new();
            }
            let consumed = chunk.len() + usize::from(complete);
            self.lines.consume(consumed);
            if complete {
                return Ok(Some(self.take_partial()));
            }
        }
    }

    fn take_partial(&mut self) -> Result<Vec<u8>, usize> {
        let size = std::mem::take(&mut self.partial_size);
        let line = std::mem::take(&mut self.partial);
        if size > MAX_LINE { Err(size) } else { Ok(line) }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = SendError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SendError>> + Send + 'static {
        let encoded = self.encode(item);
        let outbox = self.outbox.clone();
        async move {
            let stopped = || SendError::Closed("the writer has stopped".into());
            // None: nothing to write (see `encode`).
            let Some(bytes) = encoded? else {
                return Ok(());
            };
            let (written, done) = oneshot::channel();
            let queued = outbox
                .send(Outgoing {
                    bytes,
                    written: Some(written),
                })
                .await
                .is_ok();
            match queued {
                false => Err(stopped()),
                true => done
                    .await
                    .map_err(|_| stopped())?
                    .map_err(SendError::Closed),
            }
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        let mut handshake = self.handshake.subscribe();
        tokio::select! {
            biased;
            () = self.session.ended() => return None,
            _ = handshake.wait_for(Option::is_none) => {}
        }
        loop {
            let session = self.session.clone();
            let line = tokio::select! {
                biased;
                () = session.ended() => return None,
                line = self.next_line() => line,
            };
            let line = match line {
                Ok(Some(line)) => line,
                Ok(None) => {
                    self.session.end("the client closed stdin");
                    return None;
                }
                Err(e) => {
                    self.session.end(&format!("cannot read stdin: {e}"));
                    return None;
                }
            };
            let line =
                match line {
                    Ok(line) => line,
                    Err(size) => {
                        Self::refuse(
                        &self.outbox,
                        &wire::error(
                        None,
                        ErrorCode::INVALID_REQUEST,
                        format!("a message of {size} bytes is over the limit of {MAX_LINE} bytes"),
                    ),
                    )
                    .await;
                        continue;
                    }
                };
            match wire::parse(&line) {
                Parsed::Message(message) => match self.route(*message) {
                    Ok(Some(message)) => return Some(message),
                    Ok(None) => {}
                    Err(refusal) => Self::refuse(&self.outbox, &refusal).await,
                },
                Parsed::Refuse(error) => {
                    tracing::info!(
                        "answered a malformed message: {}",
                        error["error"]["message"].as_str().unwrap_or_default()
                    );
                    Self::refuse(&self.outbox, &error).await;
                }
                Parsed::Skip(why) => tracing::debug!("ignored {why}"),
            }
        }
    }

    async fn close(&mut self) -> Result<(), SendError> {
        // Closing the queue lets the writer finish what is queued and stop.
        let (closed, _) = mpsc::channel(1);
        self.outbox = closed;
        // A client that keeps stdout open but stops reading must not keep
        // the process alive: give the last writes a moment, no more.
        if let Some(writer) = self.writer.take() {
            let _ = tokio::time::timeout(CLOSE_GRACE, writer).await;
        }
        Ok(())
    }
}

impl<R> LineTransport<R> {
    /// The bytes to write for `item` with the client's ids restored; `None`
    /// for what must not be written: the response to a request the client
    /// cancelled, or a notification of a subscription no longer open.
    fn encode(&self, mut item: ServerJsonRpcMessage) -> Result<Option<Vec<u8>>, SendError> {
        match &mut item {
            JsonRpcMessage::Response(response) => {
                let Some(theirs) = self.answered(&response.id) else {
                    return Ok(None);
                };
                // A `subscriptions/listen`'s last word names the request
                // once more.
                if let ServerResult::SubscriptionsListenResult(result) = &mut response.result {
                    result.meta.set_subscription_id(theirs.clone());
                }
                response.id = theirs;
            }
            JsonRpcMessage::Error(error) => {
                if let Some(id) = error.id.as_mut() {
                    match self.answered(id) {
                        Some(theirs) => *id = theirs,
                        None => return Ok(None),
                    }
                }
            }
            JsonRpcMessage::Notification(notification) => {
                if !self.restore_ids(&mut notification.notification) {
                    return Ok(None);
                }
            }
            JsonRpcMessage::Request(_) => {}
        }
        let mut bytes = serde_json::to_vec(&item)?;
        bytes.push(b'\n');
        Ok(Some(bytes))
    }

    /// The client's id for the response to our request `ours`; `None` when
    /// it is not to be answered (the client cancelled it).
    fn answered(&self, ours: &RequestId) -> Option<RequestId> {
        self.handshake
            .send_if_modified(|pending| pending.take_if(|pending| pending == ours).is_some());
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .answer(ours)
    }

    /// Puts the client's ids where `notification` names a request of
    /// theirs by our id: a subscription's id in `_meta` (its
    /// acknowledgement and everything sent on it) and the `requestId` of a
    /// `notifications/cancelled`. `false` when that request is no longer in
    /// flight: the client may be using its id for another request already,
    /// so the notification is dropped.
    fn restore_ids(&self, notification: &mut ServerNotification) -> bool {
        let ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        // `false` for an id of ours no longer in flight; any other id (rmcp
        // numbers its own requests to the client) stays as it is.
        let restore = |id: &mut RequestId| {
            if !Ids::is_ours(id) {
                return true;
            }
            match ids.theirs(id) {
                Some(theirs) => {
                    *id = theirs;
                    true
                }
                None => {
                    tracing::debug!(%id, "dropped a notification naming a request no longer in flight");
                    false
                }
            }
        };
        if let ServerNotification::CancelledNotification(cancelled) = notification
            && let Some(id) = cancelled.params.request_id.as_mut()
            && !restore(id)
        {
            return false;
        }
        if let Some(mut id) = notification.get_meta().subscription_id() {
            if !restore(&mut id) {
                return false;
            }
            notification.get_meta_mut().set_subscription_id(id);
        }
        true
    }
}

/// Writes queued messages in order until the queue closes or a write fails
/// (the client is gone: the session ends).
async fn write_all<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut queue: mpsc::Receiver<Outgoing>,
    session: Session,
) {
    while let Some(message) = queue.recv().await {
        let written = async {
            writer.write_all(&message.bytes).await?;
            writer.flush().await
        }
        .await;
        match written {
            Ok(()) => {
                if let Some(done) = message.written {
                    let _ = done.send(Ok(()));
                }
            }
            Err(e) => {
                let why = format!("cannot write to stdout: {e}");
                session.end(&why);
                if let Some(done) = message.written {
                    let _ = done.send(Err(why.clone()));
                }
                queue.close();
                while let Some(message) = queue.recv().await {
                    if let Some(done) = message.written {
                        let _ = done.send(Err(why.clone()));
                    }
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
