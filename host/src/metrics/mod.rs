//! What the server is doing, as Prometheus metrics: runs by pipeline and
//! how they ended, model calls by model and outcome, run and call latency,
//! time to first token by model and provider, the wait for provider
//! permits, strategy plugin call time, tokens and USD by model and
//! client, runs in flight, how far the run store's writes trail the runs,
//! and the build. Fed by the same run events the store and MCP progress
//! see ([`Metrics::watcher`]) and by each run's end ([`Flight`]); rendered
//! in the OpenMetrics text format Prometheus scrapes ([`Metrics::render`]),
//! served by the HTTP front door (`http`) at `/metrics` (behind the
//! token) and by [`serve`] on `--metrics ADDR`.
//!
//! Labels stay bounded: pipeline names, model ids, provider and client
//! names come from the configuration and the provider's catalog, outcomes
//! from a fixed set — never a run id, a prompt or an error message.

mod serve;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::events::{Event, Progress};
use crate::pipeline::RunError;
use crate::record::{CallRecord, RunRecord};

pub use serve::serve;

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    pipeline: String,
    /// The answer's kind (`synthesis`, `single`, `vote`, `pick`,
    /// `unmerged`, `none`), or how the run failed (`timeout`, `refused`,
    /// `plugin`, `busy`, `cancelled`).
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    /// The plugin's name in `[plugins]`.
    plugin: String,
    /// `select`, `prompt` or `synthesize`.
    export: &'static str,
    /// `ok`, or how it failed (`cpu-time`, `trap`, …).
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PipelineLabel {
    pipeline: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    model: String,
    /// The model's provider in the configuration (`(unknown)` for a model
    /// it does not name).
    provider: String,
    /// `ok`, `cut`, `skipped`, or the failure's kind (`timeout`,
    /// `rate-limited`, `http-status`, …).
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabel {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelProvider {
    model: String,
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabel {
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    client: String,
    /// `prompt` or `completion`; of the prompt's, those read from the
    /// provider's prompt cache (`cached`) and written to it (`cache_write`).
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpendLabels {
    model: String,
    client: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeedbackLabels {
    metric: String,
    pipeline: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VariantLabels {
    experiment: String,
    variant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VariantFeedbackLabels {
    experiment: String,
    variant: String,
    metric: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShadowLabels {
    experiment: String,
    /// `win`, `loss`, `tie`; or why a run drawn was not judged: `budget`,
    /// `busy`, `failed`.
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExperimentLabels {
    experiment: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

type Seconds = Family<PipelineLabel, Histogram, fn() -> Histogram>;
type CallSeconds = Family<ModelLabel, Histogram, fn() -> Histogram>;
type FirstTokenSeconds = Family<ModelProvider, Histogram, fn() -> Histogram>;
type QueueSeconds = Family<ProviderLabel, Histogram, fn() -> Histogram>;
type PluginSeconds = Family<PluginLabels, Histogram, fn() -> Histogram>;

/// Which provider serves a model (`None`: not one the configuration knows).
pub type ProviderOf = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

pub struct Metrics {
    registry: Registry,
    runs: Family<RunLabels, Counter>,
    run_seconds: Seconds,
    in_flight: Gauge,
    /// Signalled when a run ends with none left in flight.
    idle: tokio::sync::Notify,
    calls: Family<CallLabels, Counter>,
    call_seconds: CallSeconds,
    first_token_seconds: FirstTokenSeconds,
    queue_seconds: QueueSeconds,
    plugin_seconds: PluginSeconds,
    tokens: Family<TokenLabels, Counter>,
    /// Of `tokens`, those chorus estimated (the provider reported none).
    estimated_tokens: Family<TokenLabels, Counter>,
    usd: Family<SpendLabels, Counter<f64, AtomicU64>>,
    /// Calls that may have been billed whose cost nobody knows: `usd`
    /// says less than was spent by these (see `record::spent`).
    unknown_cost_calls: Family<SpendLabels, Counter>,
    /// Ratings given, and the sum of their values (a replaced rating
    /// counts again).
    feedback: Family<FeedbackLabels, Counter>,
    feedback_value: Family<FeedbackLabels, Counter<f64, AtomicU64>>,
    experiment_runs: Family<VariantLabels, Counter>,
    experiment_feedback: Family<VariantFeedbackLabels, Counter>,
    experiment_feedback_value: Family<VariantFeedbackLabels, Counter<f64, AtomicU64>>,
    shadow_judgements: Family<ShadowLabels, Counter>,
    shadow_usd: Family<ExperimentLabels, Counter<f64, AtomicU64>>,
}

/// Latency buckets from 50 ms to about 14 minutes.
fn seconds() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.05, 2.0, 15,
    ))
}

/// Time to first token buckets, from 10 ms to about 5 minutes.
fn first_token() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.01, 2.0, 16,
    ))
}

/// Queue wait buckets, from 5 ms (most calls: none at all) to about 5
/// minutes.
/// 100 µs (a strategy that only reshapes text) to ~26 s (one that waits
/// on model calls of its own).
fn plugin_call() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 4.0, 10,
    ))
}

fn queue_wait() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.005, 2.0, 17,
    ))
}

