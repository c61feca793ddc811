//! The composition root: one running chorus — the pipeline runner built from
//! the configuration, and the record of its runs. The CLI and the MCP server
//! hold a `Chorus`; nothing below this module knows that it exists.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{ConfigError, Loaded};
use crate::pipeline::{Progress, RunError, Runner};
use crate::record::RunRecord;
use crate::runs::Runs;

pub struct Chorus {
    pub runner: Runner,
    pub runs: Runs,
}

impl Chorus {
    /// Builds everything a configuration describes: providers, plugins, runs.
    pub fn load(loaded: Loaded) -> Result<Self, ConfigError> {
        let limits = &loaded.config.limits;
        let runs = Runs::new(limits.max_runs_kept, limits.run_ttl);
        let runner = Runner::load(loaded)?;
        Ok(Self { runner, runs })
    }

    /// Finds the configuration the way every command does, and loads it.
    pub fn discover(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        Loaded::discover(explicit).and_then(Self::load)
    }

    pub fn loaded(&self) -> &Loaded {
        &self.runner.loaded
    }

    /// Runs `pipeline` and keeps its record. Cancel by dropping the future.
    pub async fn run(
        &self,
        pipeline: &str,
        prompt: String,
        options: Map<String, Value>,
        progress: Progress,
    ) -> Result<Arc<RunRecord>, RunError> {
        let record = Arc::new(self.runner.run(pipeline, prompt, options, progress).await?);
        self.runs.insert(record.clone());
        Ok(record)
    }

    /// Runs `pipeline`'s plugins without calling any model (placeholder
    /// answers); the record is not kept. See `Runner::dry_run`.
    pub async fn dry_run(
        &self,
        pipeline: &str,
        prompt: String,
        options: Map<String, Value>,
        progress: Progress,
    ) -> Result<RunRecord, RunError> {
        self.runner
            .dry_run(pipeline, prompt, options, progress)
            .await
    }
}
