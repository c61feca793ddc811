//! Tool calls through a panel: when a run's caller offered tools, the
//! panel's models may answer with calls instead of text, and the run's
//! answer is then a call for the caller to make — the panel's, agreed.
//!
//! The decision is chorus's, the same for every pipeline (strategies of
//! contract 0.5 and older see text only, and the result says which did not
//! take part):
//!
//! - the answer is a call when a majority of the panel's answers propose
//!   calls (`tool_choice: "required"` or a named function: when any does);
//!   else the proposals are handed to the synthesizer as text, and the
//!   answer is merged as ever;
//! - equal proposals (the same functions, arguments equal as JSON once
//!   keys are sorted) are one vote; a proposal with a strict majority of
//!   the votes is the answer, else the pipeline's synthesizer model is
//!   shown them all and makes the call (and may correct arguments);
//! - a call's arguments must parse and match its tool's parameter schema:
//!   one repair round by the synthesizer model, else the run fails naming
//!   the tool and what does not match.
//!
//! What was proposed, what was chosen and why is the answer's `details`
//! (`tool_calls`), kept with the run; the doors read the chosen calls
//! from there (`chosen`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::RunError;
use super::context::RunContext;
use super::structured::{Problem, canonical, list};
use crate::llm::tools::{ToolCall, ToolChoice, ToolUse};
use crate::llm::{ChatRequest, Completion, Message};
use crate::plugins::{Answer, AnswerKind};
use crate::record::RunRecord;

/// The stage the choosing and repairing calls are recorded under.
const STAGE: &str = "chorus";

/// A call whose arguments do not match its tool, after the repair round.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the tool call `{tool}` does not match the tool's parameters: {}; {repair}. The run's calls are kept: `chorus runs show {run_id}` shows each proposal",
    list(.problems, "; ")
)]
pub struct BadCall {
    pub tool: String,
    pub problems: Vec<Problem>,
    pub repair: String,
    pub run_id: String,
}

/// One model's proposal: its calls, and the call id of its answer.
struct Proposal<'a> {
    id: u32,
    model: &'a str,
    calls: &'a [ToolCall],
    key: String,
}

/// The answer when the panel agreed on calling tools, `None` when the
/// answer is to be text (merged as ever, from `as_text`'s answers).
pub(super) async fn decided(
    context: &RunContext,
    tools: &ToolUse,
    chooser: Option<&str>,
    completions: &[Completion],
    run_id: &str,
) -> Result<Option<Answer>, RunError> {
    let answered: Vec<&Completion> = completions.iter().filter(|c| c.outcome.is_ok()).collect();
    let (proposals, unoffered) = proposals_of(tools, &answered);
    let calling = match tools.choice {
        ToolChoice::None => false,
        ToolChoice::Auto => proposals.len() * 2 > answered.len(),
        ToolChoice::Required | ToolChoice::Function(_) => !proposals.is_empty(),
    };
    if !calling {
        return Ok(None);
    }
    let mut notes = vec![format!(
        "{} of {} answers proposed tool calls (tool_choice {}).",
        proposals.len(),
        answered.len(),
        choice_name(&tools.choice)
    )];
    notes.extend(unoffered.into_iter().map(|u| format!("Not counted: {u}.")));
    let ranked = ranked(&proposals);
    let leader = ranked[0].as_slice();
    let mut choice = if leader.len() * 2 > proposals.len() {
        Choice {
            calls: leader[0].calls.to_vec(),
            sources: leader.iter().map(|p| p.id).collect(),
            why: format!(
                "{} of {} proposals agree ({}).",
                leader.len(),
                proposals.len(),
                models(leader)
            ),
        }
    } else {
        let distinct = ranked.len();
        chosen_by(
            context, tools, chooser, &proposals, leader, distinct, &mut notes,
        )
        .await
    };
    if tools.parallel == Some(false) && choice.calls.len() > 1 {
        notes.push(format!(
            "parallel_tool_calls is false: only the first of {} calls is made.",
            choice.calls.len()
        ));
        choice.calls.truncate(1);
    }
    let repairer = chooser.unwrap_or(leader[0].model).to_owned();
    for call in &mut choice.calls {
        if let Some((fixed, id)) = held_to_tool(context, tools, call, &repairer, run_id).await? {
            notes.push(format!(
                "The arguments of `{}` did not match its parameters; {repairer} corrected them.",
                call.name
            ));
            choice.sources.extend(id);
            *call = fixed;
        }
    }
    notes.push(format!("The answer is a tool call: {}", choice.why));
    let details = json!({"tool_calls": {
        "proposed": proposals.iter().map(|p| json!({
            "model": p.model,
            "call": p.id,
            "calls": p.calls,
        })).collect::<Vec<_>>(),
        "chosen": choice.calls,
        "why": choice.why,
    }});
    Ok(Some(Answer {
        kind: AnswerKind::ToolCall,
        text: said(&choice.calls),
        sources: choice.sources,
        notes,
        details: Some(details),
    }))
}

