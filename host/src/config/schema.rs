//! The shape of plugins.toml: every key chorus reads, with its default.
//! Unknown keys are rejected (`deny_unknown_fields`) so a typo is an error,
//! never a silently ignored setting.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;
use url::Url;

pub use super::fan_out::{FanOut, FanOutOverride, MergeReserve, Quorum};

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
    pub telemetry: super::Telemetry,
    /// Certificates trusted for outgoing HTTPS besides the built-in roots.
    #[serde(default)]
    pub tls: super::Tls,
    /// Registries (`HOST[:PORT]`) of plugin `source`s reached over plain
    /// HTTP; loopback ones always are, every other over HTTPS.
    #[serde(default)]
    pub insecure_registries: Vec<String>,
    pub providers: BTreeMap<String, Provider>,
    /// In the order written: selectors that prefer earlier models see it.
    #[serde(default)]
    pub models: IndexMap<String, Model>,
    pub plugins: BTreeMap<String, PluginSpec>,
    pub pipelines: BTreeMap<String, Pipeline>,
}

/// Bounds that hold for every run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest prompt accepted, in bytes.
    pub max_prompt_bytes: usize,
    /// Wall-clock limit of one run, all stages included.
    #[serde(with = "humantime_serde")]
    pub run_timeout: Duration,
    /// Chat completions one run may make, fan-out and plugin calls together.
    pub max_calls_per_run: u32,
    /// Finished runs kept in memory (oldest dropped first).
    pub max_runs_kept: usize,
    /// How long a finished run stays readable.
    #[serde(with = "humantime_serde")]
    pub run_ttl: Duration,
    /// How long an MCP task lives: a run still working after this is
    /// stopped and failed, and a finished task stays readable (`tasks/get`)
    /// for this long again. Must exceed the longest `run_timeout` by 30 s.
    #[serde(with = "humantime_serde")]
    pub task_ttl: Duration,
    /// The most one run may spend, in USD; none means no ceiling. A call
    /// whose worst case would cross it is not started. A call's
    /// `max_cost_usd` option may lower it.
    pub max_cost_usd: Option<f64>,
    /// Runs at once; more wait for a free slot (with progress), within their
    /// own deadline. Also sizes the plugins' instance pool, so it caps the
    /// plugins' memory at this many times their largest `max_memory_mib`.
    pub max_concurrent_runs: u32,
    /// Largest attachment accepted, in bytes.
    pub max_attachment_bytes: usize,
    /// Attachments one run may carry.
    pub max_attachments: usize,
    /// All of one run's attachments together, in bytes.
    pub max_attachments_bytes: usize,
    /// Directories an MCP client on stdio may attach files from, besides
    /// the roots it shares (`chorus serve --allow-dir` adds to them).
    pub attachment_dirs: Vec<PathBuf>,
    /// Let chorus fetch a URL attachment (for a provider with `fetch_urls
    /// = false`) from a host inside a network: loopback, private,
    /// link-local or unique-local addresses. Off: a shared server must not
    /// be made to reach the services beside it.
    pub fetch_private_urls: bool,
}

impl Limits {
    /// What one run may attach.
    pub fn attachments(&self) -> crate::attach::Limits {
        crate::attach::Limits {
            max_attachments: self.max_attachments,
            max_attachment_bytes: self.max_attachment_bytes,
            max_attachments_bytes: self.max_attachments_bytes,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_prompt_bytes: 256 * 1024,
            run_timeout: Duration::from_secs(600),
            max_calls_per_run: 64,
            max_runs_kept: 100,
            run_ttl: Duration::from_secs(3600),
            task_ttl: Duration::from_secs(3600),
            max_cost_usd: None,
            max_concurrent_runs: 64,
            max_attachment_bytes: 20 << 20,
            max_attachments: 10,
            max_attachments_bytes: 50 << 20,
            attachment_dirs: Vec::new(),
            fetch_private_urls: false,
        }
    }
}

/// Where compiled plugins are cached, and how long models' answers are
/// kept for identical requests (the response cache, off by default).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cache {
    pub enabled: bool,
    /// Defaults to `$XDG_CACHE_HOME/chorus` (or `~/.cache/chorus`).
    pub dir: Option<PathBuf>,
    /// Keep answers to identical deterministic requests (temperature 0 or
    /// a fixed seed) in the run store this long, and answer them from
    /// there (see `respcache`). Unset: no response cache.
    #[serde(with = "humantime_serde")]
    pub responses: Option<Duration>,
    /// Not a key of the file: `chorus eval --cached` sets it, so every
    /// identical request is reused, sampled ones included.
    #[serde(skip)]
    pub responses_sampled: bool,
}

