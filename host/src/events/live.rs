//! The answer as its model writes it, for a watcher that shows it so (the
//! OpenAI endpoint's streams, `chorus ask` on a terminal): which call's
//! text is going out, what of it went out, and what still has to go once
//! the run has its answer.
//!
//! A synthesizer built for contract 0.5 makes the call whose reply is the
//! answer with `host.complete-answer`, and its text reaches the client as
//! it streams (`Event::AnswerText`). What went out cannot be taken back, so
//! the rules are plain: one attempt's text goes out at a time; when another
//! attempt starts writing (a retry or a fallback after the first broke
//! off), a line says so and its text follows; and when the run's answer is
//! not what went out (the strategy fell back, or edited the reply), a line
//! says so and the answer follows whole. A client that keeps the text it
//! was sent always ends with the answer, and never with a silent splice.

/// Said between an attempt that broke off and the next one's text.
pub const BROKE_OFF: &str =
    "\n\n[chorus: the answer above broke off; it is being written again]\n\n";

/// Said before the answer when it is not what was streamed.
pub const REPLACED: &str =
    "\n\n[chorus: the answer above was replaced; the final answer follows]\n\n";

/// How the answer reached the client, as the `chorus.streamed` field says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streamed {
    /// Its text went out as its model wrote it.
    Live,
    /// It went out when the run had it (no call streamed it: a strategy
    /// without `complete-answer`, a provider that does not stream, a
    /// cached reply, a single survivor).
    Whole,
    /// Text went out that the answer replaced, marked as such.
    Replaced,
}

impl Streamed {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Whole => "whole",
            Self::Replaced => "replaced",
        }
    }
}

/// What of the answer has gone out.
#[derive(Debug, Default)]
pub struct Live {
    /// The call and attempt whose text is going out.
    source: Option<(u32, u32)>,
    /// What that attempt has sent.
    sent: String,
    /// Text went out that the answer does not continue.
    replaced: bool,
}

impl Live {
    /// The text to send for a piece of call `id`'s attempt `attempt`.
    pub fn piece(&mut self, id: u32, attempt: u32, text: &str) -> String {
        let mut out = String::new();
        if self.source != Some((id, attempt)) {
            if !self.sent.is_empty() {
                out.push_str(BROKE_OFF);
                self.replaced = true;
            }
            self.source = Some((id, attempt));
            self.sent.clear();
        }
        self.sent.push_str(text);
        out.push_str(text);
        out
    }

    /// What completes the client's text once the run's answer is
    /// `answer`, and how the answer got there.
    pub fn rest(&self, answer: &str) -> (String, Streamed) {
        if self.source.is_none() {
            return (answer.to_owned(), Streamed::Whole);
        }
        match answer.strip_prefix(self.sent.as_str()) {
            Some(rest) if !self.replaced => (rest.to_owned(), Streamed::Live),
            Some(rest) => (rest.to_owned(), Streamed::Replaced),
            None => (format!("{REPLACED}{answer}"), Streamed::Replaced),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_text(
        live: &mut Live,
        pieces: &[(u32, u32, &str)],
        answer: &str,
    ) -> (String, Streamed) {
        let mut text: String = pieces
            .iter()
            .map(|&(id, attempt, piece)| live.piece(id, attempt, piece))
            .collect();
        let (rest, how) = live.rest(answer);
        text.push_str(&rest);
        (text, how)
    }

    #[test]
    fn an_answer_streamed_whole_is_sent_once() {
        let mut live = Live::default();
        let got = client_text(&mut live, &[(7, 1, "The "), (7, 1, "sky.")], "The sky.");
        assert_eq!(got, ("The sky.".to_owned(), Streamed::Live));
    }

    #[test]
    fn what_a_strategy_adds_after_the_reply_follows_it() {
        let mut live = Live::default();
        let got = client_text(&mut live, &[(7, 1, "The sky.")], "The sky.\n\nSources: [1]");
        assert_eq!(got, ("The sky.\n\nSources: [1]".to_owned(), Streamed::Live));
    }

    #[test]
    fn nothing_streamed_sends_the_answer_whole() {
        let got = client_text(&mut Live::default(), &[], "Only one answered.");
        assert_eq!(got, ("Only one answered.".to_owned(), Streamed::Whole));
    }

    #[test]
    fn a_retry_after_a_broken_stream_is_marked_and_ends_with_the_answer() {
        let mut live = Live::default();
        let pieces = [(7, 1, "The s"), (7, 2, "The sky "), (7, 2, "is blue.")];
        let (text, how) = client_text(&mut live, &pieces, "The sky is blue.");
        assert_eq!(text, format!("The s{BROKE_OFF}The sky is blue."));
        assert_eq!(how, Streamed::Replaced);
    }

    #[test]
    fn an_answer_that_is_not_what_streamed_follows_it_marked() {
        let mut live = Live::default();
        let (text, how) = client_text(&mut live, &[(7, 1, "Merged bu")], "A: one\n\nB: two");
        assert_eq!(text, format!("Merged bu{REPLACED}A: one\n\nB: two"));
        assert_eq!(how, Streamed::Replaced);
    }
}