impl Metrics {
    /// Runs going on now (what the drain of a shutdown waits for).
    pub fn runs_in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// The metrics of a server whose run store's write lag is `store_lag`
    /// (none when runs are kept in memory).
    pub fn new(store_lag: Option<&crate::store::WriteLag>) -> Arc<Self> {
        let mut registry = Registry::with_prefix("chorus");
        let runs = Family::<RunLabels, Counter>::default();
        registry.register(
            "runs",
            "Runs ended, by pipeline and outcome (the answer's kind, or how the run failed)",
            runs.clone(),
        );
        let run_seconds = Seconds::new_with_constructor(seconds);
        registry.register(
            "run_duration_seconds",
            "How long runs took, by pipeline",
            run_seconds.clone(),
        );
        let in_flight = Gauge::default();
        registry.register("runs_in_flight", "Runs going on now", in_flight.clone());
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "model_calls",
            "Model calls ended, by model, provider and outcome (ok, cut, skipped, or the failure's kind)",
            calls.clone(),
        );
        let call_seconds = CallSeconds::new_with_constructor(seconds);
        registry.register(
            "model_call_duration_seconds",
            "How long model calls took, retries included, by model",
            call_seconds.clone(),
        );
        let first_token_seconds = FirstTokenSeconds::new_with_constructor(first_token);
        registry.register(
            "model_time_to_first_token_seconds",
            "From the answering attempt's request being sent to its first token (streamed) or the first bytes of its body, by model and provider",
            first_token_seconds.clone(),
        );
        let queue_seconds = QueueSeconds::new_with_constructor(queue_wait);
        registry.register(
            "provider_queue_wait_seconds",
            "How long each sent model call waited for one of its provider's permits (max_concurrency), retries included, by provider",
            queue_seconds.clone(),
        );
        let plugin_seconds = PluginSeconds::new_with_constructor(plugin_call);
        registry.register(
            "plugin_call_duration_seconds",
            "How long strategy plugin calls took (instantiation, the guest's own time and the model calls it made through the host), by plugin, export and outcome",
            plugin_seconds.clone(),
        );
        let tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "tokens",
            "Tokens sent (prompt; of those, cached and cache_write) and received (completion), by model and client",
            tokens.clone(),
        );
        let usd = Family::<SpendLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "cost_usd",
            "What model calls cost, in USD (the provider's figure, or chorus's estimate), by model and client",
            usd.clone(),
        );
        let estimated_tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "estimated_tokens",
            "Of chorus_tokens_total, the tokens chorus estimated from the text because the provider reported no usage, by model and client",
            estimated_tokens.clone(),
        );
        let unknown_cost_calls = Family::<SpendLabels, Counter>::default();
        registry.register(
            "unknown_cost_model_calls",
            "Model calls that may have been billed but whose cost is unknown (no cost reported, no prices to estimate one): chorus_cost_usd_total leaves them out, by model and client",
            unknown_cost_calls.clone(),
        );
        let feedback = Family::<FeedbackLabels, Counter>::default();
        registry.register(
            "feedback",
            "Ratings given on runs, by metric and the run's pipeline (a rating that replaces an earlier one counts again)",
            feedback.clone(),
        );
        let feedback_value = Family::<FeedbackLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "feedback_value",
            "The sum of the values of the ratings in chorus_feedback_total (a boolean counts 1 or 0), by metric and pipeline: their mean is this over that",
            feedback_value.clone(),
        );
        let experiment_runs = Family::<VariantLabels, Counter>::default();
        registry.register(
            "experiment_runs",
            "Runs of an experiment ([experiments.NAME]) by the variant that served them",
            experiment_runs.clone(),
        );
        let experiment_feedback = Family::<VariantFeedbackLabels, Counter>::default();
        registry.register(
            "experiment_feedback",
            "Ratings given on runs of an experiment, by variant and metric",
            experiment_feedback.clone(),
        );
        let experiment_feedback_value =
            Family::<VariantFeedbackLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "experiment_feedback_value",
            "The sum of the values of the ratings in chorus_experiment_feedback_total, by variant and metric: their mean is this over that",
            experiment_feedback_value.clone(),
        );
        let shadow_judgements = Family::<ShadowLabels, Counter>::default();
        registry.register(
            "shadow_judgements",
            "Runs drawn for a shadow experiment, by outcome for its candidate synthesizer (win, loss, tie) or why they were not judged (budget, busy, failed)",
            shadow_judgements.clone(),
        );
        let shadow_usd = Family::<ExperimentLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "shadow_cost_usd",
            "What shadow experiments spent (the candidate's merges and the judge), against their own daily budgets, never a client's",
            shadow_usd.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "The chorus version serving", build);
        if let Some(lag) = store_lag {
            registry.register(
                "store_write_lag_seconds",
                "From a run event (a run's start, a call sent, a run's end) to the commit that wrote it to the run store",
                lag.histogram(),
            );
        }
        Arc::new(Self {
            registry,
            runs,
            run_seconds,
            in_flight,
            idle: tokio::sync::Notify::new(),
            calls,
            call_seconds,
            first_token_seconds,
            queue_seconds,
            plugin_seconds,
            tokens,
            estimated_tokens,
            usd,
            unknown_cost_calls,
            feedback,
            feedback_value,
            experiment_runs,
            experiment_feedback,
            experiment_feedback_value,
            shadow_judgements,
            shadow_usd,
        })
    }

    /// A rating of `value` on `metric` was given on a run of `pipeline`.
    pub fn feedback_given(&self, metric: &str, pipeline: &str, value: f64) {
        let labels = FeedbackLabels {
            metric: metric.to_owned(),
            pipeline: pipeline.to_owned(),
        };
        self.feedback.get_or_create(&labels).inc();
        self.feedback_value.get_or_create(&labels).inc_by(value);
    }

    /// A run of `experiment` served by `variant` started.
    pub fn experiment_run(&self, experiment: &str, variant: &str) {
        self.experiment_runs
            .get_or_create(&VariantLabels {
                experiment: experiment.to_owned(),
                variant: variant.to_owned(),
            })
            .inc();
    }

    /// A rating of `value` on `metric` was given on a run of `experiment`
    /// served by `variant`.
    pub fn experiment_feedback_given(
        &self,
        (experiment, variant): (&str, &str),
        metric: &str,
        value: f64,
    ) {
        let labels = VariantFeedbackLabels {
            experiment: experiment.to_owned(),
            variant: variant.to_owned(),
            metric: metric.to_owned(),
        };
        self.experiment_feedback.get_or_create(&labels).inc();
        self.experiment_feedback_value
            .get_or_create(&labels)
            .inc_by(value);
    }

    /// A run of `experiment`'s pipeline was judged in the shadow:
    /// `outcome` for the candidate, having spent `usd`.
    pub fn shadow_judged(&self, experiment: &str, outcome: &str, usd: f64) {
        self.shadow_judgements
            .get_or_create(&ShadowLabels {
                experiment: experiment.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        self.shadow_usd
            .get_or_create(&ExperimentLabels {
                experiment: experiment.to_owned(),
            })
            .inc_by(usd);
    }

    /// A run drawn for `experiment` was not judged, for `why`.
    pub fn shadow_skipped(&self, experiment: &str, why: &str) {
        self.shadow_judgements
            .get_or_create(&ShadowLabels {
                experiment: experiment.to_owned(),
                outcome: why.to_owned(),
            })
            .inc();
    }

    /// A `Progress` that counts the model calls of a run made for
    /// `client` as they end; `provider_of` names each model's provider.
    pub fn watcher(self: &Arc<Self>, client: &str, provider_of: ProviderOf) -> Progress {
        let metrics = self.clone();
        let client = client.to_owned();
        Arc::new(move |event| match event {
            Event::CallFinished(call) => metrics.call_ended(&call, &client, &provider_of),
            Event::PluginReturned {
                plugin,
                export,
                error,
                took,
            } => metrics
                .plugin_seconds
                .get_or_create(&PluginLabels {
                    plugin: plugin.to_string(),
                    export,
                    outcome: error.unwrap_or("ok"),
                })
                .observe(took.as_secs_f64()),
            _ => {}
        })
    }

    fn call_ended(&self, call: &CallRecord, client: &str, provider_of: &ProviderOf) {
        // A call taken from an earlier run (or answered from the response
        // cache) was not made by this one.
        if call.reused_from.is_some() || call.cached_from.is_some() {
            return;
        }
        let outcome = match (&call.error, call.status.as_str()) {
            (Some(error), "failed") => error.kind.clone(),
            (_, status) => status.to_owned(),
        };
        let model = ModelLabel {
            model: call.model.clone(),
        };
        let provider = provider_of(&call.model).unwrap_or_else(|| "(unknown)".to_owned());
        self.calls
            .get_or_create(&CallLabels {
                model: call.model.clone(),
                provider: provider.clone(),
                outcome,
            })
            .inc();
        if call.status != "skipped" {
            self.call_seconds
                .get_or_create(&model)
                .observe(f64::from(call.latency_ms) / 1000.0);
        }
        // Only calls that were sent waited for a permit or had a first token.
        if call.attempts > 0 {
            if let Some(ttft) = call.ttft_ms {
                self.first_token_seconds
                    .get_or_create(&ModelProvider {
                        model: call.model.clone(),
                        provider: provider.clone(),
                    })
                    .observe(f64::from(ttft) / 1000.0);
            }
            self.queue_seconds
                .get_or_create(&ProviderLabel { provider })
                .observe(f64::from(call.queued_ms.unwrap_or(0)) / 1000.0);
        }
        for (kind, tokens) in [
            ("prompt", call.prompt_tokens),
            ("completion", call.completion_tokens),
            ("cached", call.cached_tokens),
            ("cache_write", call.cache_write_tokens),
        ] {
            if let Some(tokens) = tokens {
                let labels = TokenLabels {
                    model: call.model.clone(),
                    client: client.to_owned(),
                    kind,
                };
                self.tokens.get_or_create(&labels).inc_by(u64::from(tokens));
                if call.tokens_estimated {
                    self.estimated_tokens
                        .get_or_create(&labels)
                        .inc_by(u64::from(tokens));
                }
            }
        }
        if let Some(usd) = call.cost_usd.filter(|usd| *usd > 0.0) {
            self.usd
                .get_or_create(&SpendLabels {
                    model: call.model.clone(),
                    client: client.to_owned(),
                })
                .inc_by(usd);
        }
        if call.cost_unknown() {
            self.unknown_cost_calls
                .get_or_create(&SpendLabels {
                    model: call.model.clone(),
                    client: client.to_owned(),
                })
                .inc();
        }
    }

    /// A run of `pipeline` begins; it counts as in flight until the
    /// returned `Flight` ends or is dropped (then it was cancelled).
    pub fn run(self: &Arc<Self>, pipeline: &str) -> Flight {
        self.in_flight.inc();
        Flight {
            metrics: self.clone(),
            pipeline: pipeline.to_owned(),
            started: Instant::now(),
            ended: false,
        }
    }

    /// Resolves once a run has ended with no other in flight — at once if
    /// that happened since the last wait.
    pub async fn went_idle(&self) {
        self.idle.notified().await;
    }

    fn run_ended(&self, pipeline: &str, outcome: String, took: Duration) {
        if self.in_flight.dec() == 1 {
            self.idle.notify_one();
        }
        self.runs
            .get_or_create(&RunLabels {
                pipeline: pipeline.to_owned(),
                outcome,
            })
            .inc();
        self.run_seconds
            .get_or_create(&PipelineLabel {
                pipeline: pipeline.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// Every metric, in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!("cannot render the metrics: {e}");
        }
        text
    }
}

/// A run in flight, for the metrics.
pub struct Flight {
    metrics: Arc<Metrics>,
    pipeline: String,
    started: Instant,
    ended: bool,
}

impl Flight {
    /// The run ended with `outcome`.
    pub fn end(mut self, outcome: &Result<std::sync::Arc<RunRecord>, RunError>) {
        self.ended = true;
        if let Err(RunError::UnknownPipeline { .. }) = outcome {
            // Named by the caller: not a label (it could be anything).
            "(unknown)".clone_into(&mut self.pipeline);
        }
        let outcome = match outcome {
            Ok(record) => record.kind.as_str().to_owned(),
            Err(error) => failure(error).to_owned(),
        };
        self.metrics
            .run_ended(&self.pipeline, outcome, self.started.elapsed());
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        if !self.ended {
            self.metrics
                .run_ended(&self.pipeline, "cancelled".into(), self.started.elapsed());
        }
    }
}

/// How a run that gave no record ended, in a word.
pub(crate) fn failure(error: &RunError) -> &'static str {
    match error {
        RunError::Timeout(_) => "timeout",
        RunError::Plugin(_) => "plugin",
        RunError::Busy { .. } => "busy",
        RunError::AnswerFormat(_) => "answer_format",
        RunError::ToolCall(_) => "tool_call",
        _ => "refused",
    }
}

#[cfg(test)]
mod tests;
