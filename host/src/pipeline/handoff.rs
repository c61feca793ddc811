//! What crosses into a synthesizer. Answers can be far longer than any model
//! of the run could read (a 3 MB reply), and a plugin that holds every answer
//! and builds a prompt from them per model (a council: n prompts of n - 1
//! answers) would hit its memory cap and lose them all. So each answer's
//! *copy* handed to the plugin — the fan-out's and those of the plugin's own
//! `host.complete` calls — is cut to what could ever be used: no more than
//! the largest context window among the run's models could hold, and no
//! more than the plugin's memory cap allows for n answers seen n times. The
//! run record keeps every answer whole, and an answer returned verbatim
//! (a pick, a vote, a single) gets its full text back.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::llm::{ChatRequest, Completion, ModelInfo};
use crate::plugins::{
    Answer, Budget, HostServices, Plan, Plugin, PluginError, Request, ToolDecision,
};

/// Characters per token no tokenizer exceeds on average over real text:
/// generous, so the cut never takes what a plugin's own (lower) estimate
/// could still fit into a window.
const MAX_CHARS_PER_TOKEN: usize = 6;
/// A plugin may hold each of n answers up to n times over (n prompts of
/// n - 1 answers, strings grown by doubling): n answers get at most
/// cap / (`MEMORY_FACTOR` x n²) bytes each.
const MEMORY_FACTOR: usize = 4;
/// No copy is cut shorter than this, whatever the cap and the count.
const MIN_COPY_BYTES: usize = 16 * 1024;

/// The most of one answer a synthesizer of this run is handed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimit {
    /// Characters: the largest window among the run's models, in the most
    /// characters it could hold; `None` when a model's window is unknown.
    pub chars: Option<usize>,
    /// Bytes: the plugin's memory cap shared among the answers.
    pub bytes: usize,
}

impl CopyLimit {
    /// The limit for `answers` answers handed to a plugin capped at
    /// `memory_mib`, for the run's models (`models`) with their windows.
    pub fn new(
        models: &[&str],
        window: impl Fn(&str) -> Option<u32>,
        memory_mib: u32,
        answers: usize,
    ) -> Self {
        let windows: Option<Vec<u32>> = models.iter().map(|m| window(m)).collect();
        let chars = windows
            .and_then(|w| w.into_iter().max())
            .map(|w| (w as usize).saturating_mul(MAX_CHARS_PER_TOKEN));
        let n = answers.max(1);
        let cap = (memory_mib as usize) << 20;
        let bytes = (cap / (MEMORY_FACTOR * n * n)).max(MIN_COPY_BYTES);
        Self { chars, bytes }
    }

    /// The limit in words: which bound holds, and why.
    fn describe(&self) -> String {
        match self.chars {
            Some(chars) if chars <= self.bytes => {
                format!("{chars} characters, the most the run's largest context window could hold")
            }
            _ => format!(
                "{} bytes each, what the plugin's memory cap allows for that many answers",
                self.bytes
            ),
        }
    }

    /// `text` within the limit: `None` when it already is.
    fn cut(&self, text: &str) -> Option<String> {
        let mut end = text.len().min(self.bytes);
        if let Some(chars) = self.chars
            && let Some(head) = crate::text::cut_at_chars(text, chars)
        {
            end = end.min(head.len());
        }
        if end >= text.len() {
            return None;
        }
        let kept = crate::text::cut_at_char_boundary(text, end);
        Some(format!(
            "{kept}\n[… chorus cut this answer to {} of {} bytes: more than this strategy could use]",
            kept.len(),
            text.len()
        ))
    }
}

/// One answer whose copy was cut: what the plugin saw, and the whole.
#[derive(Debug, Clone)]
struct Cut {
    model: String,
    /// Shared with the completion handed to the plugin, not copied.
    copy: Arc<String>,
    whole: Arc<String>,
}

/// Cuts the copies, and remembers them to restore a verbatim answer.
struct Cutter {
    limit: CopyLimit,
    cuts: Mutex<Vec<Cut>>,
}

impl Cutter {
    /// A cutter to `limit`, the host a strategy calls through it (its own
    /// calls' replies cut alike), and the copies of `completions` to hand it.
    fn handing(
        limit: CopyLimit,
        host: Arc<dyn HostServices>,
        completions: &[Completion],
    ) -> (Arc<Self>, Arc<dyn HostServices>, Vec<Completion>) {
        let cutter = Arc::new(Self {
            limit,
            cuts: Mutex::new(Vec::new()),
        });
        let copies = cutter.copies(completions);
        let host = Arc::new(CuttingHost {
            inner: host,
            cutter: cutter.clone(),
        });
        (cutter, host, copies)
    }

