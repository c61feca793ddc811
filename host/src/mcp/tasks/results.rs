//! Finished tasks' results, read back from the run store. A result can be
//! 4 MB of answer, sent twice; held by the task manager for `task_ttl`, a
//! few dozen finished tasks would hold hundreds of megabytes. So when the
//! store has kept the run, the manager holds a slim result (the record
//! without its answer and replies), and `tasks/get` rebuilds the whole one
//! from the store. A run the store could not keep keeps its whole result
//! in memory; a run the store no longer has gives the slim result, which
//! says so.

use std::sync::Mutex;

use indexmap::IndexMap;
use rmcp::model::{CallToolResult, DetailedTask, JsonObject, TaskPayload};

use crate::app::Chorus;
use crate::mcp::tools;
use crate::record::RunRecord;
use crate::store::Lookup;

/// The most finished tasks whose results are read back from the store;
/// past it, the oldest keep their slim result only.
const MOST: usize = 10_000;

#[derive(Default)]
pub struct Results {
    /// Task id → the id of the run whose record is its result.
    runs: Mutex<IndexMap<String, String>>,
}

impl Results {
    /// What the task manager holds as `task`'s result: the slim result when
    /// the store has kept the run, else the whole one.
    pub async fn hold(&self, chorus: &Chorus, task: &str, record: &RunRecord) -> CallToolResult {
        let kept = matches!(
            chorus.find_run(&record.run_id, false).await,
            Ok(Lookup::Found(run)) if run.run_id == record.run_id && run.kind.is_some()
        );
        if !kept {
            return tools::success(record);
        }
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if runs.len() >= MOST {
            runs.shift_remove_index(0);
        }
        runs.insert(task.to_owned(), record.run_id.clone());
        tools::success(&slim(record, &chorus.store.describe_for_clients()))
    }

    /// `task` with its whole result, when the manager holds a slim one and
    /// the store still has the run.
    pub async fn fill(&self, chorus: &Chorus, task: &mut DetailedTask) {
        if let Some(run_id) = self.run_of(&task.task.task_id) {
            self.fill_from(chorus, task, &run_id).await;
        }
    }

    /// The run whose record is `task`'s result, when its result is slim.
    pub fn run_of(&self, task: &str) -> Option<String> {
        let runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.get(task).cloned()
    }

    /// `task` (holding a slim result) with the whole result of run `run_id`.
    pub async fn fill_from(&self, chorus: &Chorus, task: &mut DetailedTask, run_id: &str) {
        let TaskPayload::Completed { result } = &mut task.payload else {
            return;
        };
        let record = match chorus.find_run(run_id, false).await {
            Ok(Lookup::Found(run)) if run.run_id == run_id => run.into_record(),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(task = %task.task.task_id, run = %run_id, "cannot read the task's run: {e}");
                None
            }
        };
        match record {
            Some(record) => *result = object(&tools::success(&record)),
            None => {
                let gone = format!(
                    "Run {run_id} is no longer in {} (pruned or expired), so this result is \
                     without its answer.",
                    chorus.store.describe_for_clients()
                );
                if let Some(serde_json::Value::Array(notes)) = result
                    .get_mut("structuredContent")
                    .and_then(|s| s.get_mut("notes"))
                {
                    notes.push(gone.clone().into());
                }
                if let Some(serde_json::Value::Array(content)) = result.get_mut("content") {
                    content.push(serde_json::json!({"type": "text", "text": gone}));
                }
            }
        }
    }

    /// Forgets a task that has ended without a run to read back.
    pub fn forget(&self, task: &str) {
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .shift_remove(task);
    }
}

/// The record without its answer and replies: what a finished task holds
/// in memory, and what `tasks/get` gives if the store no longer has the run.
fn slim(record: &RunRecord, store: &str) -> RunRecord {
    let run = &record.run_id;
    let mut slim = record.clone();
    slim.answer = format!(
        "[This task no longer holds the answer ({} bytes); it went to {store}: \
         chorus://runs/{run}/answer, or `chorus runs answer {run}`.]",
        record.answer.len()
    );
    for call in &mut slim.calls {
        call.reply = None;
    }
    slim
}

fn object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}
