//! A re-synthesis: a kept run's answers merged again by another merger,
//! without asking the panel again — through the same gate and keeping as
//! every run, its source's conversation and attachments carried over (and
//! what could not be, said in its notes).

use std::sync::Arc;

use super::{Chorus, worst_case};
use crate::client::Client;
use crate::events::Progress;
use crate::pipeline::{Merger, RunError};
use crate::record::RunRecord;
use crate::store::Links;

impl Chorus {
    /// Merges the answers of run `run_id` (an id, a unique prefix, or
    /// `last`, among the runs `client` may see) again with `merger`,
    /// without asking the panel again; the new run links to its source.
    pub async fn resynthesize(
        &self,
        client: &Arc<Client>,
        run_id: &str,
        merger: Merger,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        let source = self.kept_run(client, run_id).await?;
        let mut lost_conversation = None;
        let conversation = match &source.follow_up_of {
            Some(of) => match self.conversation(client, of).await {
                Ok((conversation, _)) => Some(conversation),
                Err(e) => {
                    lost_conversation = Some(e.to_string());
                    None
                }
            },
            None => None,
        };
        let limit_of = match &merger {
            Merger::Pipeline(name) => name.clone(),
            _ => source.pipeline.clone(),
        };
        let worst = worst_case(&self.runner(), None);
        let pass = self.admit(client, &limit_of, worst).await?;
        let carried = self.carried(&source).await;
        let attachments = crate::attach::Attachments::new(carried.attachments);
        let links = Links {
            follow_up_of: source.follow_up_of.clone(),
            resynthesis_of: Some(source.run_id.clone()),
            client: Some(client.name.clone()),
            attachments: attachments.clone(),
            // A re-synthesis merges again what a variant's panel said; it
            // serves no experiment of its own.
            experiment: None,
        };
        let missing = carried.missing;
        self.make(pass, client, &limit_of, links, progress, |runner, progress| async move {
            runner
                .resynthesize(&source, &merger, conversation, attachments, progress)
                .await
                .map(|mut record| {
                    if let Some(why) = lost_conversation {
                        record.notes.push(format!(
                            "The conversation this run follows up could not be shown to the synthesizer: {why}."
                        ));
                    }
                    if !missing.is_empty() {
                        record.notes.push(format!(
                            "The synthesizer did not see these attachments of run {}, whose bytes are gone: {}.",
                            source.run_id,
                            missing.join("; ")
                        ));
                    }
                    record
                })
        })
        .await
    }
}
