//! Selector: routes a question to a panel by keywords. The first route with
//! a keyword in the prompt wins; its panel is the models listed, plus the
//! catalog's models carrying any of its tags. On a run with images, PDFs or
//! audio, the panel's models that can take them come first (so `max_panel`
//! keeps them), and the plan says which chosen models cannot.
//!
//! ```toml
//! [plugins.route.settings]
//! synthesizers = ["model"]
//! default = ["model-a", "model-b"]          # when no route matches
//! [[plugins.route.settings.routes]]
//! name = "code"
//! keywords = ["rust", "python", "bug", "compile"]
//! tags = ["code"]                           # and/or models = [...]
//! ```

kit::plugin!(selector, Router);

use kit::wit::host;
use kit::wit::types::{Plan, Request};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    routes: Vec<Route>,
    default: Vec<String>,
    #[serde(default)]
    synthesizers: Vec<String>,
    max_panel: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Route {
    name: String,
    keywords: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    models: Vec<String>,
}

struct Router;

impl Guest for Router {
    fn validate_settings(settings: String) -> Result<(), String> {
        parse(&settings).map(|_| ())
    }

    fn select(request: Request, settings: String) -> Result<Plan, String> {
        let settings = parse(&settings)?;
        let prompt = request.prompt.to_lowercase();
        let words: Vec<&str> = prompt
            .split(|c: char| !c.is_alphanumeric() && c != '+' && c != '#')
            .collect();
        let matched = settings.routes.iter().find_map(|route| {
            route
                .keywords
                .iter()
                .find(|k| {
                    let k = k.to_lowercase();
                    if k.contains(' ') {
                        prompt.contains(&k)
                    } else {
                        words.contains(&k.as_str())
                    }
                })
                .map(|k| (route, k.clone()))
        });
        let (mut panel, note) = match matched {
            Some((route, keyword)) => {
                let mut panel = route.models.clone();
                for model in host::models() {
                    if model.tags.iter().any(|t| route.tags.contains(t))
                        && !panel.contains(&model.id)
                    {
                        panel.push(model.id);
                    }
                }
                (
                    panel,
                    format!(
                        "Routed to the `{}` panel (the prompt mentions \"{keyword}\").",
                        route.name
                    ),
                )
            }
            None => (
                settings.default.clone(),
                "No route matched; used the default panel.".to_owned(),
            ),
        };
        let needed = kit::seeing::needed(&request);
        let mut notes = vec![note];
        let models = if needed.is_empty() {
            Vec::new()
        } else {
            host::models()
        };
        if !needed.is_empty() {
            let sees = |id: &String| {
                models
                    .iter()
                    .any(|m| m.id == *id && kit::seeing::sees(m, &needed))
            };
            let (seeing, blind): (Vec<String>, Vec<String>) = panel.into_iter().partition(sees);
            panel = seeing.into_iter().chain(blind).collect();
        }
        if let Some(max) = settings.max_panel {
            panel.truncate(max);
        }
        notes.extend(kit::seeing::blind_note(&panel, &models, &needed));
        if panel.is_empty() {
            return Err(format!("the chosen route has no models ({})", notes[0]));
        }
        Ok(kit::guest::plan(panel, settings.synthesizers, notes))
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(
        settings,
        "routes = [{name, keywords, tags, models}], default, synthesizers",
    )
}
