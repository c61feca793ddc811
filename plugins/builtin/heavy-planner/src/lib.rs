//! Prompter for heavy mode (Grok-Heavy style): a planner model splits the
//! question into N sub-questions; N agents — cycling through the panel's
//! models — each answer one. Pair it with `synthesize` and `show_labels`.
//!
//! The planner's reply is parsed robustly (a JSON array anywhere in it, or a
//! numbered list). When it is unusable or the planner fails, the agents get
//! fixed angles — research, analysis, alternatives, verification — and the
//! result says so.
//!
//! ```toml
//! [plugins.heavy-planner.settings]
//! planner = "model"   # default: the plan's first synthesizer
//! agents = 4          # default N; the call's `agents` option wins (1-16)
//! ```

kit::plugin!(prompter, HeavyPlanner);

use kit::wit::types::{Plan, Prompts, Request, Role};
use serde::Deserialize;

const MAX_AGENTS: u32 = 16;

const FALLBACK_ANGLES: [&str; 4] = [
    "Research: gather the key facts, data and sources that bear on the question.",
    "Analysis: reason through the question step by step and reach a well-supported answer.",
    "Alternatives: consider other interpretations, approaches and counter-arguments.",
    "Verification: check the likely answers for errors, edge cases and unstated assumptions.",
];

const PLANNER_SYSTEM: &str = "You split questions into sub-questions for a team of researchers. \
Reply with only a JSON array of strings, one sub-question per element, nothing else.";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Settings {
    planner: Option<String>,
    agents: Option<u32>,
}

struct HeavyPlanner;

impl Guest for HeavyPlanner {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn prompt(request: Request, plan: Plan, settings: String) -> Result<Prompts, String> {
        let settings = parse(&settings)?;
        let agents = kit::count(
            &request.options,
            "agents",
            settings.agents,
            4,
            1..=MAX_AGENTS,
        )?;
        let planner = settings
            .planner
            .or_else(|| plan.synthesizers.first().cloned())
            .or_else(|| plan.panel.first().map(|s| s.model.clone()))
            .ok_or("no planner model: set settings.planner or give the plan a synthesizer")?;
        let n = agents as usize;
        let mut notes = Vec::new();

        kit::wit::host::progress(&format!("planning {n} sub-questions with {planner}"));
        let ask = format!(
            "Split this question into exactly {n} distinct sub-questions that together cover everything \
             needed for an excellent answer. Each must stand on its own.\n\nQuestion:\n{}",
            request.prompt
        );
        let reply = kit::guest::ask(
            "planner",
            &planner,
            PLANNER_SYSTEM,
            &ask,
            kit::guest::NO_SAMPLING,
        );
        let sub_questions = match reply {
            Ok(text) => {
                let mut list = kit::extract_list(&text);
                list.truncate(n);
                if list.len() == n {
                    list
                } else {
                    notes.push(format!(
                        "The planner's reply had {} usable sub-questions of the {n} asked, so the agents \
                         took fixed angles instead (research, analysis, alternatives, verification).",
                        list.len()
                    ));
                    fallback(n)
                }
            }
            Err(error) => {
                notes.push(format!(
                    "The planner {planner} failed ({error}), so the agents took fixed angles instead \
                     (research, analysis, alternatives, verification)."
                ));
                fallback(n)
            }
        };
        if plan.panel.is_empty() {
            return Err("the plan's panel is empty: no models for the agents".into());
        }
        let requests = sub_questions
            .iter()
            .enumerate()
            .map(|(i, sub_question)| {
                let seat = &plan.panel[i % plan.panel.len()];
                let system = format!(
                    "You are agent {} of {n}, answering one part of a larger question. Answer your \
                     sub-question thoroughly and concretely; another agent will combine the parts.",
                    i + 1
                );
                let user = format!(
                    "Main question:\n{}\n\nYour sub-question:\n{sub_question}",
                    request.prompt
                );
                kit::guest::request(
                    &format!("agent {}: {sub_question}", i + 1),
                    &seat.model,
                    vec![
                        kit::guest::message(Role::System, system),
                        kit::guest::message(Role::User, user),
                    ],
                    seat.sampling,
                )
            })
            .collect();
        Ok(Prompts { requests, notes })
    }
}

fn fallback(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| FALLBACK_ANGLES[i % FALLBACK_ANGLES.len()].to_owned())
        .collect()
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(settings, "optional `planner` model and `agents`")
}
