//! Reading a provider's response body under the attempt's clocks: a
//! stream of server-sent events assembled into the answer (read to its end,
//! with a short grace once the answer is complete, so the connection goes
//! back to the pool), or a whole body up to a limit.

use std::time::Duration;

use super::{AttemptError, OnTokens, ProviderClient};
use crate::llm::sse::{FeedError, SseParser};
use crate::llm::stream::Assembler;
use crate::llm::timeouts::Watch;
use crate::llm::types::{Failure, FailureKind, Reply};

/// How long a stream that sent its `finish_reason` may take to send its
/// usage (or `[DONE]`, or close): after that the answer is complete, and a
/// server that keeps the stream open (silent, or with keep-alives) must
/// not turn it into a timeout.
const FINISH_GRACE: Duration = Duration::from_secs(2);
/// How long a stream that has sent everything the answer needs (finish and
/// usage, or `[DONE]`) may take to end. Reading it to its end returns the
/// connection to the pool for the next call; a server that holds it open
/// costs this much, not the idle timeout.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

impl ProviderClient {
    pub(super) async fn read_stream(
        &self,
        mut response: reqwest::Response,
        model: &str,
        watch: &mut Watch<'_>,
        on_tokens: OnTokens<'_>,
        on_text: Option<&(dyn Fn(&str) + Send + Sync)>,
    ) -> Result<Reply, AttemptError> {
        let limit = self.max_response_bytes;
        let mut parser = SseParser::new(limit);
        let mut assembler = Assembler::new(self.scrubber.clone());
        let mut total = 0usize;
        let feed_error = |e: FeedError<Failure>| match e {
            FeedError::TooLarge(_) => AttemptError::fatal(self.too_large(limit)),
            FeedError::Event(f) if f.status.is_some() => AttemptError::status(f, None),
            FeedError::Event(f) => AttemptError::fatal(f),
        };
        // The answer's text passed on as it comes, scrubbed on the way.
        let mut passed = on_text.map(|on_text| (on_text, self.scrubber.stream(), 0usize));
        let mut grace_until: Option<tokio::time::Instant> = None;
        let mut closed = false;
        loop {
            let read = watch.bound(response.chunk());
            let chunk = match grace_until {
                None => read
                    .await
                    .map_err(AttemptError::fatal)?
                    .map_err(|e| self.transport_error(&e))?,
                // The answer is complete: whatever ends the wait for the
                // rest (the grace, a limit, a broken connection) ends the
                // stream, not the answer.
                Some(until) => match tokio::time::timeout_at(until, read).await {
                    Ok(Ok(Ok(chunk))) => chunk,
                    _ => break,
                },
            };
            let Some(chunk) = chunk else {
                closed = true;
                break;
            };
            watch.bytes();
            total = total.saturating_add(chunk.len());
            if total > limit {
                return Err(AttemptError::fatal(self.too_large(limit)));
            }
            let before = assembler.tokens();
            parser
                .feed(&chunk, &mut |data: &str| assembler.event(data).map(|_| ()))
                .map_err(feed_error)?;
            if assembler.tokens() > before {
                watch.token();
                on_tokens(assembler.tokens());
            }
            if let Some((on_text, scrubbed, sent)) = &mut passed {
                let content = assembler.content();
                if content.len() > *sent {
                    if let Some(piece) = scrubbed.push(&content[*sent..]) {
                        on_text(&piece);
                    }
                    *sent = content.len();
                }
            }
            if assembler.is_finished() {
                let grace = if assembler.has_all_it_needs() {
                    DRAIN_GRACE
                } else {
                    FINISH_GRACE
                };
                let until = tokio::time::Instant::now() + grace;
                grace_until = Some(grace_until.map_or(until, |u| u.min(until)));
            }
        }
        if closed {
            // A last event without its blank line; once the answer is
            // complete, a garbled tail does not undo it.
            let tail = parser.finish(&mut |data: &str| assembler.event(data).map(|_| ()));
            if !assembler.is_finished() {
                tail.map_err(feed_error)?;
            }
        }
        let rest = passed.map(|(on_text, mut scrubbed, sent)| {
            let content = assembler.content();
            let mut rest = scrubbed.push(&content[sent.min(content.len())..]);
            rest.get_or_insert_default().push_str(&scrubbed.finish());
            (on_text, rest.unwrap_or_default())
        });
        let reply = assembler.finish(model).map_err(|failure| {
            if failure.kind == FailureKind::Connection {
                AttemptError::transient(failure)
            } else {
                AttemptError::fatal(failure)
            }
        })?;
        // Only a complete reply lets go of what was held back.
        if let Some((on_text, rest)) = rest.filter(|(_, rest)| !rest.is_empty()) {
            on_text(&rest);
        }
        Ok(reply)
    }

    /// Reads a whole body up to `limit` bytes, under the attempt's clocks.
    /// More is a `response-too-large` failure, or (for an error body,
    /// `truncate`) simply the first `limit` bytes.
    pub(super) async fn read_all(
        &self,
        mut response: reqwest::Response,
        limit: usize,
        watch: &mut Watch<'_>,
        truncate: bool,
    ) -> Result<Vec<u8>, AttemptError> {
        let declared = response.content_length().unwrap_or(0);
        if !truncate && declared > limit as u64 {
            return Err(AttemptError::fatal(self.too_large(limit)));
        }
        let mut body = Vec::with_capacity(declared.min(limit as u64) as usize);
        loop {
            let chunk = watch
                .bound(response.chunk())
                .await
                .map_err(AttemptError::fatal)?
                .map_err(|e| self.transport_error(&e))?;
            let Some(chunk) = chunk else { break };
            watch.bytes();
            if body.len() + chunk.len() > limit {
                if truncate {
                    body.extend_from_slice(&chunk[..limit - body.len()]);
                    break;
                }
                return Err(AttemptError::fatal(self.too_large(limit)));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    pub(super) fn too_large(&self, limit: usize) -> Failure {
        Failure::new(
            FailureKind::ResponseTooLarge,
            format!(
                "the response is larger than providers.{}.max_response_bytes ({limit} bytes)",
                self.name
            ),
        )
    }
}
