//! Helpers over the contract's types, shared by the plugins: building
//! requests, reading outcomes, the honest endings of a merge, plans. The
//! functions that call the host are thin wrappers over ones that take the
//! call as a closure, so the logic is tested natively (`tests.rs`).

use crate::wit::host;
use crate::wit::types::{
    Answer, AnswerKind, ChatRequest, Completion, ContentPart, Failure, FormatSent, Message, Plan,
    ResponseFormat, Role, Sampling, Seat,
};

pub const NO_SAMPLING: Sampling = Sampling {
    temperature: None,
    top_p: None,
    max_tokens: None,
    seed: None,
};

/// A message of one text part.
pub fn message(role: Role, content: impl Into<String>) -> Message {
    Message {
        role,
        content: vec![ContentPart::Text(content.into())],
    }
}

/// The text of a message, its parts joined (attachments placed in it
/// have no text).
pub fn text(message: &Message) -> String {
    message
        .content
        .iter()
        .map(|part| match part {
            ContentPart::Text(text) => text.as_str(),
            ContentPart::Attachment(_) => "",
        })
        .collect()
}

pub fn request(
    label: &str,
    model: &str,
    messages: Vec<Message>,
    sampling: Sampling,
) -> ChatRequest {
    ChatRequest {
        label: label.to_owned(),
        model: model.to_owned(),
        messages,
        sampling,
        response_format: None,
        tools: None,
    }
}

/// One outcome of `complete`: the call's id (to cite it) and its text or
/// its failure in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub id: Option<u32>,
    pub text: Result<String, String>,
    /// What the provider was asked for, of the request's response format.
    pub format_sent: FormatSent,
}

/// Runs requests at once; each outcome with its call id.
pub fn complete_cited(requests: &[ChatRequest]) -> Vec<Said> {
    host::complete(requests)
        .iter()
        .map(|c| Said {
            id: c.id,
            text: text_of(c),
            format_sent: c
                .outcome
                .as_ref()
                .map_or(FormatSent::None, |reply| reply.format_sent),
        })
        .collect()
}

/// Runs requests at once; each outcome as text or a described failure.
pub fn complete(requests: &[ChatRequest]) -> Vec<Result<String, String>> {
    host::complete(requests).iter().map(text_of).collect()
}

/// One call: system + user message to `model`.
pub fn ask(
    label: &str,
    model: &str,
    system: &str,
    user: &str,
    sampling: Sampling,
) -> Result<String, String> {
    ask_for(label, model, system, user, sampling, None)
}

/// `ask`, with a response format (see `crate::formats`).
pub fn ask_for(
    label: &str,
    model: &str,
    system: &str,
    user: &str,
    sampling: Sampling,
    format: Option<ResponseFormat>,
) -> Result<String, String> {
    let messages = vec![message(Role::System, system), message(Role::User, user)];
    let mut request = request(label, model, messages, sampling);
    request.response_format = format;
    complete(&[request])
        .pop()
        .unwrap_or_else(|| Err("the host returned no outcome".to_owned()))
}

/// One call whose reply is the answer the plugin returns, word for word
/// (`host.complete-answer`): where the run is streamed to its caller, its
/// text goes out as the model writes it. Return its text unchanged (or
/// add only after it), or the host marks what it streamed as replaced.
pub fn ask_answer(
    label: &str,
    model: &str,
    system: &str,
    user: &str,
    sampling: Sampling,
) -> Result<String, String> {
    let messages = vec![message(Role::System, system), message(Role::User, user)];
    text_of(&host::complete_answer(&request(
        label, model, messages, sampling,
    )))
}

pub fn text_of(completion: &Completion) -> Result<String, String> {
    match &completion.outcome {
        Ok(reply) if !reply.content.trim().is_empty() || !reply.tool_calls.is_empty() => {
            Ok(reply.content.clone())
        }
        Ok(_) => Err("empty answer".to_owned()),
        Err(failure) => Err(describe(failure)),
    }
}

pub fn describe(failure: &Failure) -> String {
    crate::describe_failure(
        &format!("{:?}", failure.kind),
        failure.status,
        &failure.message,
    )
}

