//! `--base-url` / `CHORUS_BASE_URL` for the commands that take no panel
//! (`models`, `eval`, `ui`): every command that reaches a provider is pointed at
//! the same gateway by the same flag and variable as `serve`, `ask` and
//! `check` — `chorus models` would otherwise list openrouter.ai's models
//! while every run goes to the gateway.

use crate::config::{self, Overrides};

#[derive(clap::Args, Default)]
pub struct Gateway {
    /// Send the provider's requests (and its model list) to another
    /// OpenAI-compatible endpoint, as `serve --base-url` does.
    #[arg(long, env = config::BASE_URL_ENV, value_name = "URL")]
    base_url: Option<String>,
}

impl Gateway {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            base_url: self
                .base_url
                .as_deref()
                .map(str::trim)
                .filter(|url| !url.is_empty())
                .map(str::to_owned),
            ..Overrides::default()
        }
    }
}
