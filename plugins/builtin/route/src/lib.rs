//! Selector: routes a question to a panel by keywords. The first route with
//! a keyword in the prompt wins; its panel is the models listed, plus the
//! catalog's models carrying any of its tags.
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

wit_bindgen::generate!({
    world: "selector-plugin",
    path: "../../../wit/0.3.0",
    with: {
        "chorus:strategy/types@0.3.0": kit::wit::types,
        "chorus:strategy/host@0.3.0": kit::wit::host,
    },
});

use exports::chorus::strategy::selector::Guest;
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
        if let Some(max) = settings.max_panel {
            panel.truncate(max);
        }
        if panel.is_empty() {
            return Err(format!("the chosen route has no models ({note})"));
        }
        Ok(kit::guest::plan(panel, settings.synthesizers, vec![note]))
    }
}

/// This plugin's settings, or what is wrong with them.
fn parse(settings: &str) -> Result<Settings, String> {
    kit::settings(
        settings,
        "routes = [{name, keywords, tags, models}], default, synthesizers",
    )
}

export!(Router);
