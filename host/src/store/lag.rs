//! How far the run store's writes trail the runs: for each event written,
//! the time from when it happened in its run (a run's start, a call sent,
//! its end — the events that carry their time) to the commit of the
//! transaction that wrote it. The writer observes it after each committed
//! batch; `/metrics` shows it as `chorus_store_write_lag_seconds`. A
//! backlog (a busy disk, a database down) shows as a long tail here.

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::event::{Msg, now_ms};

/// One store's write lag; clones share it.
#[derive(Clone)]
pub struct WriteLag(Histogram);

impl Default for WriteLag {
    /// Buckets from 1 ms to ~65 s: a healthy writer is in the first few,
    /// a database that was down for a minute in the last.
    fn default() -> Self {
        Self(Histogram::new(exponential_buckets(0.001, 2.0, 17)))
    }
}

impl WriteLag {
    /// The events of `batch`, just committed.
    pub fn written(&self, batch: &[Msg]) {
        let now = now_ms();
        for at in batch.iter().filter_map(Msg::happened_at) {
            #[allow(clippy::cast_precision_loss)] // ms since an event: far below 2^52
            self.0.observe((now - at).max(0) as f64 / 1000.0);
        }
    }

    /// The histogram, to register with the metrics.
    pub fn histogram(&self) -> Histogram {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn each_timed_event_is_observed_from_when_it_happened() {
        let lag = WriteLag::default();
        let sent = Msg::CallStarted {
            run_id: "r".into(),
            id: 0,
            stage: Arc::from("fan-out"),
            request: Arc::new(crate::llm::ChatRequest {
                label: "panel".into(),
                model: "m".into(),
                messages: Vec::new(),
                sampling: crate::llm::Sampling::default(),
                response_format: None,
                attachments: crate::attach::Attachments::default(),
                placed: Vec::new(),
                tools: None,
            }),
            at: now_ms() - 3_000,
        };
        let (ack, _) = tokio::sync::oneshot::channel();
        lag.written(&[sent, Msg::Flush(ack)]);
        let mut registry = Registry::default();
        registry.register("lag", "test", lag.histogram());
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("lag_count 1\n"),
            "the flush has no time: {text}"
        );
        assert!(text.contains("lag_bucket{le=\"2.048\"} 0\n"), "{text}");
        assert!(text.contains("lag_bucket{le=\"4.096\"} 1\n"), "{text}");
    }
}
