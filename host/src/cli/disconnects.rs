//! Keeps an ordinary client disconnect out of the error log. When a client
//! hangs up with a request still open — a 2026-07-28 client closing its
//! `subscriptions/listen` stream, say — rmcp logs `ERROR failed to send
//! pending response during drain` (or `fail to response message`, when the
//! handler ends a moment sooner) with `error=channel closed`: the response
//! had nowhere to go because the client left, which is no fault of the
//! server and nothing an operator can act on. This layer drops exactly
//! those events; every other rmcp error, and these two with any other
//! cause, still reaches the log.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Where rmcp logs them, what they say, and the cause that makes them a
/// disconnect: the client's end of the response channel is gone.
const TARGET: &str = "rmcp::service";
const MESSAGES: [&str; 2] = [
    "failed to send pending response during drain",
    "fail to response message",
];
const GONE: &str = "channel closed";

/// The layer: put it outermost, so that no other layer sees the event.
pub struct OrdinaryDisconnects;

impl<S: Subscriber> Layer<S> for OrdinaryDisconnects {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        if event.metadata().target() != TARGET {
            return true;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let disconnect = fields
            .message
            .is_some_and(|message| MESSAGES.contains(&message.as_str()))
            && fields.error.as_deref() == Some(GONE);
        !disconnect
    }
}

/// The two fields that tell a disconnect.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    error: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%error` arrives as a value whose Debug is its Display.
        let slot = match field.name() {
            "message" => &mut self.message,
            "error" => &mut self.error,
            _ => return,
        };
        *slot = Some(format!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn only_a_response_to_a_client_that_left_is_left_out() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish()
            .with(OrdinaryDisconnects);
        tracing::subscriber::with_default(subscriber, || {
            let error = "channel closed";
            tracing::error!(target: "rmcp::service", %error, "failed to send pending response during drain");
            tracing::error!(target: "rmcp::service", %error, "fail to response message");
            tracing::error!(target: "rmcp::service", %error, "response send task failed during drain");
            tracing::error!(target: "rmcp::service", error = "broken pipe", "fail to response message");
            tracing::error!(target: "rmcp::service", "fail to close sink");
            tracing::error!(target: "other", %error, "fail to response message");
        });
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let kept: Vec<&str> = log.lines().collect();
        assert_eq!(kept.len(), 4, "{log}");
        assert!(kept[0].contains("response send task failed during drain"));
        assert!(kept[1].contains("fail to response message error=\"broken pipe\""));
        assert!(kept[2].contains("fail to close sink"));
        assert!(kept[3].contains(" other: fail to response message"));
        assert!(!log.contains("failed to send pending response"), "{log}");
    }
}
