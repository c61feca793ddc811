//! The shape of plugins.toml as a whole: its sections, each the type of a
//! file of its own in `config/` (with its default and its check). Unknown
//! keys are rejected (`deny_unknown_fields`) so a typo is an error, never a
//! silently ignored setting.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Deserialize;

use super::{
    Cache, FanOut, Http, Limits, Model, Pipeline, PluginSpec, Provider, Store, Telemetry, Tls,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The pipeline `chorus ask` runs when `--pipeline` is not given.
    /// May be left out when there is exactly one pipeline.
    #[serde(default)]
    pub default_pipeline: Option<String>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub cache: Cache,
    /// How long a fan-out waits for slow models (overridable per pipeline).
    #[serde(default)]
    pub fan_out: FanOut,
    #[serde(default)]
    pub store: Store,
    /// How `chorus serve --http` treats connections.
    #[serde(default)]
    pub http: Http,
    /// OpenTelemetry traces of runs (read at startup).
    #[serde(default)]
    pub telemetry: Telemetry,
    /// Certificates trusted for outgoing HTTPS besides the built-in roots.
    #[serde(default)]
    pub tls: Tls,
    /// Registries (`HOST[:PORT]`) of plugin `source`s reached over plain
    /// HTTP; loopback ones always are, every other over HTTPS.
    #[serde(default)]
    pub insecure_registries: Vec<String>,
    /// Token services (`HOST[:PORT]`) that may be sent a registry's
    /// credentials when the registry names one on another host as its
    /// Bearer `realm` (Docker Hub's `auth.docker.io`, GitLab's
    /// `gitlab.com`). Any other such realm gets none: a registry must not
    /// be able to hand its password to a host of its choosing.
    #[serde(default)]
    pub registry_token_realms: Vec<String>,
    /// Feedback a person or a program may give on a run.
    #[serde(default)]
    pub metrics: BTreeMap<String, super::Metric>,
    /// Pipeline names served by several variants, compared on a metric.
    #[serde(default)]
    pub experiments: BTreeMap<String, super::Experiment>,
    pub providers: BTreeMap<String, Provider>,
    /// In the order written: selectors that prefer earlier models see it.
    #[serde(default)]
    pub models: IndexMap<String, Model>,
    pub plugins: BTreeMap<String, PluginSpec>,
    pub pipelines: BTreeMap<String, Pipeline>,
}
