//! Synthesizer for a cascade: the first stage (the `cascade-first`
//! prompter) is one model's answer and a cheap model's check, each with a
//! stated confidence. If the check agrees (the same answer, or the check
//! model judges the two to agree: `agreement`) and the answer is confident
//! enough, that answer is returned verbatim and the panel is never asked.
//! Otherwise — disagreement, low or missing-check confidence, a failed
//! call — the rest of the plan's panel answers through `host.complete` and
//! every answer is merged as `synthesize` does. The result says whether it
//! escalated and why, and what it spent against the full panel (every
//! seat plus a merge).
//!
//! ```toml
//! [plugins.cascade.settings]
//! min_confidence = 0.7   # the answer's stated confidence below this escalates (0-1)
//! judge_agreement = true # the check model judges differently-worded answers (one short call)
//! agreement = 0.5        # without a judge's verdict: word overlap below this, or different
//!                        # numbers, count as disagreement (0-1)
//! instructions = "..."   # replaces the merge's instructions
//! max_tokens = 4096      # for the merge
//! ```

mod agreement;

kit::plugin!(synthesizer, Cascade);

use kit::adaptive::{Account, Spend};
use kit::wit::host;
use kit::wit::types::{Answer, AnswerKind, Completion, Plan, Request, Role, Sampling, Seat};
use serde::Deserialize;
use serde_json::{Value, json};

/// The labels the `cascade-first` prompter gives its calls.
const ANSWER: &str = "cascade: answer";
const CHECK: &str = "cascade: check";

const MERGE: &str = "You are given a question and several independent answers to it from \
different AI models, which do not all agree. Write the single best answer to the question: keep \
what the answers agree on, resolve their disagreements by reasoning about which is right, add \
anything important that only one of them noticed, and drop what is wrong. Answer the question \
directly; do not mention the other answers or that you are synthesizing.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    min_confidence: Option<f64>,
    judge_agreement: Option<bool>,
    agreement: Option<f64>,
    instructions: Option<String>,
    max_tokens: Option<u32>,
}

struct Cascade;

/// One first-stage reply: its call, its text without the confidence line,
/// the confidence it stated.
struct Stage1<'a> {
    completion: &'a Completion,
    text: Result<String, String>,
    confidence: Option<f64>,
}

impl<'a> Stage1<'a> {
    fn read(completion: &'a Completion) -> Self {
        let text = kit::guest::text_of(completion);
        let (text, confidence) = match text {
            Ok(text) => match kit::adaptive::stated_confidence(&text) {
                Some((confidence, rest)) if !rest.trim().is_empty() => (Ok(rest), Some(confidence)),
                _ => (Ok(text), None),
            },
            Err(e) => (Err(e), None),
        };
        Self {
            completion,
            text,
            confidence,
        }
    }

    fn model(&self) -> &str {
        &self.completion.model
    }

    fn details(&self) -> Value {
        json!({
            "model": self.completion.model,
            "call": self.completion.id,
            "answered": self.text.is_ok(),
            "confidence": self.confidence,
        })
    }
}

impl Guest for Cascade {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String> {
        let settings = parse(&settings)?;
        let min_confidence = settings.min_confidence.unwrap_or(0.7);
        let threshold = settings.agreement.unwrap_or(0.5);
        let by_label = |label: &str| completions.iter().find(|c| c.label == label);
        // Lenient with other prompters: the first call answers, the second checks.
        let Some(first) = by_label(ANSWER).or(completions.first()) else {
            return Err("the first stage made no calls".into());
        };
        let answer = Stage1::read(first);
        let check = by_label(CHECK)
            .or_else(|| completions.iter().find(|c| c.id != first.id))
            .map(Stage1::read);

        let mut reasons = Vec::new();
        let mut notes = Vec::new();
        if let Err(error) = &answer.text {
            reasons.push(format!("{} did not answer ({error})", answer.model()));
        }
        let mut agreement = None;
        match &check {
            None => notes.push("No check model: only the stated confidence was checked.".into()),
            Some(check) => match (&answer.text, &check.text) {
                (_, Err(error)) => {
                    reasons.push(format!("the check by {} failed ({error})", check.model()))
                }
                (Ok(a), Ok(b)) => {
                    let verdict = agreement::decide(&agreement::Compare {
                        question: &request.prompt,
                        answer: a,
                        check: b,
                        judge: settings
                            .judge_agreement
                            .unwrap_or(true)
                            .then(|| check.model()),
                        threshold,
                    });
                    notes.extend(verdict.fallback.clone());
                    if !verdict.agree {
                        reasons.push(format!(
                            "{} disagrees with {} ({})",
                            check.model(),
                            answer.model(),
                            verdict.why
                        ));
                    } else if let agreement::By::Judge { model, .. } = &verdict.by {
                        notes.push(format!(
                            "{model} judged the two answers to agree: {}",
                            verdict.why
                        ));
                    }
                    agreement = Some(verdict);
                }
                (Err(_), Ok(_)) => {}
            },
        }
        if answer.text.is_ok() {
            match answer.confidence {
                Some(c) if c < min_confidence => reasons.push(format!(
                    "{} stated {} confidence, below {}",
                    answer.model(),
                    percent(c),
                    percent(min_confidence)
                )),
                Some(_) => {}
                None if check.is_none() => reasons.push(format!(
                    "there is no check model and {} stated no confidence",
                    answer.model()
                )),
                None => notes.push(format!(
                    "{} stated no confidence; the check alone decided.",
                    answer.model()
                )),
            }
        }

