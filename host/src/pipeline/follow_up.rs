//! Follow-ups: a run that continues an earlier conversation. Every chat
//! completion of the new run — the panel's and the plugins' own — sees the
//! earlier questions and final answers as user and assistant messages ahead
//! of what the plugins send. The host does this, so every plugin gets it,
//! including those written before follow-ups existed.

use crate::llm::{Message, Role};

/// How many earlier runs a follow-up chain may reach back.
pub const MAX_TURNS: usize = 32;

/// Why a conversation's older turns are not shown.
pub const NOT_KEPT: &str = "they are no longer kept";
pub const TOO_LONG: &str = "a follow-up reaches back 32 turns at most";

/// One earlier exchange: a run's question and its final answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub question: String,
    pub answer: String,
}

/// The conversation a follow-up continues, oldest turn first.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The run followed up: the latest turn (`None`: turns the caller
    /// sent itself, as an OpenAI client sends its messages).
    pub of: Option<String>,
    turns: Vec<Turn>,
    /// Earlier turns that exist but are not shown, and why.
    left_out: Option<(usize, &'static str)>,
    /// Instructions the caller sent with its turns (an OpenAI client's
    /// system messages), shown to every call ahead of them.
    system: Option<String>,
    /// The conversation's first question, even when it is no longer among
    /// the turns shown: what names the conversation (an experiment keeps
    /// its variant by it).
    opening: Option<String>,
}

impl Conversation {
    /// `newest_first`: the run followed up, the run that one followed up,
    /// and so on. `beyond` says why the chain's older turns, if it has more,
    /// are not among them. The latest turn is always kept; older ones while
    /// the whole fits in `max_bytes`.
    pub fn new(
        of: String,
        newest_first: Vec<Turn>,
        beyond: Option<&'static str>,
        max_bytes: usize,
    ) -> Self {
        Self::of_turns(Some(of), newest_first, beyond, max_bytes)
    }

    /// Turns the caller sent itself (an OpenAI client's earlier messages),
    /// newest first, held to `max_bytes` as `new` holds a kept chain.
    pub fn sent(newest_first: Vec<Turn>, max_bytes: usize) -> Self {
        Self::of_turns(None, newest_first, None, max_bytes)
    }

    fn of_turns(
        of: Option<String>,
        newest_first: Vec<Turn>,
        beyond: Option<&'static str>,
        max_bytes: usize,
    ) -> Self {
        let opening = newest_first.last().map(|turn| {
            if turn.question.is_empty() {
                turn.answer.clone()
            } else {
                turn.question.clone()
            }
        });
        let mut size = 0;
        let mut turns = Vec::new();
        let total = newest_first.len();
        for turn in newest_first {
            size += turn.question.len() + turn.answer.len();
            if !turns.is_empty() && size > max_bytes {
                break;
            }
            turns.push(turn);
        }
        let left_out = if turns.len() < total {
            Some((
                total - turns.len(),
                "to stay within limits.max_prompt_bytes",
            ))
        } else {
            beyond.map(|why| (0, why))
        };
        turns.reverse();
        Self {
            of,
            turns,
            left_out,
            system: None,
            opening,
        }
    }

    /// The conversation with the caller's own instructions, which every
    /// chat completion of the run sees as a system message ahead of the
    /// turns.
    pub fn with_system(mut self, system: String) -> Self {
        self.system = (!system.is_empty()).then_some(system);
        self
    }

    /// The conversation's first question (or, when it opened with the
    /// assistant, its first answer).
    pub fn opening(&self) -> Option<&str> {
        self.opening.as_deref()
    }

    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    /// The turns as chat messages.
    pub fn messages(&self) -> Vec<Message> {
        let system = self.system.as_ref().map(|text| Message {
            role: Role::System,
            content: text.clone(),
        });
        system
            .into_iter()
            .chain(self.turns.iter().flat_map(|turn| {
                // A conversation a caller sent may open with the
                // assistant: no empty user message ahead of it.
                let question = (!turn.question.is_empty()).then(|| Message {
                    role: Role::User,
                    content: turn.question.clone(),
                });
                question.into_iter().chain([Message {
                    role: Role::Assistant,
                    content: turn.answer.clone(),
                }])
            }))
            .collect()
    }

    /// What the record should say about the conversation, if anything was left out.
    pub fn note(&self) -> Option<String> {
        let (count, why) = self.left_out?;
        let shown = self.turns.len();
        Some(if count == 0 {
            format!(
                "The models saw the last {shown} turn(s) of the conversation; earlier turns were left out: {why}."
            )
        } else {
            format!(
                "The models saw the last {shown} turn(s) of the conversation; {count} earlier turn(s) were left out {why}."
            )
        })
    }
}

/// Puts `history` ahead of a request's own messages, after its leading
/// system messages (which keep their place as the instructions).
pub fn insert(messages: &mut Vec<Message>, history: &[Message]) {
    insert_at(messages, history);
}

/// `insert` for a whole request: attachments a plugin placed stay in the
/// messages it placed them in.
pub fn insert_into(request: &mut crate::llm::ChatRequest, history: &[Message]) {
    let at = insert_at(&mut request.messages, history);
    for placed in request.placed.iter_mut().filter(|p| p.message >= at) {
        placed.message += history.len();
    }
}

/// Where the history went.
fn insert_at(messages: &mut Vec<Message>, history: &[Message]) -> usize {
    let at = messages
        .iter()
        .position(|m| m.role != Role::System)
        .unwrap_or(messages.len());
    if !history.is_empty() {
        messages.splice(at..at, history.iter().cloned());
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(q: &str, a: &str) -> Turn {
        Turn {
            question: q.into(),
            answer: a.into(),
        }
    }

    fn message(role: Role, content: &str) -> Message {
        Message {
            role,
            content: content.into(),
        }
    }

    #[test]
    fn the_history_goes_after_the_instructions_and_before_the_question() {
        let conversation = Conversation::new(
            "r2".into(),
            vec![turn("q2", "a2"), turn("q1", "a1")],
            None,
            1000,
        );
        let mut messages = vec![message(Role::System, "be brief"), message(Role::User, "q3")];
        insert(&mut messages, &conversation.messages());
        let contents: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(contents, ["be brief", "q1", "a1", "q2", "a2", "q3"]);
        assert_eq!(messages[2].role, Role::Assistant);
        assert_eq!(conversation.note(), None);
    }

    #[test]
    fn old_turns_past_the_size_limit_are_left_out_and_said_so() {
        let conversation = Conversation::new(
            "r3".into(),
            vec![turn("q3", "aaaa"), turn("q2", "aaaa"), turn("q1", "aaaa")],
            None,
            13,
        );
        assert_eq!(
            conversation.turns(),
            [turn("q2", "aaaa"), turn("q3", "aaaa")]
        );
        let note = conversation.note().unwrap();
        assert!(note.contains("1 earlier turn(s) were left out"), "{note}");
        assert!(note.contains("limits.max_prompt_bytes"), "{note}");

        // The turn followed up is kept whatever its size.
        let big = Conversation::new("r".into(), vec![turn("q", &"x".repeat(100))], None, 10);
        assert_eq!(big.turns().len(), 1);
    }

    #[test]
    fn a_chain_that_reaches_pruned_runs_says_so() {
        let conversation = Conversation::new("r".into(), vec![turn("q", "a")], Some(NOT_KEPT), 100);
        assert!(conversation.note().unwrap().contains("no longer kept"));
        let mut messages = vec![message(Role::User, "q2")];
        insert(&mut messages, &conversation.messages());
        assert_eq!(messages.len(), 3);
    }
}
