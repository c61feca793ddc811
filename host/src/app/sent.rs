//! A run that continues a conversation its caller sent whole (an OpenAI
//! client sends every earlier message with each request), rather than one
//! chorus kept (`follow_up_of`): the same gate, preparation and keeping as
//! every other run, only the conversation comes from the caller.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Chorus, Earlier};
use crate::client::Client;
use crate::events::Progress;
use crate::pipeline::follow_up::Conversation;
use crate::pipeline::{Question, RunError};
use crate::record::RunRecord;

impl Chorus {
    /// Runs `pipeline` for `client` as the next turn of `conversation`
    /// (`None`: afresh) and keeps its record. `options` are the pipeline's
    /// (a `follow_up_of` among them is refused: the conversation is
    /// given). Cancel by dropping the future.
    pub async fn run_in_conversation(
        &self,
        client: &Arc<Client>,
        pipeline: &str,
        question: Question,
        mut options: Map<String, Value>,
        conversation: Option<Conversation>,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        if crate::pipeline::options::take_follow_up(&mut options)
            .map_err(RunError::InvalidOptions)?
            .is_some()
        {
            return Err(RunError::InvalidOptions(
                "`follow_up_of` cannot be given with a conversation: send the earlier turns as messages, or follow up a kept run alone".into(),
            ));
        }
        let earlier = match conversation {
            Some(conversation) => Earlier::Sent(conversation),
            None => Earlier::None,
        };
        self.turn(client, pipeline, question, options, earlier, progress)
            .await
    }
}