impl Default for Cache {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: None,
            responses: None,
            responses_sampled: false,
        }
    }
}

/// Connections to `chorus serve --http` (read at startup).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http {
    /// A connection that sends no complete request head within this long
    /// (after connecting, or between requests) is closed.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// Connections open at once. When full, the oldest connection that has
    /// not yet made an accepted request is closed for a new one; capped
    /// below the process's descriptor limit, with a margin for the store,
    /// upstream requests and plugins.
    pub max_connections: usize,
    /// Connections from one address that have not yet made an accepted
    /// request; past it, that address's oldest such connection is closed.
    pub max_connections_per_peer: usize,
    /// On SIGTERM or SIGINT, how long runs already going may take to
    /// finish (new requests are refused meanwhile) before they are stopped.
    pub drain_seconds: u64,
    /// `[[http.clients]]`: who may use the server, each with a token of its
    /// own; none means the one `CHORUS_TOKEN` (an admin with no limits).
    pub clients: Vec<super::HttpClient>,
}

impl Default for Http {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(5),
            max_connections: 512,
            max_connections_per_peer: 64,
            drain_seconds: 30,
            clients: Vec::new(),
        }
    }
}

/// The run store: every run's history in one SQLite file, shared by every
/// chorus process that names it — or, with `url`, in a PostgreSQL database
/// that instances on several machines share.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Store {
    /// `false` writes nothing to disk: runs are kept in memory only, as
    /// `limits.max_runs_kept` and `limits.run_ttl` allow.
    pub enabled: bool,
    /// The SQLite file, relative to this file. Defaults to
    /// `$XDG_DATA_HOME/chorus/runs.sqlite3` (or `~/.local/share/chorus/…`).
    pub path: Option<PathBuf>,
    /// A PostgreSQL database instead of the file: `postgres://user@host:5432/db`
    /// (`$CHORUS_STORE_URL` overrides it). No password here: it is read from
    /// `$PGPASSWORD`, or the variable `password_env` names.
    pub url: Option<String>,
    /// The environment variable holding the database password (default:
    /// `PGPASSWORD`).
    pub password_env: Option<String>,
    /// Runs kept; the oldest are removed first.
    pub max_runs: u64,
    /// Runs older than this are removed. Default: no age limit.
    #[serde(with = "humantime_serde")]
    pub max_age: Option<Duration>,
    /// Bytes of run data kept (prompts, requests, answers); the oldest runs
    /// are removed first. The file itself is somewhat larger.
    pub max_bytes: u64,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            enabled: true,
            path: None,
            url: None,
            password_env: None,
            max_runs: 10_000,
            max_age: None,
            max_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// An OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// The API root; chorus appends `/chat/completions` and `/models`.
    pub base_url: Url,
    /// Name of the environment variable that holds the API key. Leave out
    /// for endpoints without authentication (a local server). The default
    /// name, `OPENROUTER_API_KEY`, also takes `CHORUS_API_KEY` (read first)
    /// and, off OpenRouter, `OPENAI_API_KEY` (read last): see
    /// `llm::key_vars` and docs/gateways.md.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request (not framing or auth
    /// headers: chorus sets those).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Extra top-level JSON fields merged into every request body.
    #[serde(default)]
    pub extra_body: toml::Table,
    /// Ask for server-sent events (`"stream": true`); `false` for servers
    /// that cannot stream.
    #[serde(default = "defaults::stream")]
    pub stream: bool,
    /// Requests in flight to this provider at once, across all runs.
    #[serde(default = "defaults::max_concurrency")]
    pub max_concurrency: usize,
    /// Requests sent to this provider in any 60 s, across all runs (and
    /// all instances on one PostgreSQL store). Unset: no such limit.
    #[serde(default)]
    pub requests_per_minute: Option<u64>,
    /// Tokens (prompt + answer) in any 60 s: each request reserves its
    /// worst case (prompt estimate + max_tokens) and settles with its
    /// usage. Unset: no such limit.
    #[serde(default)]
    pub tokens_per_minute: Option<u64>,
    /// Establishing the TCP (and TLS) connection.
    #[serde(default = "defaults::connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// From sending the request to the first token of the answer or of its
    /// reasoning. Keep-alive comments do not count: a model that only says
    /// it is alive has not started. Without streaming, the whole answer is
    /// the first token.
    #[serde(default = "defaults::first_token_timeout", with = "humantime_serde")]
    pub first_token_timeout: Duration,
    /// Longest silence once the response body has started; keep-alive
    /// comments count as life. `read_timeout` is the old name.
    #[serde(
        default = "defaults::idle_timeout",
        with = "humantime_serde",
        alias = "read_timeout"
    )]
    pub idle_timeout: Duration,
    /// One attempt, end to end, from sending the request to the last byte.
    #[serde(default = "defaults::request_timeout", with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Largest response accepted, in bytes (a stream's total, or one body).
    #[serde(default = "defaults::max_response_bytes")]
    pub max_response_bytes: usize,
    /// Fetch `{base_url}/models` to check model ids and fill in context
    /// windows and prices the config leaves out.
    #[serde(default = "defaults::catalog")]
    pub catalog: bool,
    /// How long a fetched model list is kept on disk. Default: one day,
    /// or not at all for a server on this machine (its list changes as
    /// models are loaded).
    #[serde(default, with = "humantime_serde")]
    pub catalog_ttl: Option<Duration>,
    #[serde(default)]
    pub retry: Retry,
    /// How this provider is asked to search the web: `"openrouter-plugin"`,
    /// `"web-search-options"` or `"none"`. Default: the plugin for
    /// openrouter.ai, `web_search_options` for any other.
    #[serde(default)]
    pub web_search: Option<super::search::SearchStyle>,
    /// What one searching request costs on top of its tokens, in USD, for
    /// the worst case checked against `max_cost_usd` and for estimates.
    /// Default: OpenRouter's $0.004 a result for its plugin, $0.05 a
    /// request for `web_search_options` (see docs/configuration.md).
    #[serde(default)]
    pub web_search_usd_per_request: Option<f64>,
    /// Whether the provider fetches a URL attachment itself. `false`:
    /// chorus fetches it once per run (https, same-origin redirects,
    /// `[limits]` sizes) and sends the bytes, to every model of the run.
    #[serde(default = "defaults::fetch_urls")]
    pub fetch_urls: bool,
}

