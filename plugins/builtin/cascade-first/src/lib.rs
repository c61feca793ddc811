//! Prompter for the first stage of a cascade: instead of the whole panel,
//! one model answers and a second, cheap model answers too as a check; each
//! is asked to state its confidence on a last line. The `cascade`
//! synthesizer compares the two and asks the rest of the panel only when
//! they disagree or the answer's confidence is low.
//!
//! The calls are labelled `cascade: answer` and `cascade: check`, which is
//! how the synthesizer tells them apart.
//!
//! ```toml
//! [plugins.cascade-first.settings]
//! model = "anthropic/claude-sonnet-4.5"  # default: the panel's first model
//! check = "deepseek/deepseek-chat-v3.1"  # default: the panel's cheapest other model
//! system = "..."                         # replaces the instructions (keep the Confidence line)
//! ```

kit::plugin!(prompter, CascadeFirst);

use kit::wit::host;
use kit::wit::types::{ModelInfo, Plan, Prompts, Request, Role, Sampling};
use serde::Deserialize;

/// The labels the `cascade` synthesizer reads.
const ANSWER: &str = "cascade: answer";
const CHECK: &str = "cascade: check";

const INSTRUCTIONS: &str = "Answer the question. Then, on a final line of its own, write \
`Confidence: N%`, where N is how likely you think it is that your answer is correct.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    model: Option<String>,
    check: Option<String>,
    system: Option<String>,
}

struct CascadeFirst;

impl Guest for CascadeFirst {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn prompt(request: Request, plan: Plan, settings: String) -> Result<Prompts, String> {
        let settings = parse(&settings)?;
        let model = match &settings.model {
            Some(model) => model.clone(),
            None => plan
                .panel
                .first()
                .map(|seat| seat.model.clone())
                .ok_or("the plan has an empty panel")?,
        };
        let check = match &settings.check {
            Some(check) => Some(check.clone()),
            None => cheapest_other(&plan, &model, &host::models()),
        };
        if check.as_deref() == Some(model.as_str()) {
            return Err(format!(
                "`check` is {model}, the model that answers: a model cannot check itself; \
                 set `check` to another model"
            ));
        }
        let sampling = |id: &str| {
            plan.panel
                .iter()
                .find(|seat| seat.model == id)
                .map_or(kit::guest::NO_SAMPLING, |seat| seat.sampling)
        };
        let system = settings
            .system
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(INSTRUCTIONS);
        let ask = |label: &str, model: &str, sampling: Sampling| {
            kit::guest::request(
                label,
                model,
                vec![
                    kit::guest::message(Role::System, system),
                    kit::guest::message(Role::User, request.prompt.clone()),
                ],
                sampling,
            )
        };
        let mut requests = vec![ask(ANSWER, &model, sampling(&model))];
        let others = plan
            .panel
            .iter()
            .filter(|seat| seat.model != model && Some(&seat.model) != check.as_ref())
            .count();
        let note = match &check {
            Some(check) => {
                requests.push(ask(CHECK, check, sampling(check)));
                let why = if settings.check.is_some() {
                    ""
                } else {
                    " (the panel's cheapest other model)"
                };
                format!(
                    "Cascade: {model} answers and {check}{why} checks; the other {others} panel \
                     models are asked only if they disagree or the confidence is low."
                )
            }
            None => format!(
                "Cascade: {model} answers; with no other model to check it, only its stated \
                 confidence decides whether the other {others} panel models are asked."
            ),
        };
        Ok(Prompts {
            requests,
            notes: vec![note],
        })
    }
}

/// The panel's cheapest model other than `model`, by the catalog's prices
/// (a typical call: prompt and reply of equal length); unpriced models come
/// after priced ones, and among equals the panel's order decides.
fn cheapest_other(plan: &Plan, model: &str, catalog: &[ModelInfo]) -> Option<String> {
    let price = |id: &str| {
        catalog
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| Some(m.input_price? + m.output_price?))
    };
    plan.panel
        .iter()
        .map(|seat| seat.model.as_str())
        .filter(|id| *id != model)
        .enumerate()
        .min_by(|(i, a), (j, b)| match (price(a), price(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y).then(i.cmp(j)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => i.cmp(j),
        })
        .map(|(_, id)| id.to_owned())
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    let settings: Settings = kit::settings(settings, "optional `model`, `check` and `system`")?;
    for (key, value) in [("model", &settings.model), ("check", &settings.check)] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(format!("`{key}` must name a model, got an empty string"));
        }
    }
    if settings.model.is_some() && settings.model == settings.check {
        return Err(format!(
            "`check` must be another model than `model` (both are {}): a model cannot check itself",
            settings.model.as_deref().unwrap_or_default()
        ));
    }
    Ok(settings)
}
