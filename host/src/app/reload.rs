//! Live reload: re-reads the configuration file, builds a new runner beside
//! the one serving (validated, compiled, every new plugin instantiated and
//! its settings checked), and swaps it in at once — or refuses the change
//! and keeps serving what it has. What changed is said in one line; what
//! cannot change without a restart is said too, and kept as it was.

use std::sync::Arc;

use crate::config::{Config, ConfigError, Loaded};
use crate::pipeline::CallCache;
use crate::pipeline::Runner;

use super::Chorus;

/// What a reload did.
#[derive(Debug)]
pub enum Reloaded {
    /// chorus serves the built-in configuration: there is no file to read.
    NoFile,
    /// The file was read and is in force (`swapped` false when it changed
    /// nothing that matters).
    Done {
        origin: String,
        swapped: bool,
        /// What changed: `pipelines +x −y`, `plugin z rebuilt`, …
        changes: Vec<String>,
        /// Keys that changed but take a restart; their old values stay.
        need_restart: Vec<String>,
    },
}

/// A change that was refused; the previous configuration keeps serving.
#[derive(Debug)]
pub struct Refused {
    /// The configuration file.
    pub origin: String,
    pub error: ConfigError,
}

/// A reload's outcome as told to those listening (MCP clients' logs): one
/// line, as on stderr.
#[derive(Debug, Clone)]
pub struct Notice {
    /// The change was refused; the previous configuration keeps serving.
    pub refused: bool,
    /// A new configuration is in force.
    pub swapped: bool,
    pub text: String,
}

impl Chorus {
    /// Reads the configuration file again and, if it is good, makes it the
    /// one new runs use. Runs in flight finish on the runner they started
    /// with. One reload runs at a time. Its outcome is announced to
    /// [`Chorus::reloads`].
    pub async fn reload(&self) -> Result<Reloaded, Refused> {
        let outcome = self.reload_file().await;
        let notice = match &outcome {
            Ok(done) => Notice {
                refused: false,
                swapped: matches!(done, Reloaded::Done { swapped: true, .. }),
                text: done.to_string(),
            },
            Err(refused) => Notice {
                refused: true,
                swapped: false,
                text: refused.to_string(),
            },
        };
        // Nobody listening is fine.
        let _ = self.reloaded.send(notice);
        outcome
    }

