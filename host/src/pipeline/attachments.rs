//! Where a run's attachments go. Every call of the run carries them with
//! its last user message: text files inlined with their names; images,
//! PDFs and audio as they are to each model that takes them (`[models]
//! input`, else the catalog's input modalities). A panel member that
//! cannot take one gets what the pipeline's `attachments_for_text_models`
//! says — a description written first by a model that can (`describe`,
//! the default), nothing because it is left out (`skip`), or the run
//! refuses at planning, before anything is spent (`fail`). Each choice is
//! said in the result's notes. Under `describe`, a PDF with a text layer
//! is not described but read as its extracted text; what stands in for an
//! attachment, and the describer, are `pipeline::describe`'s.

use super::describe::{Descriptions, Extracted, covered, stand_in};
use crate::attach::{Attachment, Attachments, Body, Kind};
use crate::config::ForTextModels;
use crate::llm::{ChatRequest, Failure, FailureKind, Llm, ModelInfo, Role};
use crate::text::cut_at_char_boundary;

/// How much of the question the describer sees, for context.
const QUESTION_FOR_DESCRIBER: usize = 2000;

/// A run's attachments and what its pipeline does with models that cannot
/// take them.
#[derive(Debug)]
pub struct RunAttachments {
    pub all: Attachments,
    pub(super) policy: ForTextModels,
    /// `pipelines.NAME.attachments_for_text_models`, for messages.
    policy_key: String,
    /// What else to do when no model can describe them.
    pub(super) or_instead: String,
    /// `pipelines.NAME.describer`, when set.
    pub(super) describer: Option<String>,
    /// The question, for the describer's context.
    pub(super) question: String,
}

impl RunAttachments {
    pub fn new(
        all: Attachments,
        pipeline: &str,
        policy: ForTextModels,
        describer: Option<String>,
        question: &str,
    ) -> Self {
        let policy_key = format!("pipelines.{pipeline}.attachments_for_text_models");
        Self {
            all,
            policy,
            or_instead: format!("set {policy_key} = \"skip\""),
            policy_key,
            describer,
            question: cut_at_char_boundary(question, QUESTION_FOR_DESCRIBER).to_owned(),
        }
    }

    /// The attachments of a run of `model` alone (`chorus eval`'s
    /// `model:ID` targets): it gets what it can take, and the rest
    /// described (or a PDF's extracted text), as a pipeline's default.
    pub fn for_model(all: Attachments, model: &str, question: &str) -> Self {
        Self {
            all,
            policy: ForTextModels::Describe,
            policy_key: format!("a `model:{model}` target"),
            or_instead: "evaluate a pipeline that skips such models".to_owned(),
            describer: None,
            question: cut_at_char_boundary(question, QUESTION_FOR_DESCRIBER).to_owned(),
        }
    }

