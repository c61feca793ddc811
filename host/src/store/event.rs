//! What a run's recorder hands the store's writer: the run's start, plan,
//! calls and end, a flush, a shutdown. Both backends' writers take these,
//! batched, off the run's hot path.
//!
//! One policy for a batch that fails, in both writers:
//! - a message the database refuses (a constraint, a value it cannot take)
//!   is skipped, logged, and its waiting `End`/`Flush` told why; the rest
//!   of the batch is written. SQLite does this inside the batch's one
//!   transaction (a failed statement undoes only itself there);
//!   PostgreSQL, whose transaction an error aborts, writes that batch
//!   again one message at a time.
//! - a failure of the database itself is retried, as far as the backend
//!   can keep what waits: SQLite (a local file: busy, or the disk full)
//!   tries the batch once more after 100 ms, then drops it, logged;
//!   PostgreSQL (a server that may be away for a while) keeps the batch
//!   in memory, bounded (`backlog.rs`), and writes it when the database is
//!   back.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::llm::ChatRequest;
use crate::plugins::{Plan, Request};
use crate::record::{CallRecord, RunRecord};

/// Messages waiting for the writer; past this, events are dropped (and
/// counted) rather than slowing the run.
pub const CAPACITY: usize = 4096;
/// The start of a run, as the store keeps it.
#[derive(Clone)]
pub struct Begin {
    pub request: Arc<Request>,
    pub follow_up_of: Option<String>,
    pub resynthesis_of: Option<String>,
    pub client: Option<String>,
    /// The experiment the run serves, written with its first row.
    pub experiment: Option<crate::record::Assignment>,
    /// The run's attachments as JSON (names, types, sizes, hashes), when
    /// it has any.
    pub attachments: Option<String>,
    /// The attachments themselves, whose bytes the writer keeps (shared
    /// with the run, never copied).
    pub files: crate::attach::Attachments,
    /// Why the bytes of `files` were let go before they were written (a
    /// writer's backlog over its bound): the run records them as not kept.
    pub bytes_let_go: Option<String>,
    pub started_at: i64,
    pub deadline_at: i64,
}

#[derive(Clone)]
pub enum End {
    Done(Arc<RunRecord>),
    Failed(String),
    Cancelled,
}

pub enum Msg {
    Begin(Begin),
    Plan {
        run_id: String,
        plan: Arc<Plan>,
    },
    CallStarted {
        run_id: String,
        id: u32,
        stage: Arc<str>,
        request: Arc<ChatRequest>,
        at: i64,
    },
    CallFinished {
        run_id: String,
        call: Arc<CallRecord>,
    },
    /// Everything the run's end needs, even if every event before it was
    /// dropped: the row is created if missing, and the calls filled in.
    End {
        begin: Begin,
        plan: Option<Arc<Plan>>,
        end: End,
        lost_events: u32,
        at: i64,
        ack: Option<oneshot::Sender<Result<(), String>>>,
    },
    /// Acknowledged once everything sent before it is written.
    Flush(oneshot::Sender<Result<(), String>>),
    /// Write what came before, then stop (even if some sender lingers).
    Shutdown,
}

impl Msg {
    /// When the event happened in its run (Unix ms), for the events that
    /// say: a run's start, a call sent, a run's end.
    pub fn happened_at(&self) -> Option<i64> {
        match self {
            Self::Begin(begin) => Some(begin.started_at),
            Self::CallStarted { at, .. } | Self::End { at, .. } => Some(*at),
            _ => None,
        }
    }
}

/// How an event of a batch is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Part {
    Alone,
    /// Together with this later event of the same row.
    With(usize),
    /// Already, with an earlier event.
    Written,
}

/// Pairs the events of one row in a batch — a run's start with its plan,
/// a call's start with its end — so a writer can write each such row once
/// (the batch commits whole, so no reader could have seen the first alone).
pub fn pair(batch: &[Msg]) -> Vec<Part> {
    let mut parts = vec![Part::Alone; batch.len()];
    if batch.len() < 2 {
        return parts;
    }
    // A run by its id; a call by its run's id and its number.
    let mut open: HashMap<(&str, Option<u32>), usize> = HashMap::new();
    for (i, msg) in batch.iter().enumerate() {
        let (row, starts) = match msg {
            Msg::Begin(begin) => ((begin.request.run_id.as_str(), None), true),
            Msg::CallStarted { run_id, id, .. } => ((run_id.as_str(), Some(*id)), true),
            Msg::Plan { run_id, .. } => ((run_id.as_str(), None), false),
            Msg::CallFinished { run_id, call } => ((run_id.as_str(), Some(call.id)), false),
            _ => continue,
        };
        if starts {
            open.insert(row, i);
        } else if let Some(first) = open.remove(&row) {
            parts[first] = Part::With(i);
            parts[i] = Part::Written;
        }
    }
    parts
}

/// Waits until the writer behind `sender` has written everything sent
/// before (both backends' writers answer `Flush` once they have).
pub async fn flush(queue: Option<&super::queue::Queue>) -> Result<(), String> {
    let (ack, written) = oneshot::channel();
    let queue = queue.ok_or("the store is closed")?;
    queue
        .deliver(Msg::Flush(ack))
        .await
        .map_err(|_| "the run store's writer has stopped".to_owned())?;
    written
        .await
        .map_err(|_| "the run store's writer has stopped".to_owned())?
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A chat request as kept: what was sent to the model, and nothing of how
/// (no headers, no key: those never reach a `ChatRequest`). Written
/// straight to text, with no `Value` tree between: a request can carry
/// megabytes of answers on to a synthesizer.
pub fn request_json(request: &ChatRequest) -> String {
    #[derive(serde::Serialize)]
    struct Kept<'a> {
        label: &'a str,
        model: &'a str,
        messages: &'a [crate::llm::Message],
        sampling: &'a crate::llm::Sampling,
        #[serde(skip_serializing_if = "Option::is_none")]
        response_format: Option<&'a crate::llm::ResponseFormat>,
        /// What the model was sent as it is: names, types, sizes and
        /// hashes, never the bytes.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<crate::attach::Info>,
    }
    serde_json::to_string(&Kept {
        label: &request.label,
        model: &request.model,
        messages: &request.messages,
        sampling: &request.sampling,
        response_format: request.response_format.as_ref(),
        attachments: request.attachments.infos(),
    })
    .expect("a chat request serializes")
}