    async fn reload_file(&self) -> Result<Reloaded, Refused> {
        let _one_at_a_time = self.reloading.lock().await;
        let previous = self.runner();
        let Some(path) = previous.loaded.path.clone() else {
            return Ok(Reloaded::NoFile);
        };
        let origin = previous.loaded.origin.clone();
        let refused = |error: ConfigError| Refused {
            origin: origin.clone(),
            error,
        };
        let old = previous.clone();
        // Compiling a plugin can take seconds: not on the runtime's threads.
        let built = tokio::task::spawn_blocking(move || {
            let mut loaded = Loaded::from_file(&path)?.with_overrides(&old.loaded.overrides)?;
            loaded.source = old.loaded.source.clone();
            let need_restart = keep_restart_only(&old.loaded.config, &mut loaded.config);
            // A longer run_timeout must still fit the task expiry in effect.
            loaded.check_again().map_err(|mut e| {
                if need_restart.contains(&e.key) {
                    e.message.push_str(&format!(
                        " ({} takes effect only at a restart: the value in effect was kept)",
                        e.key
                    ));
                }
                e
            })?;
            let same = loaded.config == old.loaded.config && loaded.base_dir == old.loaded.base_dir;
            // The same text can still name plugin files that changed: build
            // anyway (unchanged plugins are taken over as they are).
            Runner::reload(loaded, &old).map(|runner| (runner, need_restart, same))
        })
        .await;
        let (runner, need_restart, same_config) = match built {
            Ok(Ok(built)) => built,
            Ok(Err(error)) => return Err(refused(error)),
            Err(e) => {
                return Err(refused(ConfigError {
                    origin: origin.clone(),
                    key: String::new(),
                    position: None,
                    message: format!("loading it failed unexpectedly: {e}"),
                }));
            }
        };
        if let Some(shared) = self.store.shared_limits() {
            runner.llm.share_limits(&shared);
        }
        let responses = crate::respcache::ResponseCache::of(&runner.loaded.config, &self.store);
        let runner = runner.with_responses(responses.map(|c| c as Arc<dyn CallCache>));
        let changes = changes(&previous, &runner);
        let swapped = !(same_config && changes.is_empty());
        if swapped {
            self.current.send_replace(Arc::new(runner));
        }
        Ok(Reloaded::Done {
            origin,
            swapped,
            changes,
            need_restart,
        })
    }
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoFile => write!(
                f,
                "nothing to reload: chorus serves the built-in plugins.toml (give --config FILE or $CHORUS_CONFIG to serve one that can change)"
            ),
            Self::Done {
                origin,
                changes,
                need_restart,
                ..
            } => {
                let file = short_name(origin);
                if changes.is_empty() {
                    write!(f, "reloaded {file}: nothing changed")?;
                } else {
                    write!(f, "reloaded {file}: {}", changes.join(", "))?;
                }
                if !need_restart.is_empty() {
                    write!(
                        f,
                        "; needs a restart to take effect, still as before: {}",
                        need_restart.join(", ")
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::fmt::Display for Refused {
    /// One block: what was refused, why (file, line, key), and what to do.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let origin = &self.origin;
        writeln!(
            f,
            "the change to {origin} was refused; still serving the configuration loaded before it:"
        )?;
        writeln!(f, "  {}", self.error)?;
        write!(
            f,
            "  fix it and save again (or send SIGHUP); `chorus check --config {origin}` shows the same error"
        )
    }
}

/// The file name alone, for one-line messages.
fn short_name(origin: &str) -> &str {
    std::path::Path::new(origin)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(origin)
}

/// Puts back into `new` the values only a restart can change (the store is
/// open, the plugin instance pool and the run slots are sized, sessions
/// have their task expiry), and names those that differed.
fn keep_restart_only(old: &Config, new: &mut Config) -> Vec<String> {
    let mut changed = Vec::new();
    if new.store != old.store {
        changed.push("[store]".to_owned());
        new.store = old.store.clone();
    }
    // The exporter is started once, with the process.
    if new.telemetry != old.telemetry {
        changed.push("[telemetry]".to_owned());
        new.telemetry = old.telemetry.clone();
    }
    // The providers' clients, which trust these, are kept across reloads.
    if new.tls != old.tls {
        changed.push("[tls]".to_owned());
        new.tls = old.tls.clone();
    }
    let (old, new) = (&old.limits, &mut new.limits);
    let mut keep = |key: &str, differs: bool| {
        if differs {
            changed.push(format!("limits.{key}"));
        }
        differs
    };
    if keep(
        "max_concurrent_runs",
        new.max_concurrent_runs != old.max_concurrent_runs,
    ) {
        new.max_concurrent_runs = old.max_concurrent_runs;
    }
    if keep("max_runs_kept", new.max_runs_kept != old.max_runs_kept) {
        new.max_runs_kept = old.max_runs_kept;
    }
    if keep("run_ttl", new.run_ttl != old.run_ttl) {
        new.run_ttl = old.run_ttl;
    }
    if keep("task_ttl", new.task_ttl != old.task_ttl) {
        new.task_ttl = old.task_ttl;
    }
    changed
}

/// What differs between two runners, in the words of the config file.
fn changes(old: &Runner, new: &Runner) -> Vec<String> {
    let (before, after) = (&old.loaded.config, &new.loaded.config);
    let mut changes = Vec::new();
    let pipelines = diff(&before.pipelines, &after.pipelines, |a, b| a == b);
    if let Some(line) = pipelines.describe("pipelines", "changed") {
        changes.push(line);
    }
    let names = |registry: &crate::plugins::Registry| {
        registry
            .names()
            .map(|name| (name.to_owned(), name.to_owned()))
            .collect()
    };
    let plugins = diff(&names(&old.registry), &names(&new.registry), |name, _| {
        new.registry.kept(&old.registry, name)
    });
    if !new.registry.same_engine(&old.registry) {
        // Every plugin is rebuilt on the new engine; name the cause, not all.
        let added_removed = Diff {
            changed: Vec::new(),
            ..plugins
        };
        if let Some(line) = added_removed.describe("plugins", "rebuilt") {
            changes.push(line);
        }
        changes.push(format!(
            "all {} plugins rebuilt (the plugin instance pool was sized anew for the largest max_memory_mib)",
            new.registry.names().count()
        ));
    } else if let Some(line) = plugins.describe("plugins", "rebuilt") {
        changes.push(line);
    }
    if !Arc::ptr_eq(&old.llm, &new.llm) {
        let providers = diff(&before.providers, &after.providers, |a, b| a == b);
        if let Some(line) = providers.describe("providers", "new clients") {
            changes.push(line);
        }
        if before.models != after.models {
            changes.push("[models] changed".to_owned());
        }
        if before.cache != after.cache {
            changes.push("[cache] changed".to_owned());
        }
    }
    if before.limits != after.limits {
        changes.push("[limits] changed".to_owned());
    }
    if before.fan_out != after.fan_out {
        changes.push("[fan_out] changed".to_owned());
    }
    if before.default_pipeline != after.default_pipeline {
        changes.push("default_pipeline changed".to_owned());
    }
    changes
}

/// Names added, removed and changed between two maps.
struct Diff {
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<String>,
}

fn diff<V>(
    old: &std::collections::BTreeMap<String, V>,
    new: &std::collections::BTreeMap<String, V>,
    same: impl Fn(&V, &V) -> bool,
) -> Diff {
    Diff {
        added: new
            .keys()
            .filter(|k| !old.contains_key(*k))
            .cloned()
            .collect(),
        removed: old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect(),
        changed: new
            .iter()
            .filter(|(k, v)| old.get(*k).is_some_and(|o| !same(o, v)))
            .map(|(k, _)| k.clone())
            .collect(),
    }
}

impl Diff {
    /// `pipelines +x −y, changed z` (None when nothing differs).
    fn describe(&self, what: &str, verb: &str) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        parts.extend(self.added.iter().map(|n| format!("+{n}")));
        parts.extend(self.removed.iter().map(|n| format!("−{n}")));
        let mut line = if parts.is_empty() {
            None
        } else {
            Some(format!("{what} {}", parts.join(" ")))
        };
        if !self.changed.is_empty() {
            let changed = format!("{verb}: {}", self.changed.join(" "));
            line = Some(match line {
                Some(line) => format!("{line}, {what} {changed}"),
                None => format!("{what} {changed}"),
            });
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, u32)]) -> std::collections::BTreeMap<String, u32> {
        entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn a_diff_names_what_was_added_removed_and_changed() {
        let old = map(&[("a", 1), ("b", 1), ("c", 1)]);
        let new = map(&[("a", 1), ("c", 2), ("d", 1)]);
        let line = diff(&old, &new, |x, y| x == y).describe("pipelines", "changed");
        assert_eq!(
            line.as_deref(),
            Some("pipelines +d −b, pipelines changed: c")
        );
        let same = diff(&old, &old, |x, y| x == y).describe("pipelines", "changed");
        assert_eq!(same, None);
        let rebuilt = diff(&old, &map(&[("a", 2), ("b", 1), ("c", 1)]), |x, y| x == y)
            .describe("plugins", "rebuilt");
        assert_eq!(rebuilt.as_deref(), Some("plugins rebuilt: a"));
    }

    #[test]
    fn a_reload_whose_run_timeout_outgrows_the_task_ttl_in_effect_is_refused() {
        let base = Loaded::builtin().unwrap();
        let mut new = base.clone();
        // Both raised: valid as a file, but task_ttl only changes at a restart.
        new.config.limits.run_timeout = base.config.limits.task_ttl * 2;
        new.config.limits.task_ttl = base.config.limits.task_ttl * 3;
        for pipeline in new.config.pipelines.values_mut() {
            pipeline.run_timeout = None;
        }
        new.check_again().unwrap();
        let named = keep_restart_only(&base.config, &mut new.config);
        assert_eq!(named, ["limits.task_ttl"]);
        let error = new.check_again().unwrap_err();
        assert_eq!(error.key, "limits.task_ttl");
        assert!(error.message.contains("limits.run_timeout"), "{error}");
    }

    #[test]
    fn what_takes_a_restart_keeps_its_old_value_and_is_named() {
        let base = Loaded::builtin().unwrap().config;
        let mut new = base.clone();
        new.store.max_runs += 1;
        new.limits.max_concurrent_runs += 1;
        new.limits.max_prompt_bytes += 1;
        let named = keep_restart_only(&base, &mut new);
        assert_eq!(named, ["[store]", "limits.max_concurrent_runs"]);
        assert_eq!(new.store, base.store);
        assert_eq!(
            new.limits.max_concurrent_runs,
            base.limits.max_concurrent_runs
        );
        assert_eq!(
            new.limits.max_prompt_bytes,
            base.limits.max_prompt_bytes + 1
        );
    }
}
