//! The exporter: OTLP/HTTP with protobuf bodies, sent by chorus's own
//! reqwest (rustls) from a batch processor on the tokio runtime. A
//! collector that is down or refuses costs a warning at most once a
//! minute — never a run's time: spans wait in a bounded queue (dropped when
//! it is full) and each export is bounded by `EXPORT_TIMEOUT`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{BatchConfigBuilder, SdkTracerProvider, SpanData, SpanExporter};
use opentelemetry_sdk::{Resource, runtime};

use super::Settings;

/// The longest one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The least time between two warnings about failed exports.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The tracer provider `settings` describe, exporting from now on.
pub(super) fn provider(settings: &Settings) -> Result<SdkTracerProvider, String> {
    let client = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the OTLP HTTP client: {e}"))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(settings.traces_url.as_str())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot export to {}: {e}", settings.traces_url))?;
    let exporter = Logged {
        inner: exporter,
        url: settings.traces_url.to_string(),
        warned: Mutex::new(None),
        failed: AtomicU64::new(0),
    };
    // OTEL_BSP_* (queue size, delay, batch size) are honoured.
    let config = BatchConfigBuilder::default()
        .with_max_export_timeout(EXPORT_TIMEOUT)
        .build();
    let processor = BatchSpanProcessor::builder(exporter, runtime::Tokio)
        .with_batch_config(config)
        .build();
    let resource = Resource::builder()
        .with_service_name(settings.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build())
}

/// The OTLP exporter, its failures said in chorus's log (the SDK's own
/// log is not compiled in).
#[derive(Debug)]
struct Logged {
    inner: opentelemetry_otlp::SpanExporter,
    url: String,
    /// When the last warning was given; `None` while exports succeed.
    warned: Mutex<Option<Instant>>,
    /// Failed exports since the last warning.
    failed: AtomicU64,
}

impl Logged {
    fn failed(&self, error: &dyn std::fmt::Display) {
        let failed = self.failed.fetch_add(1, Ordering::Relaxed) + 1;
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *warned = Some(Instant::now());
        self.failed.store(0, Ordering::Relaxed);
        tracing::warn!(
            "cannot export traces to {} ({failed} batch(es) lost since the last warning; said at most once a minute): {error}",
            self.url
        );
    }

    fn succeeded(&self) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.take().is_some() {
            tracing::info!("exporting traces to {} again", self.url);
        }
        self.failed.store(0, Ordering::Relaxed);
    }
}

impl SpanExporter for Logged {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => self.succeeded(),
            Err(e) => self.failed(e),
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