        let mut first_stage = Spend::default();
        first_stage.add_completions(&completions);
        first_stage.add_completions(agreement.as_ref().and_then(|v| v.judged.as_ref()));
        let full_calls = u32::try_from(plan.panel.len() + 1).unwrap_or(u32::MAX);
        let stage = json!({
            "answer": answer.details(),
            "check": check.as_ref().map(Stage1::details),
            "agreement": agreement.as_ref().map(|v| (v.overlap * 1000.0).round() / 1000.0),
            "agreement_verdict": agreement.as_ref().map(agreement::Verdict::details),
            "min_confidence": min_confidence,
            "agreement_threshold": threshold,
        });

        if reasons.is_empty() {
            let account = Account::new(
                first_stage,
                full_calls,
                full_cost(&plan, completions.iter()),
            );
            let text = answer.text.clone().unwrap_or_default();
            let confidence = answer.confidence.map_or(String::new(), |c| {
                format!(", stated confidence {}", percent(c))
            });
            let why = match &check {
                Some(check) => format!("{}'s check agreed with", check.model()),
                None => "no check model, but confidence enough in".to_owned(),
            };
            notes.splice(
                0..0,
                [
                    format!(
                        "Cascade: not escalated — {why} {}'s answer{confidence}, so the panel \
                         was not asked.",
                        answer.model()
                    ),
                    account.sentence(),
                ],
            );
            return Ok(Answer {
                kind: AnswerKind::Pick,
                text,
                sources: [
                    Some(answer.completion),
                    check.as_ref().map(|c| c.completion),
                ]
                .into_iter()
                .flatten()
                .filter_map(|c| c.id)
                .collect(),
                notes,
                details: details(false, &reasons, stage, &[], &account),
                tool_calls: Vec::new(),
            });
        }
        Ok(escalate(
            &request,
            &plan,
            &completions,
            Escalation {
                settings: &settings,
                reasons,
                notes,
                stage,
                first_stage,
                full_calls,
            },
        ))
    }
}

/// What the first stage found, carried into the escalation.
struct Escalation<'a> {
    settings: &'a Settings,
    reasons: Vec<String>,
    notes: Vec<String>,
    stage: Value,
    first_stage: Spend,
    full_calls: u32,
}

