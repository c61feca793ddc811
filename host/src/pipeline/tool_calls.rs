//! Tool calls through a panel: when a run's caller offered tools, the
//! panel's models may answer with calls instead of text, and the run's
//! answer is then a call for the caller to make — the panel's, agreed.
//!
//! The pipeline's synthesizer decides (`settled`, then `held`): a plugin of contract
//! 0.6 is asked first (`choose-tool-calls`) and may make the call itself,
//! answer in text, or leave it to chorus; a plugin of an older contract
//! sees the calls as text only, and chorus decides, saying so. Whoever
//! chose, a call is held to the caller's tools the same way, and when the
//! caller required a call, an answer in text gives way to chorus's rule.
//!
//! chorus's rule (`decided`), the same for every pipeline:
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
use crate::plugins::{Answer, AnswerKind, Plugin, PluginError, ToolDecision};
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

/// What every step of a decision on the panel's calls reads: the run
/// (where the choosing and repairing calls are made), the caller's
/// tools, the pipeline's synthesizer model (who chooses among split
/// proposals and repairs arguments), and the panel's answers.
#[derive(Clone, Copy)]
pub(super) struct Deciding<'a> {
    pub context: &'a RunContext,
    pub tools: &'a ToolUse,
    pub chooser: Option<&'a str>,
    pub completions: &'a [Completion],
    pub run_id: &'a str,
}

/// Who settled the run's answer before any merge.
pub(super) enum Settled {
    /// chorus made the call (held to its tool already).
    ByChorus(Answer),
    /// The strategy answered in `choose-tool-calls`: to be `held`.
    ByStrategy(Answer),
    /// Nobody yet: the synthesizer merges (and its answer is `held`);
    /// the notes say what failed on the way, if anything did.
    Merge(Vec<String>),
}