/// The completions that answered: (call id, completion, text). One that
/// only proposed tool calls answered too (its text may be empty).
pub fn answered(completions: &[Completion]) -> Vec<(u32, &Completion, &str)> {
    completions
        .iter()
        .filter_map(|c| match (&c.outcome, c.id) {
            (Ok(reply), Some(id))
                if !reply.content.trim().is_empty() || !reply.tool_calls.is_empty() =>
            {
                Some((id, c, reply.content.as_str()))
            }
            _ => None,
        })
        .collect()
}

/// One note per completion that did not answer.
pub fn failure_notes(completions: &[Completion]) -> Vec<String> {
    completions
        .iter()
        .filter_map(|c| text_of(c).err().map(|e| format!("{} failed: {e}", c.model)))
        .collect()
}

/// A merge that succeeded: who merged, the text, what to tell the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub model: String,
    pub text: String,
    pub notes: Vec<String>,
}

/// Merges `answers` (heading, text) with the first of `synthesizers` that
/// succeeds, fitting them to its context window; a synthesizer whose
/// window would cut the answers to stubs is skipped for the next. The
/// merge is the answer: its text streams where the run does.
/// `Err` carries every synthesizer's own error.
pub fn merge(
    question: &str,
    answers: &[(String, String)],
    synthesizers: &[String],
    instructions: &str,
    sampling: Sampling,
) -> Result<Merged, Vec<(String, String)>> {
    merge_with(
        Merge {
            question,
            answers,
            synthesizers,
            instructions,
            context: "",
            reply_tokens: sampling.max_tokens,
        },
        context_window,
        |model, prompt| {
            host::progress(&format!("merging {} answers with {model}", answers.len()));
            ask_answer("synthesis", model, instructions, prompt, sampling)
        },
    )
}

/// What a merge sends: the question, then `context` when not empty (an
/// analysis of the answers, say), the answers under their headings; the
/// instructions (the system prompt) and the reply's token cap.
#[derive(Debug, Clone, Copy)]
pub struct Merge<'a> {
    pub question: &'a str,
    pub answers: &'a [(String, String)],
    pub synthesizers: &'a [String],
    pub instructions: &'a str,
    pub context: &'a str,
    pub reply_tokens: Option<u32>,
}

const MERGE_CLOSING: &str = "Write the best answer to the question.";

/// `merge` with the context windows and the model call given: `ask(model,
/// prompt)` returns the model's text or its error.
pub fn merge_with(
    merge: Merge<'_>,
    window: impl Fn(&str) -> Option<u32>,
    mut ask: impl FnMut(&str, &str) -> Result<String, String>,
) -> Result<Merged, Vec<(String, String)>> {
    let Merge {
        question,
        answers,
        synthesizers,
        instructions,
        context,
        reply_tokens,
    } = merge;
    let mut cut_note = None;
    let (found, errors) = crate::first_success(synthesizers, |model| {
        let texts: Vec<&str> = answers.iter().map(|(_, t)| t.as_str()).collect();
        let headings: Vec<&str> = answers.iter().map(|(h, _)| h.as_str()).collect();
        let mut parts = vec![instructions, question, context, MERGE_CLOSING];
        parts.extend(headings);
        let room = crate::Room::new(window(model), &parts, reply_tokens);
        let fitted = crate::fit(&texts, room)
            .map_err(|small| format!("too small for the answers: {small}"))?;
        cut_note = fitted
            .cut
            .map(|c| format!("To fit {model}'s context window, {c}."));
        let mut prompt = format!("Question:\n{question}\n\n");
        if !context.is_empty() {
            prompt.push_str(context.trim());
            prompt.push_str("\n\n");
        }
        for ((heading, _), text) in answers.iter().zip(&fitted.texts) {
            prompt.push_str(&format!("--- {heading} ---\n{}\n\n", text.trim()));
        }
        prompt.push_str(MERGE_CLOSING);
        ask(model, &prompt)
    });
    match found {
        Some((model, text)) => {
            let mut notes = crate::fallback_notes("Synthesizer", &errors, Some(&model));
            notes.extend(cut_note);
            Ok(Merged { model, text, notes })
        }
        None => Err(errors),
    }
}

