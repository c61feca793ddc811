//! Synthesizer in two steps. An analyst model reads the panel's answers —
//! anonymised as A, B, C…, in an order shuffled per run — and returns a
//! structured analysis: consensus, disagreements with who holds each side,
//! unique insights, likely errors, blind spots, confidence. It is asked
//! with the analysis's JSON schema as the response format (the host sends
//! it where the model supports structured outputs, JSON mode where it has
//! only that, nothing otherwise) and read leniently all the same
//! (`kit::analysis`); a reply that is not JSON at all is used as free text,
//! and said so. Then a writer model writes the final answer
//! from the analysis and the answers. The analysis is in `details` and, by
//! model, in the notes.
//!
//! Honest about what it returns:
//! - analysis and answer written -> `synthesis`, citing the answers read;
//! - no analyst succeeded (each tried in order, a window too small for the
//!   answers skipped) -> the writer merges without one, and the notes say so;
//! - no writer succeeded -> `unmerged`: the answers side by side, with the
//!   analysis (if any) still in the notes and details;
//! - one answer -> `single`, verbatim; none -> `none`.
//!
//! ```toml
//! [plugins.analysis.settings]
//! analysts = ["openai/gpt-5"]   # default: the plan's synthesizers, in order
//! writers = ["anthropic/claude-sonnet-4.5"]   # default: the plan's synthesizers
//! max_tokens = 4096             # the writer's reply
//! temperature = 0.3             # the writer's
//! ```

kit::plugin!(synthesizer, AnalysisPlugin);

use kit::analysis::{Holder, Reading};
use kit::wit::types::{Answer, Completion, FormatSent, Plan, Request, Role, Sampling};
use serde::Deserialize;
use serde_json::json;

const ANALYST: &str = "You are an impartial analyst. You are given a question and several \
independent answers to it, labelled with letters; you do not know who wrote them. Analyse them: \
what they agree on, where they contradict each other and which answers take each side, what only \
some of them noticed, what is probably wrong (and why), what every one of them missed, and how \
confident one can be in the best answer. Name answers only by their letters. Do not write an answer \
to the question yourself.";

const WRITER: &str = "You are given a question, several independent answers to it from different \
AI models, and an analysis of those answers. Write the single best answer to the question: build on \
what the answers agree on, settle each disagreement by reasoning about which side is right (say \
briefly when it stays uncertain), keep the insights that are correct even if only one answer had \
them, avoid the likely errors, and cover the blind spots you can. Answer the question directly; do \
not mention the analysis, the answers or their letters.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    analysts: Option<Vec<String>>,
    writers: Option<Vec<String>>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
}

struct AnalysisPlugin;

impl Guest for AnalysisPlugin {
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
        if let Some(answer) =
            kit::guest::too_few(&completions, "there was nothing to analyse or merge")
        {
            return Ok(answer);
        }
        let answered = kit::guest::answered(&completions);
        let mut notes = kit::guest::failure_notes(&completions);
        // Position p shows answer order[p] under letter(p).
        let order = kit::shuffle(&request.run_id, answered.len());
        let labels: Vec<String> = (0..order.len()).map(kit::letter).collect();
        let holders: Vec<Holder> = order
            .iter()
            .enumerate()
            .map(|(p, &a)| Holder {
                label: labels[p].clone(),
                model: answered[a].1.model.clone(),
                call: Some(answered[a].0),
            })
            .collect();
        let texts: Vec<&str> = order.iter().map(|&a| answered[a].2.trim()).collect();

        let analysts = settings.analysts.as_ref().unwrap_or(&plan.synthesizers);
        let analysed = analyse(&request.prompt, &texts, &labels, analysts);
        notes.extend(kit::fallback_notes(
            "Analyst",
            &analysed.errors,
            analysed.by.as_ref().map(|(m, _)| m.as_str()),
        ));
        notes.extend(analysed.cut);
        let (brief, analysis_details) = match (&analysed.reading, &analysed.by) {
            (Some(reading), Some((analyst, _))) => {
                notes.push(format_note(analyst, analysed.format_sent));
                notes.extend(reading.notes(analyst, &holders));
                (reading.brief(&labels), reading.details(&holders))
            }
            _ => {
                notes.push(
                    "No analyst could analyse the answers (see above), so the writer merged them without an analysis."
                        .to_owned(),
                );
                (String::new(), serde_json::Value::Null)
            }
        };

