//! The plugins that play a run's three roles (selector, prompter,
//! synthesizer): each looked up in the registry, waited for while it
//! still compiles after a first start (within the run's deadline), and
//! held to its role.

use super::checks::{role_error, roles};
use super::context::RunContext;
use super::{RunError, Runner};
use crate::config::Pipeline;
use crate::events::Event;
use crate::plugins::{Availability, Kind, Plugin, PluginError};

impl Runner {
    /// The plugin `name`, if it loaded. The configuration names it: that
    /// was checked at load.
    pub(super) fn plugin(&self, name: &str) -> Result<&Plugin, RunError> {
        let not_loaded = |message: String| {
            RunError::Plugin(PluginError::NotLoaded {
                plugin: name.to_owned(),
                message,
            })
        };
        match self
            .registry
            .availability(name)
            .expect("validated at load: pipelines name configured plugins")
        {
            Availability::Ready(plugin) => Ok(plugin),
            Availability::Failed(error) => Err(not_loaded(error.to_string())),
            Availability::Loading => Err(not_loaded(
                "it was still being compiled (chorus has just started) when the run could wait no longer"
                    .to_owned(),
            )),
            Availability::Unloaded => Err(not_loaded(
                "it was still loading when the run could wait no longer".to_owned(),
            )),
        }
    }

    /// `pipeline`'s plugins by role. In `serve`, one may not be loaded
    /// yet: a shipped built-in loads on its first run (milliseconds), and
    /// after a first start one may still be compiling. The run waits for
    /// them (and says so in its progress when one is compiling) within its
    /// deadline, then holds each to its role.
    pub(super) async fn plugins_of(
        &self,
        name: &str,
        pipeline: &Pipeline,
        context: &RunContext,
    ) -> Result<[&Plugin; 3], RunError> {
        let names = roles(pipeline).map(|(_, _, plugin)| plugin);
        let waiting = |plugin: &&str| {
            matches!(
                self.registry.availability(plugin),
                Some(Availability::Loading | Availability::Unloaded)
            )
        };
        let loading: Vec<&str> = names.into_iter().filter(waiting).collect();
        if !loading.is_empty() {
            let compiling: Vec<&str> = loading
                .iter()
                .copied()
                .filter(|plugin| {
                    matches!(
                        self.registry.availability(plugin),
                        Some(Availability::Loading)
                    )
                })
                .collect();
            if !compiling.is_empty() {
                context.emit(Event::Note {
                    plugin: "chorus".to_owned(),
                    message: format!(
                        "waiting for plugin `{}` to finish compiling (chorus has just started)",
                        compiling.join("`, `")
                    ),
                });
            }
            let settled = self.registry.settled(&loading);
            // Past the deadline, `plugin` below says which is still compiling.
            let _ = tokio::time::timeout_at(context.deadline(), settled).await;
        }
        // Checked at load for the plugins loaded then; a comparison each.
        let [selector, prompter, synthesizer] = roles(pipeline).map(|(role, kind, plugin)| {
            let plugin = self.plugin(plugin)?;
            match role_error(&self.loaded, name, role, kind, &plugin.name, plugin.kind) {
                Some(error) => Err(RunError::Plugin(PluginError::NotLoaded {
                    plugin: plugin.name.clone(),
                    message: error.to_string(),
                })),
                None => Ok(plugin),
            }
        });
        Ok([selector?, prompter?, synthesizer?])
    }

    /// The synthesizer plugins' names, compiled or not: the same list for
    /// a runner's whole life (the tool list offers it, and a client hears
    /// when it changes). A plugin whose component could not be read counts
    /// where a pipeline names it as its synthesizer.
    pub fn synthesizer_names(&self) -> Vec<&str> {
        self.registry
            .names()
            .filter(|name| match self.registry.kind(name) {
                Some(kind) => kind == Kind::Synthesizer,
                None => self.pipelines().any(|(_, p)| p.synthesizer == *name),
            })
            .collect()
    }
}
