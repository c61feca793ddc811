//! Attachments carried over from a kept run, read back from the store so
//! the caller need not send them again: a follow-up's models see the
//! attachments of the run it follows up (then any it brings of its own),
//! and a re-synthesis's synthesizer those of the run it merges again. The
//! run is one the caller may see (found through `visible`), so bytes are
//! reached only through runs their caller may read.
//!
//! When bytes are no longer kept (retention, or too large to keep), the
//! run says so in its notes and goes on without them — unless a follow-up's
//! pipeline says `attachments_for_text_models = "fail"`: a pipeline that
//! will not let a model answer without seeing the attachments fails the
//! follow-up too, before anything is spent.

use crate::attach::{Attachment, Attachments};
use crate::config::ForTextModels;
use crate::pipeline::{Question, RunError};
use crate::record::StoredRun;
use crate::store::attachments::Stored;
use crate::text::show_bytes;

use super::Chorus;

/// A kept run's attachments, as a new run sends them.
pub(super) struct Carried {
    pub attachments: Vec<Attachment>,
    /// Those whose bytes are gone, each as `#1 x.png (…): why`.
    pub missing: Vec<String>,
}

impl Chorus {
    /// `run`'s attachments with their bytes from the store.
    pub(super) async fn carried(&self, run: &StoredRun) -> Carried {
        if run.attachments.is_empty() {
            return Carried {
                attachments: Vec::new(),
                missing: Vec::new(),
            };
        }
        let source = run.clone();
        let read = self
            .store
            .off_runtime(move |store| store.attachments(&source, true))
            .await;
        let stored: Vec<Stored> = match read {
            Ok(stored) => stored,
            Err(e) => return all_missing(run, &e.to_string()),
        };
        let mut carried = Carried {
            attachments: Vec::new(),
            missing: Vec::new(),
        };
        for s in &stored {
            match s.attachment() {
                Some(attachment) => carried.attachments.push(attachment),
                None => carried
                    .missing
                    .push(format!("{}: {}", label(s), s.held.describe())),
            }
        }
        carried
    }

    /// `question`, a follow-up of `earlier` for `pipeline`, with
    /// `earlier`'s attachments ahead of its own and notes saying what was
    /// carried over or could not be.
    pub(super) async fn carry_over(
        &self,
        earlier: &StoredRun,
        mut question: Question,
        pipeline: &str,
    ) -> Result<Question, RunError> {
        if earlier.attachments.is_empty() {
            return Ok(question);
        }
        let carried = self.carried(earlier).await;
        let runner = self.runner();
        let config = &runner.loaded.config;
        let policy = config
            .pipelines
            .get(pipeline)
            .map(|p| p.attachments_for_text_models)
            .unwrap_or_default();
        if !carried.missing.is_empty() && policy == ForTextModels::Fail {
            return Err(RunError::Attachments(format!(
                "the attachments of run {} are no longer all kept ({}), and pipelines.{pipeline}.attachments_for_text_models = \"fail\": send them again with the follow-up, or set it to \"describe\" or \"skip\" to go on without them",
                earlier.run_id,
                carried.missing.join("; ")
            )));
        }
        if !carried.missing.is_empty() {
            question.notes.push(format!(
                "The models did not see these attachments of run {}, whose bytes are gone: {}. Send them again with a follow-up to show them.",
                earlier.run_id,
                carried.missing.join("; ")
            ));
        }
        let limits = &config.limits;
        let own: Vec<Attachment> = question.attachments.iter().cloned().collect();
        let mut count = own.len();
        let mut total: usize = own.iter().map(|a| a.bytes).sum();
        let mut list = Vec::new();
        let mut left_out = Vec::new();
        for a in carried.attachments {
            if count < limits.max_attachments
                && total.saturating_add(a.bytes) <= limits.max_attachments_bytes
            {
                count += 1;
                total += a.bytes;
                list.push(a);
            } else {
                left_out.push(a.label());
            }
        }
        if !list.is_empty() {
            let labels: Vec<String> = list.iter().map(Attachment::label).collect();
            question.notes.push(format!(
                "Carried over from run {}: {}.",
                earlier.run_id,
                labels.join(", ")
            ));
        }
        if !left_out.is_empty() {
            question.notes.push(format!(
                "Not carried over from run {}, to stay within limits.max_attachments ({}) and limits.max_attachments_bytes ({}) with this run's own: {}.",
                earlier.run_id,
                limits.max_attachments,
                show_bytes(limits.max_attachments_bytes as u64),
                left_out.join(", ")
            ));
        }
        list.extend(own);
        for (i, a) in list.iter_mut().enumerate() {
            a.id = u32::try_from(i + 1).unwrap_or(u32::MAX);
        }
        question.attachments = Attachments::new(list);
        Ok(question)
    }
}

fn label(s: &Stored) -> String {
    format!(
        "#{} {} ({}, {})",
        s.info.id,
        s.info.name,
        s.info.mime,
        show_bytes(s.info.bytes as u64)
    )
}

fn all_missing(run: &StoredRun, why: &str) -> Carried {
    Carried {
        attachments: Vec::new(),
        missing: run
            .attachments
            .iter()
            .map(|info| {
                format!(
                    "#{} {}: the run store could not be read ({why})",
                    info.id, info.name
                )
            })
            .collect(),
    }
}