/// `texts` fitted to `model`'s context window, sent along with `parts`
/// (system prompt, question, instructions) and a reply of at most
/// `reply_tokens`: for strategies that show answers to several models
/// (judges, rankers, debaters), each with its own window.
pub fn fit_for(
    model: &str,
    texts: &[&str],
    parts: &[&str],
    reply_tokens: Option<u32>,
) -> Result<crate::Fitted, crate::TooSmall> {
    crate::fit(
        texts,
        crate::Room::new(context_window(model), parts, reply_tokens),
    )
}

/// A plan of model ids with default sampling; the synthesizers default to
/// the first panel model.
pub fn plan(panel: Vec<String>, synthesizers: Vec<String>, notes: Vec<String>) -> Plan {
    let synthesizers = if synthesizers.is_empty() {
        panel.iter().take(1).cloned().collect()
    } else {
        synthesizers
    };
    let panel = panel
        .into_iter()
        .map(|model| Seat {
            model,
            sampling: NO_SAMPLING,
        })
        .collect();
    Plan {
        panel,
        synthesizers,
        notes,
    }
}

/// The answer when fewer than two completions answered: `none` with every
/// failure, or the lone survivor verbatim as `single` (never a synthesis).
/// `why` ends "Only M answered, so …".
pub fn too_few(completions: &[Completion], why: &str) -> Option<Answer> {
    let answered = answered(completions);
    let mut notes = failure_notes(completions);
    let (kind, text, sources) = match answered.as_slice() {
        [] => (
            AnswerKind::None,
            format!("No model answered ({} tried).", completions.len()),
            vec![],
        ),
        [(id, completion, text)] => {
            notes.insert(0, format!("Only {} answered, so {why}.", completion.model));
            (AnswerKind::Single, (*text).to_owned(), vec![*id])
        }
        _ => return None,
    };
    Some(Answer {
        kind,
        text,
        sources,
        notes,
        details: String::new(),
        tool_calls: Vec::new(),
    })
}

/// What a merge rests on and what to say about it, for `settle`.
pub struct Ending<'a> {
    /// Who merges: "synthesizer", "chairman", "aggregator".
    pub role: &'a str,
    /// The merged answers as (model, text), shown side by side if the merge failed.
    pub answers: &'a [(&'a str, &'a str)],
    /// The call ids of those answers.
    pub sources: Vec<u32>,
    pub notes: Vec<String>,
    pub details: String,
}

/// How a strategy that ends in a merge answers: the merger's text as a
/// `synthesis`, or — when every merger failed — the answers side by side
/// (`unmerged`) with each merger's own error. `headline(model)` may open
/// the notes of a synthesis.
pub fn settle(
    merge: Result<Merged, Vec<(String, String)>>,
    headline: impl FnOnce(&str) -> Option<String>,
    ending: Ending<'_>,
) -> Answer {
    let Ending {
        role,
        answers,
        sources,
        mut notes,
        details,
    } = ending;
    match merge {
        Ok(merged) => {
            if let Some(headline) = headline(&merged.model) {
                notes.insert(0, headline);
            }
            notes.extend(merged.notes);
            Answer {
                kind: AnswerKind::Synthesis,
                text: merged.text,
                sources,
                notes,
                details,
                tool_calls: Vec::new(),
            }
        }
        Err(errors) => {
            let n = answers.len();
            let headline = if errors.is_empty() {
                format!("No {role} in the plan, so the {n} answers are shown side by side.")
            } else {
                let causes: Vec<String> = errors.iter().map(|(m, e)| format!("{m}: {e}")).collect();
                format!(
                    "Every {role} failed, so the {n} answers are shown side by side. {}",
                    causes.join("; ")
                )
            };
            notes.insert(0, headline);
            Answer {
                kind: AnswerKind::Unmerged,
                text: crate::side_by_side(answers),
                sources,
                notes,
                details,
                tool_calls: Vec::new(),
            }
        }
    }
}

/// The context window the catalog gives `model`, if any.
pub fn context_window(model: &str) -> Option<u32> {
    host::models()
        .into_iter()
        .find(|m| m.id == model)
        .and_then(|m| m.context_window)
}
