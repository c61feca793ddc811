//! What a model that cannot take an attachment reads in its place, under
//! `attachments_for_text_models = "describe"`: a PDF's text layer,
//! extracted by chorus (`attach::pdf`) — faithful and free — marked as
//! extracted text; else a description/transcription written first by a
//! model that can see it (the pipeline's `describer`, or the cheapest of
//! [models] that takes every kind), marked as a description. This module
//! owns choosing the describer, its requests, reading its completions and
//! the text that stands in; `pipeline::attachments` decides who needs it.

use std::sync::Arc;

use super::attachments::RunAttachments;
use crate::attach::{Attachment, Attachments, Body, Kind, pdf};
use crate::config::ForTextModels;
use crate::llm::{ChatRequest, Llm, Message, ModelInfo, Role, Sampling};

/// The stage (and label) of the describer's calls.
pub const DESCRIBE: &str = "describe";

/// The most a description may run to, in tokens: bounds its worst case.
const DESCRIPTION_TOKENS: u32 = 2048;

/// A description of each binary attachment (by id), or why there is none.
#[derive(Debug, Default)]
pub struct Descriptions {
    pub model: String,
    pub by_id: Vec<(u32, Result<String, String>)>,
}

/// The text layer of each PDF sent as bytes (by id), or why there is none.
#[derive(Debug, Default)]
pub struct Extracted {
    pub by_id: Vec<(u32, Result<pdf::Text, String>)>,
}

impl Extracted {
    /// The text of attachment `id`, when it has one.
    fn text(&self, id: u32) -> Option<&pdf::Text> {
        self.by_id
            .iter()
            .find(|(at, _)| *at == id)
            .and_then(|(_, got)| got.as_ref().ok())
    }

    /// For the result's notes: what each PDF's text came to.
    pub fn notes(&self, all: &Attachments) -> Vec<String> {
        let label = |id: u32| {
            all.iter()
                .find(|a| a.id == id)
                .map_or_else(|| format!("#{id}"), Attachment::label)
        };
        self.by_id
            .iter()
            .map(|(id, got)| match got {
                Ok(text) => format!(
                    "Attachment {}: its text layer was extracted ({}); models that cannot take files read that in its place, marked as extracted text.",
                    label(*id),
                    text.summary()
                ),
                Err(why) => format!(
                    "Attachment {}: no text extracted, since {why}; models that cannot take files read a description of it instead.",
                    label(*id)
                ),
            })
            .collect()
    }
}

/// Whether `a` reaches a model that cannot take it as its extracted text.
pub(super) fn covered(a: &Attachment, extracted: Option<&Extracted>) -> bool {
    extracted.is_some_and(|e| e.text(a.id).is_some())
}

impl RunAttachments {
    /// The attachments a describer describes: the binary ones, but for
    /// PDFs whose text was extracted.
    pub fn to_describe(&self, extracted: Option<&Extracted>) -> Vec<&Attachment> {
        self.all
            .binary()
            .filter(|a| !covered(a, extracted))
            .collect()
    }

    /// Whether a request to `model` needs the PDFs' text: under
    /// `describe`, it cannot take a PDF sent as bytes.
    pub fn needs_text(&self, model: Option<&ModelInfo>) -> bool {
        self.policy == ForTextModels::Describe
            && self
                .unseen(model)
                .iter()
                .any(|a| a.kind == Kind::Pdf && matches!(a.body, Body::Base64(_)))
    }

    /// The PDFs sent as bytes, whose text may be extracted.
    pub fn pdfs(&self) -> impl Iterator<Item = &Attachment> {
        self.all
            .iter()
            .filter(|a| a.kind == Kind::Pdf && matches!(a.body, Body::Base64(_)))
    }

    /// The model that describes `these`: the pipeline's `describer`, or
    /// the cheapest of [models] that takes every kind among them.
    pub fn describer(&self, llm: &Llm, these: &[&Attachment]) -> Result<String, String> {
        let sees_all = |info: &ModelInfo| these.iter().all(|a| info.takes(a.kind));
        let mut kinds: Vec<&str> = these.iter().map(|a| a.kind.modality()).collect();
        kinds.dedup();
        if let Some(id) = &self.describer {
            return match llm.model(id) {
                Some(info) if sees_all(&info) => Ok(id.clone()),
                info => Err(format!(
                    "the describer {}; choose one that takes {} input",
                    self.cannot(id, info.as_deref()),
                    kinds.join("/")
                )),
            };
        }
        let price = |i: &ModelInfo| match (i.input_price, i.output_price) {
            (Some(a), Some(b)) => a + b,
            _ => f64::INFINITY,
        };
        llm.catalog()
            .into_iter()
            .filter(|info| sees_all(info))
            .min_by(|a, b| price(a).total_cmp(&price(b)))
            .map(|info| info.id)
            .ok_or_else(|| {
                format!(
                    "no model of [models] can take {} input to describe the attachments for those that cannot: add one that can (with [models.\"…\"] input = [\"text\", \"{}\"] if its catalog does not say), or {}",
                    kinds.join("/"),
                    kinds.first().copied().unwrap_or("image"),
                    self.or_instead
                )
            })
    }