    /// The binary attachments `model` cannot take as they are.
    pub(super) fn unseen<'a>(&'a self, model: Option<&ModelInfo>) -> Vec<&'a Attachment> {
        self.all
            .binary()
            .filter(|a| !model.is_some_and(|m| m.takes(a.kind)))
            .collect()
    }

    /// Holds the panel (the fan-out's models) to the policy before anything
    /// is spent: the notes to add, or why the run cannot go on.
    /// `extracted` is the PDFs' text, when some member needed it.
    pub fn plan(
        &self,
        llm: &Llm,
        panel: &[&str],
        extracted: Option<&Extracted>,
    ) -> Result<Vec<String>, String> {
        let mut notes = Vec::new();
        let blind: Vec<(&str, Option<std::sync::Arc<ModelInfo>>)> = panel
            .iter()
            .map(|id| (*id, llm.model(id)))
            .filter(|(_, info)| !self.unseen(info.as_deref()).is_empty())
            .collect();
        let unknown: Vec<&str> = blind
            .iter()
            .filter(|(_, info)| info.as_ref().is_none_or(|i| i.input_modalities.is_none()))
            .map(|(id, _)| *id)
            .collect();
        if !unknown.is_empty() {
            notes.push(format!(
                "Treated as text-only, since neither the catalog nor [models] says what they take: {} (set [models.\"…\"] input = [\"text\", \"image\", …] to say).",
                unknown.join(", ")
            ));
        }
        if blind.is_empty() {
            return Ok(notes);
        }
        let cannot = blind
            .iter()
            .map(|(id, info)| self.cannot(id, info.as_deref()))
            .collect::<Vec<_>>()
            .join("; ");
        match self.policy {
            ForTextModels::Fail => Err(format!(
                "{cannot}, and {} = \"fail\": use models that can, or set it to \"describe\" or \"skip\"",
                self.policy_key
            )),
            ForTextModels::Skip if blind.len() == panel.len() => Err(format!(
                "no panel member can take the attachments ({cannot}); with {} = \"skip\" every one would be left out: use models that can, or set it to \"describe\"",
                self.policy_key
            )),
            ForTextModels::Skip => {
                notes.push(format!(
                    "Left out of the panel ({} = \"skip\"): {cannot}.",
                    self.policy_key
                ));
                Ok(notes)
            }
            ForTextModels::Describe => {
                let read: Vec<&str> = blind
                    .iter()
                    .filter(|(_, info)| {
                        self.unseen(info.as_deref())
                            .iter()
                            .any(|a| covered(a, extracted))
                    })
                    .map(|(id, _)| *id)
                    .collect();
                if !read.is_empty() {
                    notes.push(format!(
                        "Given the text extracted from the PDFs in their place, marked as extracted text: {}.",
                        read.join(", ")
                    ));
                }
                let described = blind.iter().any(|(_, info)| {
                    self.unseen(info.as_deref())
                        .iter()
                        .any(|a| !covered(a, extracted))
                });
                if described {
                    let describer = self.describer(llm, &self.to_describe(extracted))?;
                    notes.push(format!(
                        "{describer} described the attachments for those that cannot see them: {cannot}."
                    ));
                }
                Ok(notes)
            }
        }
    }

    /// `m cannot take image input (it takes: text)`.
    pub(super) fn cannot(&self, id: &str, info: Option<&ModelInfo>) -> String {
        let mut kinds: Vec<&str> = self
            .unseen(info)
            .iter()
            .map(|a| a.kind.modality())
            .collect();
        kinds.dedup();
        let takes = info
            .and_then(|i| i.input_modalities.as_ref())
            .map_or_else(|| "not known".to_owned(), |m| m.join(", "));
        format!(
            "{id} cannot take {} input (it takes: {takes})",
            kinds.join("/")
        )
    }

    /// Puts the attachments on `request`: text inlined, what the model takes
    /// attached, the rest described (or mentioned) — where a plugin placed
    /// them (contract 0.4's `content-part.attachment`), each once, else with
    /// the last user message. `Err` when the model is to be left out
    /// (`skip`, on the panel's own calls), or the request placed an
    /// attachment the run does not have.
    pub fn place(
        &self,
        request: &mut ChatRequest,
        panel: bool,
        llm: &Llm,
        descriptions: Option<&Descriptions>,
        extracted: Option<&Extracted>,
    ) -> Result<(), Failure> {
        if let Some(id) = request
            .placed
            .iter()
            .map(|p| p.id)
            .find(|id| !self.all.iter().any(|a| a.id == *id))
        {
            let ids: Vec<String> = self.all.iter().map(|a| format!("#{}", a.id)).collect();
            return Err(unknown_attachment(id, &ids.join(", ")));
        }
        let info = llm.model(&request.model);
        let mut unseen = self.unseen(info.as_deref());
        if !request.placed.is_empty() {
            unseen.retain(|a| request.placed.iter().any(|p| p.id == a.id));
        }
        if panel && self.policy == ForTextModels::Skip && !unseen.is_empty() {
            return Err(Failure::new(
                FailureKind::UnsupportedInput,
                format!(
                    "not asked: {} ({} = \"skip\")",
                    self.cannot(&request.model, info.as_deref()),
                    self.policy_key
                ),
            ));
        }
        let stands_in = |a: &Attachment| match &a.body {
            Body::Text(contents) => Some(format!(
                "\n\n--- Attachment {} ---\n{contents}\n--- end of attachment #{} ---",
                a.label(),
                a.id
            )),
            _ if unseen.iter().any(|u| u.id == a.id) => Some(stand_in(a, descriptions, extracted)),
            _ => None,
        };
        if !request.placed.is_empty() {
            self.place_where_put(request, stands_in);
            return Ok(());
        }
        let text: String = self.all.iter().filter_map(stands_in).collect();
        if let Some(last) = request.messages.iter_mut().rfind(|m| m.role == Role::User) {
            last.content.push_str(&text);
        }
        request.attachments = self
            .all
            .only(|a| a.kind != Kind::Text && !unseen.iter().any(|u| u.id == a.id));
        Ok(())
    }

    /// The attachments where the plugin placed them: text (a text file, or
    /// what stands in for one the model cannot see) into the message there;
    /// the rest stay placed, for the wire to send as parts.
    fn place_where_put(
        &self,
        request: &mut ChatRequest,
        stands_in: impl Fn(&Attachment) -> Option<String>,
    ) {
        request.placed.sort_by_key(|p| (p.message, p.at));
        let mut kept = Vec::new();
        let mut shift = (usize::MAX, 0);
        for mut placed in std::mem::take(&mut request.placed) {
            if shift.0 != placed.message {
                shift = (placed.message, 0);
            }
            placed.at += shift.1;
            let Some(a) = self.all.iter().find(|a| a.id == placed.id) else {
                continue;
            };
            match (stands_in(a), request.messages.get_mut(placed.message)) {
                (Some(mut text), Some(message)) => {
                    let mut at = placed.at.min(message.content.len());
                    while !message.content.is_char_boundary(at) {
                        at -= 1;
                    }
                    if at < message.content.len() {
                        text.push_str("\n\n");
                    }
                    message.content.insert_str(at, &text);
                    shift.1 += text.len();
                }
                (None, Some(_)) => kept.push(placed),
                (_, None) => {}
            }
        }
        request.attachments = self.all.only(|a| kept.iter().any(|p| p.id == a.id));
        request.placed = kept;
    }

    /// For a run without attachments: a request that places one fails.
    pub fn none_placed(request: &ChatRequest) -> Option<Failure> {
        let id = request.placed.first()?.id;
        Some(unknown_attachment(id, "none"))
    }
}

/// A request placed attachment `id`, which the run does not have.
fn unknown_attachment(id: u32, has: &str) -> Failure {
    Failure::new(
        FailureKind::UnsupportedInput,
        format!(
            "not sent: the request places attachment #{id}, which this run does not have (its attachments: {has}); place one of those ids, from request.attachments"
        ),
    )
}