    fn copies(&self, completions: &[Completion]) -> Vec<Completion> {
        completions
            .iter()
            .map(|completion| {
                let mut copy = completion.clone();
                if let Ok(reply) = &mut copy.outcome
                    && let Some(cut) = self.limit.cut(&reply.content)
                {
                    let cut = Arc::new(cut);
                    let whole = std::mem::replace(&mut reply.content, cut.clone());
                    self.cuts
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(Cut {
                            model: completion.model.clone(),
                            copy: cut,
                            whole,
                        });
                }
                copy
            })
            .collect()
    }

    /// An answer that is one of the cut copies verbatim gets the whole
    /// back; the notes say what was cut.
    fn restore(&self, answer: &mut Answer) {
        let cuts = self
            .cuts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cuts.is_empty() {
            return;
        }
        if let Some(cut) = cuts.iter().find(|c| c.copy.trim() == answer.text.trim()) {
            answer.text = String::clone(&cut.whole);
        }
        let models: Vec<&str> = cuts.iter().map(|c| c.model.as_str()).collect();
        answer.notes.push(format!(
            "{} answer(s) ({}) were handed to the strategy cut to {}. The run record keeps them whole.",
            cuts.len(),
            models.join(", "),
            self.limit.describe()
        ));
    }
}

/// The run's host services, with the completions they return cut like the
/// fan-out's.
struct CuttingHost {
    inner: Arc<dyn HostServices>,
    cutter: Arc<Cutter>,
}

impl HostServices for CuttingHost {
    fn complete(&self, plugin: &str, requests: Vec<ChatRequest>) -> BoxFuture<'_, Vec<Completion>> {
        let plugin = plugin.to_owned();
        Box::pin(async move {
            let completions = self.inner.complete(&plugin, requests).await;
            self.cutter.copies(&completions)
        })
    }

    fn complete_answer(&self, plugin: &str, request: ChatRequest) -> BoxFuture<'_, Completion> {
        let plugin = plugin.to_owned();
        Box::pin(async move {
            let completion = self.inner.complete_answer(&plugin, request).await;
            let mut copies = self.cutter.copies(std::slice::from_ref(&completion));
            copies.pop().unwrap_or(completion)
        })
    }

    fn progress(&self, plugin: &str, message: String) {
        self.inner.progress(plugin, message);
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.inner.models()
    }

    fn budget(&self) -> Budget {
        self.inner.budget()
    }
}

/// Runs `synthesizer` on copies of `completions` cut to `limit`.
pub async fn synthesize(
    synthesizer: &Plugin,
    host: Arc<dyn HostServices>,
    request: &Request,
    plan: &Plan,
    completions: &[Completion],
    limit: CopyLimit,
) -> Result<Answer, PluginError> {
    let (cutter, host, copies) = Cutter::handing(limit, host, completions);
    let mut answer = synthesizer.synthesize(host, request, plan, &copies).await?;
    cutter.restore(&mut answer);
    Ok(answer)
}

/// Asks `synthesizer` what it makes of the panel's tool calls, on copies
/// of `completions` cut to `limit`, as `synthesize` would see them.
pub async fn choose_tool_calls(
    synthesizer: &Plugin,
    host: Arc<dyn HostServices>,
    request: &Request,
    plan: &Plan,
    completions: &[Completion],
    limit: CopyLimit,
) -> Result<Option<ToolDecision>, PluginError> {
    let (cutter, host, copies) = Cutter::handing(limit, host, completions);
    let mut decision = synthesizer
        .choose_tool_calls(host, request, plan, &copies)
        .await?;
    if let Some(ToolDecision::Answer(answer)) = &mut decision {
        cutter.restore(answer);
    }
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_window_and_the_memory_cap_bound_each_copy() {
        let windows = |m: &str| match m {
            "small" => Some(1_000),
            "big" => Some(100_000),
            _ => None,
        };
        let limit = CopyLimit::new(&["small", "big"], windows, 64, 5);
        assert_eq!(limit.chars, Some(600_000));
        assert_eq!(limit.bytes, (64 << 20) / 100);
        // A model of unknown window: only the memory bounds the copy.
        assert_eq!(
            CopyLimit::new(&["small", "other"], windows, 64, 5).chars,
            None
        );
        // Few answers, a big cap: never below the floor, never above the cap.
        assert_eq!(CopyLimit::new(&[], windows, 1, 100).bytes, MIN_COPY_BYTES);
    }

    #[test]
    fn copies_are_cut_on_a_char_boundary_and_say_so() {
        let limit = CopyLimit {
            chars: Some(5),
            bytes: 1_000,
        };
        let cut = limit.cut("ééééééé").unwrap();
        assert!(cut.starts_with("ééééé\n[… chorus cut this answer to 10 of 14 bytes"));
        assert_eq!(limit.cut("short"), None);
        let by_bytes = CopyLimit {
            chars: None,
            bytes: 3,
        };
        assert!(by_bytes.cut("éé").unwrap().starts_with("é\n"));
    }
}