impl Deciding<'_> {
    /// Whether any answer proposed calls: only then has a strategy a call
    /// to decide on.
    pub(super) fn proposed(&self) -> bool {
        self.tools.choice != ToolChoice::None
            && self
                .completions
                .iter()
                .any(|c| c.outcome.as_ref().is_ok_and(|r| !r.tool_calls.is_empty()))
    }

    /// What becomes of the panel's calls before the merge. `decision` is what
    /// `synthesizer` made of them: `None` when its contract has no say (before
    /// 0.6).
    pub(super) async fn settled(
        self,
        synthesizer: &Plugin,
        decision: Result<Option<ToolDecision>, PluginError>,
    ) -> Result<Settled, RunError> {
        let name = &synthesizer.name;
        let mut failed = None;
        let gave_way = match decision {
            Ok(Some(ToolDecision::Merge)) => return Ok(Settled::Merge(Vec::new())),
            Ok(Some(ToolDecision::Answer(answer))) => return Ok(Settled::ByStrategy(answer)),
            Ok(None) => format!(
                "The synthesizer `{name}` (contract {}) sees tool calls as text only: chorus chose the call.",
                synthesizer.contract
            ),
            Ok(Some(ToolDecision::ByHost)) => {
                format!("The synthesizer `{name}` left the choice of call to chorus.")
            }
            Err(error) => {
                let failure =
                    format!("The synthesizer `{name}` could not decide on the calls ({error})");
                failed = Some(format!(
                    "{failure}: by chorus's rule, the answers are merged."
                ));
                format!("{failure}: chorus chose the call.")
            }
        };
        Ok(match self.decided().await? {
            Some(mut answer) => {
                answer.notes.push(gave_way);
                Settled::ByChorus(answer)
            }
            None => Settled::Merge(failed.into_iter().collect()),
        })
    }

    /// A strategy's answer held to the caller's tools: its calls, each of an
    /// offered tool (of the named one, when the caller named one) with
    /// arguments that match (one repair round); when they cannot be made, or
    /// when the caller required a call and the strategy answered in text,
    /// chorus's rule (`decided`) gives the answer instead, and says why.
    pub(super) async fn held(self, name: &str, answer: Answer) -> Result<Answer, RunError> {
        let (tools, run_id) = (self.tools, self.run_id);
        if answer.tool_calls.is_empty() {
            let required = matches!(tools.choice, ToolChoice::Required | ToolChoice::Function(_));
            if !(required && self.proposed()) {
                return Ok(answer);
            }
            return Ok(match self.decided().await? {
                Some(mut call) => {
                    call.notes.push(format!(
                            "The caller required a tool call and the synthesizer `{name}` answered in text: chorus chose the call."
                        ));
                    call
                }
                // No call chorus could make either (none was of a tool offered).
                None => answer,
            });
        }
        let tool = answer.tool_calls[0].name.clone();
        let what = match self.strategy_calls(name, answer).await? {
            Ok(answer) => return Ok(answer),
            Err(what) => what,
        };
        // The strategy meant a call: chorus makes the most proposed one.
        let mut must = tools.clone();
        if must.choice == ToolChoice::Auto {
            must.choice = ToolChoice::Required;
        }
        let must = Deciding {
            tools: &must,
            ..self
        };
        match must.decided().await? {
            Some(mut answer) => {
                answer.notes.push(format!(
                    "The synthesizer `{name}` {what}: chorus chose the call."
                ));
                Ok(answer)
            }
            None => Err(RunError::ToolCall(BadCall {
                tool,
                problems: vec![Problem {
                    at: String::new(),
                    what: format!("the synthesizer `{name}` {what}"),
                }],
                repair: "no answer of the panel proposed a call chorus could make instead"
                    .to_owned(),
                run_id: run_id.to_owned(),
            })),
        }
    }

    /// The calls a strategy answered with, held to the caller's tools: the
    /// run's answer, or (`Err`) why they cannot be made.
    async fn strategy_calls(
        self,
        name: &str,
        answer: Answer,
    ) -> Result<Result<Answer, String>, RunError> {
        let Deciding {
            tools,
            chooser,
            completions,
            ..
        } = self;
        if let Some(call) = answer
            .tool_calls
            .iter()
            .find(|c| tools.tool(&c.name).is_none())
        {
            return Ok(Err(format!(
                "called `{}`, which was not offered",
                call.name
            )));
        }
        match &tools.choice {
            ToolChoice::None => {
                return Ok(Err(
                    "made a call where the caller asked for none (tool_choice none)".to_owned(),
                ));
            }
            ToolChoice::Function(only) => {
                if let Some(call) = answer.tool_calls.iter().find(|c| &c.name != only) {
                    return Ok(Err(format!(
                        "called `{}` where the caller asked for `{only}`",
                        call.name
                    )));
                }
            }
            ToolChoice::Auto | ToolChoice::Required => {}
        }
        let answered: Vec<&Completion> = completions.iter().filter(|c| c.outcome.is_ok()).collect();
        let (proposals, _) = proposals_of(tools, &answered);
        let mut calls = answer.tool_calls;
        for call in &mut calls {
            if call.id.trim().is_empty() {
                call.id = proposals
                    .iter()
                    .flat_map(|p| p.calls)
                    .find(|p| p.name == call.name && p.arguments == call.arguments)
                    .map_or_else(new_call_id, |p| p.id.clone());
            }
        }
        let why = match answer.text.trim() {
            "" => format!("the synthesizer `{name}` chose it."),
            said => format!("the synthesizer `{name}` chose it: {said}"),
        };
        let choice = Choice {
            calls,
            sources: answer.sources,
            why,
        };
        let repairer = chooser
            .or_else(|| proposals.first().map(|p| p.model))
            .unwrap_or_default()
            .to_owned();
        self.made(choice, &proposals, &repairer, answer.notes, answer.details)
            .await
            .map(Ok)
    }

    /// The answer when the panel agreed on calling tools, `None` when the
    /// answer is to be text (merged as ever, from `as_text`'s answers).
    pub(super) async fn decided(self) -> Result<Option<Answer>, RunError> {
        let Deciding {
            tools,
            chooser,
            completions,
            ..
        } = self;
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
        let choice = if leader.len() * 2 > proposals.len() {
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
            self.chosen_by(&proposals, leader, distinct, &mut notes)
                .await
        };
        let repairer = chooser.unwrap_or(leader[0].model).to_owned();
        self.made(choice, &proposals, &repairer, notes, None)
            .await
            .map(Some)
    }

    /// The run's answer of `choice`: one call when the caller allows no more,
    /// each call held to its tool (`repairer` repairs), and what was proposed,
    /// chosen and why in its details (beside a strategy's own, if any).
    async fn made(
        self,
        mut choice: Choice,
        proposals: &[Proposal<'_>],
        repairer: &str,
        mut notes: Vec<String>,
        details: Option<Value>,
    ) -> Result<Answer, RunError> {
        let tools = self.tools;
        if tools.parallel == Some(false) && choice.calls.len() > 1 {
            notes.push(format!(
                "parallel_tool_calls is false: only the first of {} calls is made.",
                choice.calls.len()
            ));
            choice.calls.truncate(1);
        }
        for call in &mut choice.calls {
            if let Some((fixed, id)) = self.held_to_tool(call, repairer).await? {
                notes.push(format!(
                    "The arguments of `{}` did not match its parameters; {repairer} corrected them.",
                    call.name
                ));
                choice.sources.extend(id);
                *call = fixed;
            }
        }
        notes.push(format!("The answer is a tool call: {}", choice.why));
        let decision = json!({
            "proposed": proposals.iter().map(|p| json!({
                "model": p.model,
                "call": p.id,
                "calls": p.calls,
            })).collect::<Vec<_>>(),
            "chosen": choice.calls,
            "why": choice.why,
        });
        let details = match details {
            Some(Value::Object(mut own)) => {
                own.insert("tool_calls".to_owned(), decision);
                Value::Object(own)
            }
            Some(other) => json!({"strategy": other, "tool_calls": decision}),
            None => json!({"tool_calls": decision}),
        };
        Ok(Answer {
            kind: AnswerKind::ToolCall,
            text: said(&choice.calls),
            sources: choice.sources,
            notes,
            details: Some(details),
            tool_calls: choice.calls,
        })
    }

    /// No proposal has a majority: the synthesizer model `chooser` makes the
    /// call, seeing them all; without one, or when it cannot (it fails, makes
    /// no call, or calls a tool not offered), the first of the most proposed.
    async fn chosen_by(
        self,
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
        let Some(model) = self.chooser else {
            return first_of_most(format!(
                "no proposal had a majority, and no synthesizer model could choose: the first of the most proposed ({}).",
                models(leader)
            ));
        };
        let Deciding { context, tools, .. } = self;
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

    /// `call` (of a tool offered: `proposals_of` and `chosen_by` keep no
    /// other) held to its tool: `None` when it matches; the corrected call
    /// (and the repair's call id) when `model` repaired it; else the run's
    /// error.
    async fn held_to_tool(
        self,
        call: &ToolCall,
        model: &str,
    ) -> Result<Option<(ToolCall, Option<u32>)>, RunError> {
        let Deciding {
            context,
            tools,
            run_id,
            ..
        } = self;
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
                format!(
                    "{model} was asked once to repair it, and its arguments do not match either"
                ),
            ));
        }
        fixed.id.clone_from(&call.id);
        Ok(Some((fixed, repair.id)))
    }
}

/// An id for a call whose maker gave it none.
fn new_call_id() -> String {
    format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..24])
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
