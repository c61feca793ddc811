//! The run's attachments on its requests: the policy held at planning,
//! each request given what its model can take (see
//! `pipeline::attachments`), the PDFs' text extracted once and the
//! descriptions written once, by the first batch that needs them — the
//! descriptions through the run's own fan-out (stage `describe`), so they
//! are budgeted and recorded like any call.

use std::sync::Arc;

use super::RunContext;
use crate::attach::pdf;
use crate::llm::{ChatRequest, Failure};
use crate::pipeline::FAN_OUT;
use crate::pipeline::attachments::RunAttachments;
use crate::pipeline::describe::{DESCRIBE, Descriptions, Extracted, descriptions};
use crate::plugins::Request;

impl RunContext {
    /// Every request of the run will carry `attachments` (see
    /// `pipeline::attachments`).
    pub fn with_attachments(mut self, attachments: Option<Arc<RunAttachments>>) -> Self {
        self.attachments = attachments;
        self
    }

    /// Holds the fan-out's models to the pipeline's policy for attachments,
    /// before anything is spent; what it decided goes in the notes.
    pub async fn plan_attachments(&self, requests: &[ChatRequest]) -> Result<(), String> {
        let Some(attachments) = &self.attachments else {
            return Ok(());
        };
        let extracted = self.extracted(attachments, requests).await;
        let panel: Vec<&str> = requests.iter().map(|r| r.model.as_str()).collect();
        for note in attachments.plan(&self.llm, &panel, extracted.as_deref())? {
            self.note(note);
        }
        Ok(())
    }

    /// `request` with the descriptions the run has made so far (contract
    /// 0.4's `attachment-info.description`): what its synthesizer is given.
    pub fn described(&self, request: &Request) -> Request {
        let mut request = request.clone();
        if let Some(made) = self.descriptions.get() {
            for attachment in &mut request.attachments {
                attachment.description = made
                    .by_id
                    .iter()
                    .find(|(id, _)| *id == attachment.info.id)
                    .and_then(|(_, got)| got.as_ref().ok().cloned());
            }
        }
        request
    }

    /// The attachments placed on each request; `Some(failure)` for those
    /// left out. Descriptions are written first where a model needs them.
    pub(super) async fn place_attachments(
        &self,
        stage: &str,
        requests: &mut [ChatRequest],
    ) -> Vec<Option<Failure>> {
        let Some(attachments) = self.attachments.as_ref().filter(|_| stage != DESCRIBE) else {
            return requests.iter().map(RunAttachments::none_placed).collect();
        };
        let extracted = self.extracted(attachments, requests).await;
        let descriptions =
            if attachments.needs_descriptions(&self.llm, requests, extracted.as_deref()) {
                Some(self.describe(attachments, extracted.as_deref()).await)
            } else {
                None
            };
        requests
            .iter_mut()
            .map(|request| {
                attachments
                    .place(
                        request,
                        stage == FAN_OUT,
                        &self.llm,
                        descriptions.as_deref(),
                        extracted.as_deref(),
                    )
                    .err()
            })
            .collect()
    }

    /// The PDFs' text, extracted once per run by the first batch with a
    /// model that needs it (and what came of it said in the notes); `None`
    /// while no model of the run has needed it.
    async fn extracted(
        &self,
        attachments: &RunAttachments,
        requests: &[ChatRequest],
    ) -> Option<Arc<Extracted>> {
        let needed = requests
            .iter()
            .any(|r| attachments.needs_text(self.llm.model(&r.model).as_deref()));
        if !needed {
            return self.extracted.get().cloned();
        }
        let made = self.extracted.get_or_init(|| async {
            let mut by_id = Vec::new();
            for a in attachments.pdfs() {
                if let crate::attach::Body::Base64(data) = &a.body {
                    by_id.push((a.id, pdf::extract(data.clone(), pdf::Bounds::DEFAULT).await));
                }
            }
            let extracted = Extracted { by_id };
            for note in extracted.notes(&attachments.all) {
                self.note(note);
            }
            Arc::new(extracted)
        });
        Some(made.await.clone())
    }

    /// The attachments without extracted text described, once per run, by
    /// its describer.
    async fn describe(
        &self,
        attachments: &RunAttachments,
        extracted: Option<&Extracted>,
    ) -> Arc<Descriptions> {
        let made = self.descriptions.get_or_init(|| async {
            let these = attachments.to_describe(extracted);
            match attachments.describer(&self.llm, &these) {
                Ok(describer) => {
                    let requests = attachments.describe_requests(&describer, &these);
                    let completions = Box::pin(self.fan_out(DESCRIBE, requests)).await;
                    descriptions(describer, &these, completions)
                }
                Err(why) => Arc::new(Descriptions {
                    model: String::new(),
                    by_id: these.iter().map(|a| (a.id, Err(why.clone()))).collect(),
                }),
            }
        });
        made.await.clone()
    }
}