/// Retries for 429, 5xx and connection failures, with exponential backoff
/// and jitter; a 429's Retry-After is honoured up to `max_backoff`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retry {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    #[serde(with = "humantime_serde")]
    pub initial_backoff: Duration,
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
        }
    }
}

/// A model the plugins may use, and what chorus knows about it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Which provider serves it; may be left out when there is one provider.
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub context_window: Option<u32>,
    /// USD per million prompt tokens.
    #[serde(default)]
    pub input_price: Option<f64>,
    /// USD per million completion tokens.
    #[serde(default)]
    pub output_price: Option<f64>,
    /// The most tokens one reply may have (the catalog's figure otherwise);
    /// bounds a call's worst-case cost when the request sets no max_tokens.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Request parameters the model accepts, when its provider's catalog
    /// does not say (or says wrong): e.g. `["structured_outputs"]` lets
    /// plugins ask it for JSON of a schema. Wins over the catalog.
    #[serde(default)]
    pub supported_parameters: Option<Vec<String>>,
    /// What the model takes as input (`text`, `image`, `file`, `audio`),
    /// when its provider's catalog does not say (or says wrong). Wins over
    /// the catalog.
    #[serde(default)]
    pub input: Option<Vec<String>>,
    /// JSON fields merged into every request body for this model, over the
    /// provider's `extra_body` and the plugins' sampling: e.g. OpenRouter's
    /// `reasoning = { effort = "high" }`, `max_tokens`, `provider = { … }`.
    #[serde(default)]
    pub params: toml::Table,
    /// Models (of [models]) tried in order, once each, when this one fails
    /// for good — not found or retired, the account out of credit, the
    /// provider down after its retries — so its seat is still filled.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Every call to this model searches the web.
    #[serde(default)]
    pub web_search: bool,
    /// Most search results a call to this model reads (providers that
    /// take a number). Wins over the pipeline's.
    #[serde(default)]
    pub web_search_max_results: Option<u32>,
    /// `"low"`, `"medium"` or `"high"`. Wins over the pipeline's.
    #[serde(default)]
    pub web_search_context: Option<super::search::SearchContext>,
}

/// A strategy plugin: a WebAssembly component and its settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// One of the plugins compiled into chorus (see `chorus check`).
    #[serde(default)]
    pub builtin: Option<String>,
    /// A `.wasm` component, relative to this file.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// A component on an OCI registry: `oci://HOST/REPO@sha256:DIGEST`
    /// (or `:TAG`, pinned to the digest it resolves to), see the `oci` module.
    #[serde(default)]
    pub source: Option<String>,
    /// Handed to the plugin as a JSON object on every call.
    #[serde(default)]
    pub settings: toml::Table,
    /// CPU time one call of this plugin may use (time waiting for the host's
    /// model calls does not count).
    #[serde(default = "defaults::plugin_cpu_time", with = "humantime_serde")]
    pub cpu_time: Duration,
    /// Memory one call may grow to, in MiB: all its linear memories and
    /// tables together.
    #[serde(default = "defaults::plugin_memory_mib")]
    pub max_memory_mib: u32,
    /// Wall-clock time one call may spend outside the model calls it asks
    /// the host for (sleeping or waiting counts; `cpu_time` bounds work).
    #[serde(default = "defaults::plugin_wall_time", with = "humantime_serde")]
    pub wall_time: Duration,
}

