//! Selector: the cheapest models whose estimated cost fits the budget, using
//! the catalog's prices (USD per million tokens, from the config). Models
//! without prices are left out, and the result says so. On a run with
//! images, PDFs or audio, the cheapest models that can take them are chosen
//! before any that cannot, and the plan says which chosen models cannot.
//!
//! ```toml
//! [plugins.cheapest.settings]
//! budget_usd = 0.05            # for the whole panel, per run
//! count = 3                    # panel size wanted
//! expected_output_tokens = 1000
//! synthesizers = ["model"]     # default: the cheapest chosen model
//! ```

kit::plugin!(selector, Cheapest);

use kit::wit::host;
use kit::wit::types::{Plan, Request};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    budget_usd: f64,
    #[serde(default = "three")]
    count: usize,
    #[serde(default = "thousand")]
    expected_output_tokens: u32,
    #[serde(default)]
    synthesizers: Vec<String>,
}

fn three() -> usize {
    3
}
fn thousand() -> u32 {
    1000
}

struct Cheapest;

impl Guest for Cheapest {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn select(request: Request, settings: String) -> Result<Plan, String> {
        let settings = parse(&settings)?;
        // ~4 characters a token for the prompt; the reply as configured.
        let input_tokens = (request.prompt.len() / 4 + 50) as f64;
        let output_tokens = f64::from(settings.expected_output_tokens);
        let needed = kit::seeing::needed(&request);
        let models = host::models();
        let mut unpriced = Vec::new();
        // (cannot see the attachments, id, cost): those that can sort first.
        let mut priced: Vec<(bool, String, f64)> = Vec::new();
        for model in &models {
            match (model.input_price, model.output_price) {
                (Some(i), Some(o)) => priced.push((
                    !kit::seeing::sees(model, &needed),
                    model.id.clone(),
                    (input_tokens * i + output_tokens * o) / 1e6,
                )),
                _ => unpriced.push(model.id.clone()),
            }
        }
        priced.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| a.2.total_cmp(&b.2))
                .then_with(|| a.1.cmp(&b.1))
        });
        let mut spent = 0.0;
        let mut panel = Vec::new();
        for (_, model, cost) in &priced {
            if panel.len() == settings.count || spent + cost > settings.budget_usd {
                break;
            }
            spent += cost;
            panel.push(model.clone());
        }
        if panel.is_empty() {
            return Err(match priced.first() {
                Some((_, model, cost)) => format!(
                    "no model fits the budget of ${:.4}: the cheapest, {model}, is estimated at ${cost:.4}",
                    settings.budget_usd
                ),
                None => "no model in the catalog has prices: set input_price and output_price in [models]".to_owned(),
            });
        }
        let mut notes = vec![format!(
            "Chose the {} cheapest models, estimated at ${spent:.4} of the ${:.4} budget.",
            panel.len(),
            settings.budget_usd
        )];
        notes.extend(kit::seeing::blind_note(&panel, &models, &needed));
        if !unpriced.is_empty() {
            notes.push(format!(
                "Left out for lack of prices: {}.",
                unpriced.join(", ")
            ));
        }
        Ok(kit::guest::plan(panel, settings.synthesizers, notes))
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(
        settings,
        "budget_usd, count, expected_output_tokens, synthesizers",
    )
}
