//! `chorus ask --dry-run`: what a run would send, without calling any model.
//! The pipeline's plugins run for real; every chat completion is shown in
//! full — the fan-out's and the plugins' own (a synthesizer's merge, a
//! judge, a debate's rounds, given placeholder answers) — with its
//! worst-case cost, then the estimated total. Text on stdout, or `--json`.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::app::Chorus;
use crate::events::Event;
use crate::llm::{ChatRequest, Llm};
use crate::pipeline::worst_case_usd;
use crate::plugins::Plan;
use crate::record::{RunRecord, show_usd};

/// What the run announced: its plan and its calls, in order.
#[derive(Default)]
struct Seen {
    plan: Option<Arc<Plan>>,
    calls: Vec<(u32, Arc<str>, Arc<ChatRequest>)>,
}

/// One call as shown: the request and its worst case (or why unknown).
struct Call {
    id: u32,
    stage: Arc<str>,
    request: Arc<ChatRequest>,
    worst: Result<f64, String>,
}

pub async fn run(
    chorus: &Chorus,
    pipeline: &str,
    question: crate::pipeline::Question,
    options: Map<String, Value>,
    json: bool,
) -> ExitCode {
    let search = chorus
        .runner()
        .pipelines()
        .find(|(name, _)| *name == pipeline)
        .and_then(|(_, p)| {
            crate::pipeline::options::web_search(p, &Value::Object(options.clone()))
        });
    let seen = Arc::new(Mutex::new(Seen::default()));
    let progress = {
        let seen = seen.clone();
        Arc::new(move |event| {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            match event {
                Event::Planned(plan) => seen.plan = Some(plan),
                Event::CallStarted { id, stage, request } => {
                    seen.calls.push((id, stage, request));
                }
                _ => {}
            }
        })
    };
    let record = match chorus.dry_run(pipeline, question, options, progress).await {
        Ok(record) => record,
        Err(e) => {
            eprintln!("chorus: {e}");
            return ExitCode::FAILURE;
        }
    };
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    let runner = chorus.runner();
    let llm = &runner.llm;
    let calls: Vec<Call> = seen
        .calls
        .into_iter()
        .map(|(id, stage, request)| Call {
            worst: worst_case_usd(llm, &request).map(|usd| {
                let search = crate::pipeline::search_of_stage(search.as_ref(), &stage);
                usd + llm.search_plan(&request.model, search).usd()
            }),
            id,
            stage,
            request,
        })
        .collect();
    let selector = runner
        .pipelines()
        .find(|(name, _)| *name == pipeline)
        .map(|(_, p)| p.selector.clone())
        .unwrap_or_default();
    let out = if json {
        serde_json::to_string_pretty(&as_json(&record, seen.plan.as_deref(), &calls))
            .expect("a JSON value serializes")
    } else {
        as_text(&record, &selector, seen.plan.as_deref(), &calls, llm)
    };
    println!("{out}");
    ExitCode::SUCCESS
}

/// The sum of the known worst cases, and how many calls have none.
fn estimate(calls: &[Call]) -> (f64, usize) {
    let known: f64 = calls.iter().filter_map(|c| c.worst.as_ref().ok()).sum();
    let unknown = calls.iter().filter(|c| c.worst.is_err()).count();
    (known, unknown)
}

fn as_json(record: &RunRecord, plan: Option<&Plan>, calls: &[Call]) -> Value {
    let (known, unknown) = estimate(calls);
    json!({
        "dry_run": true,
        "pipeline": record.pipeline,
        "plan": plan,
        "calls": calls.iter().map(|c| json!({
            "id": c.id,
            "stage": &*c.stage,
            "label": c.request.label,
            "model": c.request.model,
            "messages": c.request.messages,
            "attachments": c.request.attachments.infos(),
            "sampling": c.request.sampling,
            "worst_case_usd": c.worst.as_ref().ok(),
            "worst_case_unknown": c.worst.as_ref().err(),
        })).collect::<Vec<_>>(),
        "estimated_cost_usd": {
            "at_most": known,
            "calls_with_unknown_cost": unknown,
        },
        "placeholder_answer": {
            "kind": record.kind,
            "summary": record.summary,
            "text": record.answer,
        },
        "notes": record.notes,
    })
}

fn as_text(
    record: &RunRecord,
    selector: &str,
    plan: Option<&Plan>,
    calls: &[Call],
    llm: &Llm,
) -> String {
    let mut out = format!(
        "Dry run of pipeline `{}`: no model was called; answers are placeholders.\n",
        record.pipeline
    );
    if let Some(plan) = plan {
        let seats: Vec<String> = plan
            .panel
            .iter()
            .map(|seat| seat.model.clone() + &sampling(&seat.sampling))
            .collect();
        out += &format!("\nPlan (selector `{selector}`)\n");
        out += &format!("  panel: {}\n", seats.join(", "));
        out += &format!(
            "  synthesizers, in order of preference: {}\n",
            if plan.synthesizers.is_empty() {
                "none".to_owned()
            } else {
                plan.synthesizers.join(" -> ")
            }
        );
        for note in &plan.notes {
            out += &format!("  note: {note}\n");
        }
    }
    for call in calls {
        let cost = match &call.worst {
            Ok(usd) => format!("worst case {}", show_usd(*usd)),
            Err(why) => format!("worst case unknown: {why}"),
        };
        let known = llm.model(&call.request.model).is_some();
        out += &format!(
            "\nCall {} · {} · {}{} · {:?} · {cost}\n",
            call.id,
            call.stage,
            call.request.model,
            if known { "" } else { " (not in the catalog)" },
            call.request.label,
        );
        let sampling = sampling(&call.request.sampling);
        if !sampling.is_empty() {
            out += &format!("  sampling:{sampling}\n");
        }
        for message in &call.request.messages {
            let role = serde_json::to_value(message.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            out += &format!("  [{role}]\n");
            for line in message.content.lines() {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    out += &format!("    {line}\n");
                }
            }
        }
    }
    let (known, unknown) = estimate(calls);
    out += &format!(
        "\nEstimated cost: at most {} for {} calls (each prompt, estimated, plus its max_tokens at the model's prices)",
        show_usd(known),
        calls.len()
    );
    if unknown > 0 {
        out += &format!("; {unknown} of them with no known worst case");
    }
    out += ".\n";
    out += &format!(
        "With these placeholders the result would be: {}\n",
        record.summary
    );
    for note in record
        .notes
        .iter()
        .filter(|n| plan.is_none_or(|plan| !plan.notes.contains(n)))
    {
        out += &format!("  note: {note}\n");
    }
    out.trim_end().to_owned()
}

/// ` (temperature 0.2, max_tokens 500)`, or nothing when all are defaults.
fn sampling(s: &crate::llm::Sampling) -> String {
    let mut parts = Vec::new();
    if let Some(t) = s.temperature {
        parts.push(format!("temperature {t}"));
    }
    if let Some(p) = s.top_p {
        parts.push(format!("top_p {p}"));
    }
    if let Some(m) = s.max_tokens {
        parts.push(format!("max_tokens {m}"));
    }
    if let Some(seed) = s.seed {
        parts.push(format!("seed {seed}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}