/// A pipeline is one MCP tool: selector -> prompter -> fan-out -> synthesizer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// What the tool does, as the MCP client's model will read it.
    pub description: String,
    pub selector: String,
    pub prompter: String,
    pub synthesizer: String,
    /// Overrides `limits.run_timeout` for this pipeline.
    #[serde(default, with = "humantime_serde")]
    pub run_timeout: Option<Duration>,
    /// Overrides keys of the top-level `[fan_out]` for this pipeline.
    #[serde(default)]
    pub fan_out: FanOutOverride,
    /// What the tool takes besides `prompt`; checked by chorus and handed
    /// to every plugin of the run as `request.options`.
    #[serde(default)]
    pub options: BTreeMap<String, OptionSpec>,
    /// Overrides `models."ID".fallbacks` for this pipeline's runs:
    /// `{ "ID" = ["fallback", …] }` (an empty list: no fallback here).
    #[serde(default)]
    pub fallbacks: BTreeMap<String, Vec<String>>,
    /// Every panel member of this pipeline's runs searches the web (a
    /// call's `web_search` argument can switch it on too).
    #[serde(default)]
    pub web_search: bool,
    /// Most search results each searching call reads.
    #[serde(default)]
    pub web_search_max_results: Option<u32>,
    /// `"low"`, `"medium"` or `"high"`.
    #[serde(default)]
    pub web_search_context: Option<super::search::SearchContext>,
    /// What a panel member that cannot take an attachment's kind gets.
    #[serde(default)]
    pub attachments_for_text_models: ForTextModels,
    /// The model (of [models]) that describes attachments for those that
    /// cannot see them; the cheapest that can see them all when unset.
    #[serde(default)]
    pub describer: Option<String>,
    /// With `[cache] responses` set: this pipeline's sampled requests
    /// (temperature unset or above 0, no seed) are answered from the
    /// response cache too, so a repeated run gets the same sample.
    #[serde(default)]
    pub cache_sampled: bool,
}

/// `attachments_for_text_models`: what a panel member gets when it cannot
/// take an attachment's kind (an image, a PDF, audio).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForTextModels {
    /// It is left out of the panel; the notes and the call list say why.
    Skip,
    /// A model that can see the attachments first describes them; the
    /// member gets the description, marked as one.
    #[default]
    Describe,
    /// The run fails at planning, before anything is spent.
    Fail,
}

impl ForTextModels {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::Describe => "describe",
            Self::Fail => "fail",
        }
    }
}

/// One option of a pipeline's tool.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionSpec {
    #[serde(rename = "type")]
    pub kind: OptionType,
    /// Shown to the MCP client's model: keep it short.
    pub description: String,
    #[serde(default)]
    pub minimum: Option<f64>,
    #[serde(default)]
    pub maximum: Option<f64>,
    /// Used when the call leaves the option out; without one the plugin
    /// sees no value and applies its own default.
    #[serde(default)]
    pub default: Option<toml::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionType {
    Integer,
    Number,
    String,
    Boolean,
}

impl OptionType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Integer => "integer",
            Self::Number => "number",
            Self::String => "string",
            Self::Boolean => "boolean",
        }
    }
}

mod defaults {
    use std::time::Duration;

    pub fn stream() -> bool {
        true
    }
    pub fn catalog() -> bool {
        true
    }
    pub fn fetch_urls() -> bool {
        true
    }
    pub fn max_concurrency() -> usize {
        8
    }
    pub fn connect_timeout() -> Duration {
        Duration::from_secs(10)
    }
    pub fn first_token_timeout() -> Duration {
        Duration::from_secs(300)
    }
    pub fn idle_timeout() -> Duration {
        Duration::from_secs(90)
    }
    pub fn request_timeout() -> Duration {
        Duration::from_secs(600)
    }
    pub fn max_response_bytes() -> usize {
        8 * 1024 * 1024
    }
    pub fn plugin_cpu_time() -> Duration {
        Duration::from_secs(2)
    }
    pub fn plugin_memory_mib() -> u32 {
        64
    }
    pub fn plugin_wall_time() -> Duration {
        Duration::from_secs(10)
    }
}