/// The calls a run's answer will be, what it rests on, and why.
struct Choice {
    calls: Vec<ToolCall>,
    sources: Vec<u32>,
    why: String,
}

/// The answers that propose calls, each a vote; and, said, the answers
/// that call a tool the caller did not offer (a model's output is not the
/// caller's word: they are no vote).
fn proposals_of<'a>(
    tools: &ToolUse,
    answered: &[&'a Completion],
) -> (Vec<Proposal<'a>>, Vec<String>) {
    let mut unoffered = Vec::new();
    let proposals = answered
        .iter()
        .filter_map(|c| {
            let reply = c.outcome.as_ref().ok()?;
            if reply.tool_calls.is_empty() {
                return None;
            }
            if let Some(call) = reply
                .tool_calls
                .iter()
                .find(|t| tools.tool(&t.name).is_none())
            {
                unoffered.push(format!(
                    "{} called `{}`, which was not offered",
                    c.model, call.name
                ));
                return None;
            }
            Some(Proposal {
                id: c.id.unwrap_or_default(),
                model: &c.model,
                calls: &reply.tool_calls,
                key: key_of(&reply.tool_calls),
            })
        })
        .collect();
    (proposals, unoffered)
}

/// Equal proposals grouped, most votes first; among equals, the one
/// proposed first.
fn ranked<'p, 'a>(proposals: &'p [Proposal<'a>]) -> Vec<Vec<&'p Proposal<'a>>> {
    let mut votes: BTreeMap<&str, Vec<&Proposal>> = BTreeMap::new();
    for proposal in proposals {
        votes.entry(&proposal.key).or_default().push(proposal);
    }
    let mut ranked: Vec<Vec<&Proposal>> = votes.into_values().collect();
    ranked.sort_by_key(|group| (std::cmp::Reverse(group.len()), group[0].id));
    ranked
}

/// No proposal has a majority: the synthesizer model `chooser` makes the
/// call, seeing them all; without one, or when it cannot (it fails, makes
/// no call, or calls a tool not offered), the first of the most proposed.
async fn chosen_by(
    context: &RunContext,
    tools: &ToolUse,
    chooser: Option<&str>,
    proposals: &[Proposal<'_>],
    leader: &[&Proposal<'_>],
    distinct: usize,
    notes: &mut Vec<String>,
) -> Choice {
    let first_of_most = |why: String| Choice {
        calls: leader[0].calls.to_vec(),
        sources: leader.iter().map(|p| p.id).collect(),
        why,
    };
    let Some(model) = chooser else {
        return first_of_most(format!(
            "no proposal had a majority, and no synthesizer model could choose: the first of the most proposed ({}).",
            models(leader)
        ));
    };
    let choosing = choosing_request(model, tools, proposals, context);
    let made = context.fan_out(STAGE, vec![choosing]).await.pop();
    let failed = match made.as_ref().map(|c| (c.id, &c.outcome)) {
        Some((id, Ok(reply))) if !reply.tool_calls.is_empty() => {
            match reply
                .tool_calls
                .iter()
                .find(|c| tools.tool(&c.name).is_none())
            {
                None => {
                    return Choice {
                        calls: reply.tool_calls.clone(),
                        sources: id.into_iter().collect(),
                        why: format!(
                            "no proposal had a majority ({distinct} distinct among {}); {model} chose among them.",
                            proposals.len()
                        ),
                    };
                }
                Some(call) => format!("it called `{}`, which was not offered", call.name),
            }
        }
        Some((_, Err(failure))) => failure.to_string(),
        _ => "it made no call".to_owned(),
    };
    notes.push(format!(
        "{model} was asked to choose among the proposals and could not ({failed}): the first of the most proposed is made."
    ));
    first_of_most(format!(
        "no proposal had a majority; the first of the most proposed ({}).",
        models(leader)
    ))
}

/// The panel's answers as text for a merge: a proposal's calls are said
/// in words after whatever text it wrote, so the synthesizer sees them.
pub(super) fn as_text(mut completions: Vec<Completion>) -> Vec<Completion> {
    for completion in &mut completions {
        if let Ok(reply) = &mut completion.outcome
            && !reply.tool_calls.is_empty()
        {
            let text = format!("{}\n\n{}", reply.content.trim(), said(&reply.tool_calls));
            reply.content = Arc::new(text.trim_start().to_owned());
        }
    }
    completions
}

/// The calls a run's answer is, when it is one (`AnswerKind::ToolCall`).
pub fn chosen(record: &RunRecord) -> Vec<ToolCall> {
    record
        .details
        .as_ref()
        .and_then(|d| d.pointer("/tool_calls/chosen"))
        .and_then(|calls| serde_json::from_value(calls.clone()).ok())
        .unwrap_or_default()
}

/// Calls in words, one line each.
fn said(calls: &[ToolCall]) -> String {
    calls
        .iter()
        .map(|c| format!("Call `{}` with {}.", c.name, c.arguments))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A proposal's calls as a vote: names and canonical arguments, in order,
/// without the ids a model made up.
fn key_of(calls: &[ToolCall]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            let arguments =
                canonical(&c.arguments).unwrap_or_else(|| c.arguments.trim().to_owned());
            json!([c.name, arguments])
        })
        .collect();
    Value::Array(calls).to_string()
}

fn models(group: &[&Proposal]) -> String {
    group.iter().map(|p| p.model).collect::<Vec<_>>().join(", ")
}

fn choice_name(choice: &ToolChoice) -> String {
    match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Function(name) => format!("`{name}`"),
    }
}

