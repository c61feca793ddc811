//! The caller's trace context: W3C `traceparent` and `tracestate`, as an
//! MCP request carries them in `_meta` (SEP-414) or an HTTP request in its
//! headers. A malformed one is ignored (said at debug level), never an
//! error: the run is traced as a trace of its own.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;

struct Carrier<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.traceparent),
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// The context a run continues: the caller's span (remote), or `None`
/// when there is no `traceparent` or it is not a valid one.
pub fn parent(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Context> {
    let traceparent = traceparent?.trim();
    if !well_formed(traceparent) {
        tracing::debug!(traceparent, "ignored a malformed traceparent");
        return None;
    }
    let carrier = Carrier {
        traceparent,
        tracestate,
    };
    let context = TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier);
    if context.span().span_context().is_valid() {
        Some(context)
    } else {
        tracing::debug!(traceparent, "ignored a malformed traceparent");
        None
    }
}

/// `version-traceid-spanid-flags` in lowercase hex of 2, 32, 16 and 2
/// digits, as W3C Trace Context writes it (the SDK's parser takes shorter
/// ids); a later version may add fields after these.
fn well_formed(traceparent: &str) -> bool {
    let parts: Vec<&str> = traceparent.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    parts.len() >= 4
        && hex(parts[0], 2)
        && (parts[0] != "00" || parts.len() == 4)
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceContextExt;

    use super::parent;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    #[test]
    fn a_valid_traceparent_is_the_remote_parent() {
        let context = parent(Some(&format!("00-{TRACE}-{SPAN}-01")), Some("vendor=1")).unwrap();
        let span = context.span();
        let parent = span.span_context();
        assert_eq!(parent.trace_id().to_string(), TRACE);
        assert_eq!(parent.span_id().to_string(), SPAN);
        assert!(parent.is_remote() && parent.is_sampled());
        assert_eq!(parent.trace_state().get("vendor"), Some("1"));
    }

    #[test]
    fn a_missing_or_malformed_traceparent_is_ignored() {
        let zeros = "0".repeat(32);
        for bad in [
            "",
            "garbage",
            &format!("00-{TRACE}-{SPAN}"),
            &format!("00-{zeros}-{SPAN}-01"),
            &format!("00-{TRACE}-0000000000000000-01"),
            &format!("ff-{TRACE}-{SPAN}-01"),
            &format!("00-{}-{SPAN}-01", &TRACE[1..]),
            &format!("00-{}-{SPAN}-01", TRACE.to_uppercase()),
            &format!("00-{TRACE}-{SPAN}-01-extra"),
        ] {
            assert!(parent(Some(bad), None).is_none(), "{bad}");
        }
        assert!(parent(None, Some("vendor=1")).is_none());
    }
}