/// Asks the rest of the panel, then merges every answer like `synthesize`.
fn escalate(
    request: &Request,
    plan: &Plan,
    first: &[Completion],
    escalation: Escalation<'_>,
) -> Answer {
    let Escalation {
        settings,
        reasons,
        mut notes,
        stage,
        first_stage,
        full_calls,
    } = escalation;
    let rest = rest_of_panel(plan, first);
    let budget = host::budget();
    // One call is kept for the merge.
    let affordable = (budget.calls_left.saturating_sub(1) as usize).min(rest.len());
    let slowest = first
        .iter()
        .filter(|c| c.outcome.is_ok())
        .map(|c| u64::from(c.latency_ms))
        .max()
        .unwrap_or(0);
    let asked: Vec<&Seat> = if slowest >= budget.time_left_ms {
        notes.push(format!(
            "Too little time was left before the run's deadline to ask the other {} panel models.",
            rest.len()
        ));
        Vec::new()
    } else {
        if affordable < rest.len() {
            notes.push(format!(
                "The run's call budget allowed only {affordable} of the other {} panel models.",
                rest.len()
            ));
        }
        rest.into_iter().take(affordable).collect()
    };
    let requests: Vec<_> = asked
        .iter()
        .map(|seat| {
            kit::guest::request(
                "panel",
                &seat.model,
                vec![kit::guest::message(Role::User, request.prompt.clone())],
                seat.sampling,
            )
        })
        .collect();
    let mut all: Vec<Completion> = first.to_vec();
    if !requests.is_empty() {
        host::progress(&format!(
            "escalating: asking {} more panel models",
            requests.len()
        ));
        all.extend(host::complete(&requests));
    }
    let asked_models: Vec<&str> = asked.iter().map(|s| s.model.as_str()).collect();
    let mut spent = first_stage;
    spent.add_completions(&all[first.len()..]);

    let headline = format!(
        "Cascade: escalated to the panel because {}.",
        reasons.join("; ")
    );
    notes.extend(kit::guest::failure_notes(&all));
    // The answers without their confidence lines: what the merge reads.
    let answered: Vec<(u32, &Completion, String)> = kit::guest::answered(&all)
        .into_iter()
        .map(|(id, c, text)| {
            let text = match kit::adaptive::stated_confidence(text) {
                Some((_, rest)) if !rest.trim().is_empty() => rest,
                _ => text.to_owned(),
            };
            (id, c, text)
        })
        .collect();
    if answered.len() < 2 {
        let account = Account::new(spent, full_calls, full_cost(plan, all.iter()));
        let mut answer = kit::guest::too_few(&all, "this is its answer verbatim, not a synthesis")
            .expect("fewer than two answers");
        if let (AnswerKind::Single, Some((_, _, text))) = (answer.kind, answered.first()) {
            answer.text = text.clone();
        }
        answer.notes.splice(0..0, [headline, account.sentence()]);
        answer.details = details(true, &reasons, stage, &asked_models, &account);
        return answer;
    }

    let inputs: Vec<(String, String)> = answered
        .iter()
        .enumerate()
        .map(|(n, (_, _, text))| (format!("Answer {}", n + 1), text.clone()))
        .collect();
    let instructions = settings.instructions.as_deref().unwrap_or(MERGE);
    let sampling = Sampling {
        max_tokens: settings.max_tokens,
        ..kit::guest::NO_SAMPLING
    };
    let mut merging = Spend::default();
    let mut merged: Vec<Completion> = Vec::new();
    let merge = kit::guest::merge_with(
        kit::guest::Merge {
            question: &request.prompt,
            answers: &inputs,
            synthesizers: &plan.synthesizers,
            instructions,
            context: "",
            reply_tokens: settings.max_tokens,
        },
        kit::guest::context_window,
        |model, prompt| {
            host::progress(&format!("merging {} answers with {model}", inputs.len()));
            let messages = vec![
                kit::guest::message(Role::System, instructions),
                kit::guest::message(Role::User, prompt),
            ];
            // The merge is the answer: it streams where the run does.
            let outcome = [host::complete_answer(&kit::guest::request(
                "synthesis",
                model,
                messages,
                sampling,
            ))];
            merging.add_completions(&outcome);
            merged.extend(outcome.iter().cloned());
            outcome.first().map_or_else(
                || Err("the host returned no outcome".into()),
                kit::guest::text_of,
            )
        },
    );
    spent.calls += merging.calls;
    spent.cost += merging.cost;
    spent.priced += merging.priced;
    let account = Account::new(
        spent,
        full_calls,
        full_cost(plan, all.iter().chain(&merged)),
    );
    notes.splice(0..0, [headline, account.sentence()]);
    let count = answered.len();
    let pairs: Vec<(&str, &str)> = answered
        .iter()
        .map(|(_, c, t)| (c.model.as_str(), t.as_str()))
        .collect();
    kit::guest::settle(
        merge,
        |model| Some(format!("Synthesis of {count} answers by {model}.")),
        kit::guest::Ending {
            role: "synthesizer",
            answers: &pairs,
            sources: answered.iter().map(|(id, _, _)| *id).collect(),
            notes,
            details: details(true, &reasons, stage, &asked_models, &account),
        },
    )
}

/// What the full panel would have cost: every seat, and a merge by the
/// first synthesizer, priced from the calls `made` (see
/// `kit::adaptive::full_panel_cost`).
fn full_cost<'a>(plan: &Plan, made: impl Iterator<Item = &'a Completion>) -> Option<f64> {
    let full: Vec<&str> = plan
        .panel
        .iter()
        .map(|seat| seat.model.as_str())
        .chain(plan.synthesizers.first().map(String::as_str))
        .collect();
    let made: Vec<Completion> = made.cloned().collect();
    kit::adaptive::full_panel_cost(&full, &made, &host::models())
}

/// The panel's seats not asked in the first stage (a model asked there
/// uses up one of its seats).
fn rest_of_panel<'a>(plan: &'a Plan, first: &[Completion]) -> Vec<&'a Seat> {
    let mut asked: Vec<&str> = first.iter().map(|c| c.model.as_str()).collect();
    plan.panel
        .iter()
        .filter(|seat| match asked.iter().position(|m| *m == seat.model) {
            Some(at) => {
                asked.remove(at);
                false
            }
            None => true,
        })
        .collect()
}

fn details(
    escalated: bool,
    reasons: &[String],
    stage: Value,
    asked: &[&str],
    account: &Account,
) -> String {
    json!({
        "escalated": escalated,
        "reasons": reasons,
        "first_stage": stage,
        "escalated_to": asked,
        "spend": account.details(),
    })
    .to_string()
}

fn percent(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    let settings: Settings = kit::settings(
        settings,
        "optional `min_confidence`, `judge_agreement`, `agreement`, `instructions` and `max_tokens`",
    )?;
    for (key, value) in [
        ("min_confidence", settings.min_confidence),
        ("agreement", settings.agreement),
    ] {
        if let Some(value) = value
            && !(0.0..=1.0).contains(&value)
        {
            return Err(format!(
                "`{key}` is a fraction between 0 and 1 (0.7 means 70%), got {value}"
            ));
        }
    }
    if settings.max_tokens == Some(0) {
        return Err("`max_tokens` must be at least 1".into());
    }
    Ok(settings)
}