/// The call that asks `model` to choose among the proposals: it sees the
/// question's exchange and tools, and the proposals as a list.
fn choosing_request(
    model: &str,
    tools: &ToolUse,
    proposals: &[Proposal],
    context: &RunContext,
) -> ChatRequest {
    let listed: Vec<String> = proposals
        .iter()
        .map(|p| format!("- {}: {}", p.model, said(p.calls).replace('\n', " ")))
        .collect();
    let mut use_ = tools.clone();
    if use_.choice == ToolChoice::Auto {
        use_.choice = ToolChoice::Required;
    }
    let mut request = ChatRequest::plain(
        "tool choice",
        model,
        vec![
            Message::system(
                "Several assistants proposed tool calls for the same request. Make the call (or \
                 calls) that best serve the request: choose among theirs, and correct the \
                 arguments where they are wrong.",
            ),
            Message::user(format!(
                "The request:\n\n{}\n\nThe proposals:\n{}",
                context.question().unwrap_or_default(),
                listed.join("\n")
            )),
        ],
    );
    request.tools = Some(Arc::new(use_));
    request
}

/// `call` (of a tool offered: `proposals_of` and `chosen_by` keep no
/// other) held to its tool: `None` when it matches; the corrected call
/// (and the repair's call id) when `model` repaired it; else the run's
/// error.
async fn held_to_tool(
    context: &RunContext,
    tools: &ToolUse,
    call: &ToolCall,
    model: &str,
    run_id: &str,
) -> Result<Option<(ToolCall, Option<u32>)>, RunError> {
    let problems = match problems_of(tools, call) {
        None => return Ok(None),
        Some(problems) => problems,
    };
    let failed = |problems: Vec<Problem>, repair: String| {
        RunError::ToolCall(BadCall {
            tool: call.name.clone(),
            problems,
            repair,
            run_id: run_id.to_owned(),
        })
    };
    let mut use_ = tools.clone();
    use_.choice = ToolChoice::Function(call.name.clone());
    use_.parallel = Some(false);
    let mut request = ChatRequest::plain(
        "tool repair",
        model,
        vec![Message::user(format!(
            "This call of `{}` has arguments that do not match its parameters:\n\n{}\n\nWhat \
             does not match:\n- {}\n\nMake the call again, with corrected arguments.",
            call.name,
            call.arguments,
            list(&problems, "\n- ")
        ))],
    );
    request.tools = Some(Arc::new(use_));
    let Some(repair) = context.fan_out(STAGE, vec![request]).await.pop() else {
        return Err(failed(problems, "the repair call was not made".to_owned()));
    };
    let fixed = match &repair.outcome {
        Ok(reply) => reply
            .tool_calls
            .iter()
            .find(|c| c.name == call.name)
            .cloned(),
        Err(failure) => {
            return Err(failed(
                problems,
                format!("the repair asked of {model} failed: {failure}"),
            ));
        }
    };
    let Some(mut fixed) = fixed else {
        return Err(failed(
            problems,
            format!(
                "{model} was asked once to repair it, and made no call of `{}`",
                call.name
            ),
        ));
    };
    if let Some(still) = problems_of(tools, &fixed) {
        return Err(failed(
            still,
            format!("{model} was asked once to repair it, and its arguments do not match either"),
        ));
    }
    fixed.id.clone_from(&call.id);
    Ok(Some((fixed, repair.id)))
}

/// What does not match in `call`, `None` when it does.
fn problems_of(tools: &ToolUse, call: &ToolCall) -> Option<Vec<Problem>> {
    let Some(tool) = tools.tool(&call.name) else {
        let offered: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
        return Some(vec![Problem {
            at: String::new(),
            what: format!(
                "no tool `{}` was offered (offered: {})",
                call.name,
                offered.join(", ")
            ),
        }]);
    };
    let arguments: Value = match serde_json::from_str(call.arguments.trim()) {
        Ok(arguments) => arguments,
        Err(e) => {
            return Some(vec![Problem {
                at: String::new(),
                what: format!("its arguments are not JSON ({e})"),
            }]);
        }
    };
    let validator = match jsonschema::validator_for(&tool.parameters) {
        Ok(validator) => validator,
        // Checked when the request was read; a schema that does not
        // compile checks nothing.
        Err(_) => return None,
    };
    let problems: Vec<Problem> = validator
        .iter_errors(&arguments)
        .take(8)
        .map(|e| Problem {
            at: e.instance_path().to_string(),
            what: e.to_string(),
        })
        .collect();
    (!problems.is_empty()).then_some(problems)
}
