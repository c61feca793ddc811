//! OpenTelemetry traces of runs, exported over OTLP/HTTP when an endpoint
//! is configured (`[telemetry]`, or the standard `OTEL_*` variables; see
//! [`settings`]). A run is traced from the events it emits, as the store
//! and the metrics watch it ([`RunTrace`]): a span for the run, one per
//! stage, plugin call and model call, with the GenAI semantic conventions.
//! The caller's trace context (`traceparent` in an MCP request's `_meta`,
//! or the HTTP header) is the run span's parent ([`parent`]).
//!
//! Off, nothing is built: no exporter, no watcher, no span. Exporting never
//! holds up a run: spans go to a bounded queue a background task sends in
//! batches; failures are logged at most once a minute ([`export`]); the
//! queue is flushed, within a bound, when the process ends ([`flush`]).

mod export;
mod parent;
mod run;
mod settings;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

use crate::config::{ConfigError, Loaded};
use crate::metrics::ProviderOf;

pub use parent::parent;
pub use run::RunTrace;
pub use settings::Settings;

/// The longest the end of the process waits for spans to be sent.
const FLUSH_WITHIN: Duration = Duration::from_secs(5);

/// Every exporter this process started, flushed by [`flush`].
static STARTED: Mutex<Vec<SdkTracerProvider>> = Mutex::new(Vec::new());

/// Traces of this chorus's runs, or nothing (`Telemetry::default()`).
#[derive(Clone, Default)]
pub struct Telemetry {
    on: Option<Arc<On>>,
}

struct On {
    tracer: SdkTracer,
    capture_content: bool,
}

impl Telemetry {
    /// Starts exporting as `loaded` and the environment say; off when they
    /// name no endpoint. Needs a tokio runtime (the exporter's task runs
    /// on it); without one it stays off and says so.
    pub fn start(loaded: &Loaded) -> Result<Self, ConfigError> {
        let settings = Settings::resolve(&loaded.config.telemetry, |name| std::env::var(name).ok())
            .map_err(|(key, message)| error(loaded, key, message))?;
        let Some(settings) = settings else {
            return Ok(Self::default());
        };
        if tokio::runtime::Handle::try_current().is_err() {
            tracing::warn!("OpenTelemetry traces are off: no async runtime to export them on");
            return Ok(Self::default());
        }
        let provider = export::provider(&settings)
            .map_err(|message| error(loaded, settings.from.to_owned(), message))?;
        let tracer = provider.tracer("chorus");
        STARTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(provider);
        tracing::info!("{}", settings.describe());
        Ok(Self {
            on: Some(Arc::new(On {
                tracer,
                capture_content: settings.capture_content,
            })),
        })
    }

    /// Whether runs are traced.
    pub fn is_on(&self) -> bool {
        self.on.is_some()
    }

    /// The trace of a run of `name` made for `client`, its parent the
    /// context current in the calling task (see [`parent`]); `None` when
    /// off. `provider_of` names each model's provider.
    pub fn run(&self, name: &str, client: &str, provider_of: ProviderOf) -> Option<RunTrace> {
        let on = self.on.as_ref()?;
        Some(RunTrace::start(
            on.tracer.clone(),
            on.capture_content,
            name,
            client,
            provider_of,
            &opentelemetry::Context::current(),
        ))
    }
}

/// What `chorus check` says about tracing.
pub fn describe(loaded: &Loaded) -> String {
    match Settings::resolve(&loaded.config.telemetry, |name| std::env::var(name).ok()) {
        Ok(Some(settings)) => settings.describe(),
        Ok(None) => "off (no [telemetry] otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)".to_owned(),
        Err((key, message)) => format!("invalid: `{key}`: {message}"),
    }
}

/// Sends what is still queued, waiting at most `FLUSH_WITHIN`; for the
/// end of the process. Runs started afterwards are not exported.
pub async fn flush() {
    let started = std::mem::take(&mut *STARTED.lock().unwrap_or_else(|e| e.into_inner()));
    if started.is_empty() {
        return;
    }
    // The SDK's shutdown blocks its thread until the export task answers.
    let shutdown = tokio::task::spawn_blocking(move || {
        for provider in started {
            if let Err(e) = provider.shutdown_with_timeout(FLUSH_WITHIN) {
                tracing::debug!("OpenTelemetry shutdown: {e}");
            }
        }
    });
    if tokio::time::timeout(FLUSH_WITHIN, shutdown).await.is_err() {
        tracing::warn!(
            "the last OpenTelemetry spans were not sent within {FLUSH_WITHIN:?}; they are lost"
        );
    }
}

fn error(loaded: &Loaded, key: String, message: String) -> ConfigError {
    if key.starts_with("OTEL_") {
        ConfigError {
            origin: "the environment".to_owned(),
            key,
            position: None,
            message,
        }
    } else {
        loaded.error(key, message)
    }
}