    /// Whether any of `requests` goes to a model that will need the
    /// descriptions: one that cannot take an attachment it carries (those
    /// it places, if it places any, and only if all of those are the
    /// run's) and that has no extracted text.
    pub fn needs_descriptions(
        &self,
        llm: &Llm,
        requests: &[ChatRequest],
        extracted: Option<&Extracted>,
    ) -> bool {
        let carried = |r: &ChatRequest, a: &Attachment| {
            r.placed.is_empty() || r.placed.iter().any(|p| p.id == a.id)
        };
        let known = |r: &ChatRequest| {
            r.placed
                .iter()
                .all(|p| self.all.iter().any(|a| a.id == p.id))
        };
        self.policy == ForTextModels::Describe
            && requests.iter().any(|r| {
                known(r)
                    && self
                        .unseen(llm.model(&r.model).as_deref())
                        .iter()
                        .any(|a| carried(r, a) && !covered(a, extracted))
            })
    }

    /// The describer's requests: one for each of `these`.
    pub fn describe_requests(&self, describer: &str, these: &[&Attachment]) -> Vec<ChatRequest> {
        these
            .iter()
            .map(|a| ChatRequest {
                label: DESCRIBE.to_owned(),
                model: describer.to_owned(),
                messages: vec![
                    Message {
                        role: Role::System,
                        content: "You describe an attachment for other AI models that cannot see it. They will answer the user's question from your description alone, so be faithful and complete: transcribe every piece of visible or spoken text verbatim; describe layout, diagrams (boxes, arrows, labels), charts (axes, series, values) and tables (as markdown); say what is unclear. Do not answer the question and do not add what is not there.".to_owned(),
                    },
                    Message {
                        role: Role::User,
                        content: format!(
                            "The user's question, for context only:\n{}\n\nDescribe attachment {}.",
                            self.question,
                            a.label()
                        ),
                    },
                ],
                sampling: Sampling {
                    temperature: Some(0.0),
                    max_tokens: Some(DESCRIPTION_TOKENS),
                    ..Sampling::default()
                },
                response_format: None,
                attachments: self.all.only(|b| b.id == a.id),
                placed: Vec::new(),
                tools: None,
            })
            .collect()
    }
}

/// What a model that cannot see `a` reads in its place: its extracted
/// text, else its description.
pub(super) fn stand_in(
    a: &Attachment,
    descriptions: Option<&Descriptions>,
    extracted: Option<&Extracted>,
) -> String {
    if let Some(text) = extracted.and_then(|e| e.text(a.id)) {
        let cut = text
            .cut
            .as_ref()
            .map(|why| {
                format!(
                    "\n[cut: {why}; pages 1–{} of {}]",
                    text.pages_read, text.pages
                )
            })
            .unwrap_or_default();
        return format!(
            "\n\n--- Attachment {}: you cannot take the file; the text extracted from its text layer stands in for it (figures and images are not in it) ---\n{}{cut}\n--- end of the extracted text of attachment #{} ---",
            a.label(),
            text.text.trim_end(),
            a.id
        );
    }
    let found = descriptions.and_then(|d| {
        d.by_id
            .iter()
            .find(|(id, _)| *id == a.id)
            .map(|(_, got)| (d.model.as_str(), got))
    });
    match found {
        Some((model, Ok(description))) => format!(
            "\n\n--- Attachment {}: you cannot see it; this description by {model} stands in for it ---\n{description}\n--- end of the description of attachment #{} ---",
            a.label(),
            a.id
        ),
        Some((_, Err(why))) => format!(
            "\n\n(Attachment {} came with the question, but you cannot see it, and it could not be described: {why}.)",
            a.label()
        ),
        None => format!(
            "\n\n(Attachment {} came with the question, but you cannot see it.)",
            a.label()
        ),
    }
}

/// The descriptions of `these` from the describer's completions, in
/// request order.
pub fn descriptions(
    describer: String,
    these: &[&Attachment],
    completions: Vec<crate::llm::Completion>,
) -> Arc<Descriptions> {
    let by_id = these
        .iter()
        .zip(completions)
        .map(|(a, c)| {
            let got = match c.outcome {
                Ok(reply) if !reply.content.trim().is_empty() => Ok(reply.content.to_string()),
                Ok(_) => Err("the describer wrote nothing".to_owned()),
                Err(failure) => Err(format!("the describer failed: {}", failure.message)),
            };
            (a.id, got)
        })
        .collect();
    Arc::new(Descriptions {
        model: describer,
        by_id,
    })
}