        let writers = settings.writers.as_ref().unwrap_or(&plan.synthesizers);
        let inputs: Vec<(String, String)> = labels
            .iter()
            .zip(&texts)
            .map(|(label, text)| (format!("Answer {label}"), (*text).to_owned()))
            .collect();
        let sampling = Sampling {
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            ..kit::guest::NO_SAMPLING
        };
        let merge = kit::guest::merge_with(
            kit::guest::Merge {
                question: &request.prompt,
                answers: &inputs,
                synthesizers: writers,
                instructions: WRITER,
                context: &brief,
                reply_tokens: settings.max_tokens,
            },
            kit::guest::context_window,
            |model, prompt| {
                kit::wit::host::progress(&format!(
                    "{model} is writing the answer from the analysis"
                ));
                kit::guest::ask_answer("writer", model, WRITER, prompt, sampling)
            },
        );
        let writer = merge.as_ref().ok().map(|m| m.model.clone());
        let details = json!({
            "analysis": analysis_details,
            "analyst": analysed.by.as_ref().map(|(model, call)| json!({
                "model": model,
                "call": call,
                "format": format_name(analysed.format_sent),
            })),
            "writer": writer,
            "answers": holders.iter().map(|h| json!({"answer": h.label, "model": h.model, "call": h.call})).collect::<Vec<_>>(),
        })
        .to_string();
        let count = answered.len();
        let analyst = analysed.by.as_ref().map(|(m, _)| m.clone());
        let headline = |writer: &str| {
            Some(match &analyst {
                Some(analyst) => format!(
                    "Analysis of {count} answers by {analyst}; final answer written by {writer}."
                ),
                None => format!("Synthesis of {count} answers by {writer}, without an analysis."),
            })
        };
        let pairs: Vec<(&str, &str)> = holders
            .iter()
            .zip(&texts)
            .map(|(h, t)| (h.model.as_str(), *t))
            .collect();
        let sources = holders.iter().filter_map(|h| h.call).collect();
        Ok(kit::guest::settle(
            merge,
            headline,
            kit::guest::Ending {
                role: "writer",
                answers: &pairs,
                sources,
                notes,
                details,
            },
        ))
    }
}

/// What the analysts produced: the reading and who made it (model, call
/// id), how its provider was asked to shape it, each earlier analyst's
/// error, and what was cut to fit.
struct Analysed {
    reading: Option<Reading>,
    by: Option<(String, Option<u32>)>,
    format_sent: FormatSent,
    errors: Vec<(String, String)>,
    cut: Option<String>,
}

/// How the analysis was asked for, in the notes: the user should know
/// whether its shape was held by the provider or read out of free text.
fn format_note(analyst: &str, sent: FormatSent) -> String {
    match sent {
        FormatSent::JsonSchema => format!(
            "The analyst {analyst} was held to the analysis's JSON schema (structured outputs)."
        ),
        FormatSent::JsonObject => format!(
            "The analyst {analyst} was asked for JSON (its provider has a JSON mode but no schemas); its reply was read leniently."
        ),
        FormatSent::None => format!(
            "The analyst {analyst} takes no response format (by its catalog entry, or its provider refused one), so its reply was read leniently."
        ),
    }
}

fn format_name(sent: FormatSent) -> &'static str {
    match sent {
        FormatSent::JsonSchema => "json-schema",
        FormatSent::JsonObject => "json-object",
        FormatSent::None => "none",
    }
}

/// Asks `analysts` in order until one replies; a window too small for the
/// answers is skipped.
fn analyse(question: &str, texts: &[&str], labels: &[String], analysts: &[String]) -> Analysed {
    let instruction = format!(
        "Reply with only a JSON object of this form (every field; empty lists where there is \
         nothing to say; name answers by their letters {}):\n{}",
        labels.join(", "),
        kit::analysis::FORMAT
    );
    let format =
        kit::formats::json_schema(kit::analysis::SCHEMA_NAME, &kit::analysis::schema(labels));
    let mut errors = Vec::new();
    for analyst in analysts {
        let fitted =
            match kit::guest::fit_for(analyst, texts, &[ANALYST, question, &instruction], None) {
                Ok(fitted) => fitted,
                Err(small) => {
                    errors.push((
                        analyst.clone(),
                        format!("too small for the answers: {small}"),
                    ));
                    continue;
                }
            };
        let mut prompt = format!("Question:\n{question}\n\n");
        for (label, text) in labels.iter().zip(&fitted.texts) {
            prompt.push_str(&format!("--- Answer {label} ---\n{text}\n\n"));
        }
        prompt.push_str(&instruction);
        kit::wit::host::progress(&format!("{analyst} is analysing {} answers", texts.len()));
        let mut request = kit::guest::request(
            "analysis",
            analyst,
            vec![
                kit::guest::message(Role::System, ANALYST),
                kit::guest::message(Role::User, prompt),
            ],
            kit::guest::NO_SAMPLING,
        );
        request.response_format = Some(format.clone());
        let said = kit::guest::complete_cited(&[request]).pop();
        match said.map(|s| (s.text, s.id, s.format_sent)) {
            Some((Ok(reply), id, format_sent)) => {
                return Analysed {
                    reading: Some(kit::analysis::read(&reply, labels)),
                    by: Some((analyst.clone(), id)),
                    format_sent,
                    errors,
                    cut: fitted
                        .cut
                        .map(|c| format!("To fit the analyst {analyst}'s context window, {c}.")),
                };
            }
            Some((Err(error), _, _)) => errors.push((analyst.clone(), error)),
            None => errors.push((analyst.clone(), "the host returned no outcome".to_owned())),
        }
    }
    Analysed {
        reading: None,
        by: None,
        format_sent: FormatSent::None,
        errors,
        cut: None,
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    let settings: Settings = kit::settings(
        settings,
        "analysts, writers (lists of model ids), max_tokens, temperature",
    )?;
    for (key, list) in [
        ("analysts", &settings.analysts),
        ("writers", &settings.writers),
    ] {
        if let Some(list) = list
            && (list.is_empty() || list.iter().any(|m| m.trim().is_empty()))
        {
            return Err(format!(
                "bad settings: `{key}` must list at least one model id, and no empty ones (leave it out to use the plan's synthesizers)"
            ));
        }
    }
    Ok(settings)
}
