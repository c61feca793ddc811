use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::llm::secret::Scrubber;
use crate::llm::sse::SseParser;
use crate::llm::wire::parse_reply;

fn assemble(events: &[serde_json::Value], done: bool) -> Result<Reply, Failure> {
    let mut assembler = Assembler::new(Scrubber::none());
    for event in events {
        assembler.event(&event.to_string())?;
    }
    if done {
        assembler.event("[DONE]")?;
    }
    assembler.finish("asked/model")
}

fn delta(content: &str) -> serde_json::Value {
    json!({"model": "served/model", "choices": [{"delta": {"content": content}}]})
}

#[test]
fn deltas_join_and_usage_comes_from_the_last_chunk() {
    let reply = assemble(
        &[
            json!({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
            delta("Hel"),
            json!({"choices": [{"delta": {"reasoning": "thinking hard"}}]}),
            delta("lo"),
            json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "cost": 0.001}}),
        ],
        true,
    )
    .unwrap();
    assert_eq!(*reply.content, "Hello", "reasoning never enters the answer");
    assert_eq!(reply.served_by, "served/model");
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    let usage = reply.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.cost), (5, Some(0.001)));
}

#[test]
fn an_error_chunk_in_a_200_stream_is_a_typed_failure() {
    let failure = assemble(
        &[
            delta("partial"),
            json!({"error": {"code": 502, "message": "Upstream died mid-answer"},
                   "choices": [{"delta": {"content": ""}, "finish_reason": "error"}]}),
        ],
        false,
    )
    .unwrap_err();
    assert_eq!(failure.kind, FailureKind::HttpStatus);
    assert_eq!(failure.status, Some(502));
    assert_eq!(failure.message, "Upstream died mid-answer");
}

#[test]
fn a_stream_cut_short_is_a_connection_failure_and_a_token_budget_spent_says_so() {
    let failure = assemble(&[delta("half an ans")], false).unwrap_err();
    assert_eq!(failure.kind, FailureKind::Connection);
    assert!(
        failure
            .message
            .contains("ended before the answer was complete")
    );

    let failure = assemble(
        &[
            json!({"choices": [{"delta": {"reasoning": "so much thinking"}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "length"}]}),
        ],
        true,
    )
    .unwrap_err();
    assert_eq!(failure.kind, FailureKind::TokenLimit);
}

#[test]
fn a_finish_reason_is_enough_without_done_and_garbage_is_malformed() {
    let reply = assemble(
        &[
            delta("ok"),
            json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
        ],
        false,
    )
    .unwrap();
    assert_eq!(*reply.content, "ok");
    let mut assembler = Assembler::new(Scrubber::none());
    let failure = assembler.event("not json").unwrap_err();
    assert_eq!(failure.kind, FailureKind::MalformedResponse);
}

/// How the same answer travels as SSE: `content` cut into deltas, with
/// keep-alives and reasoning in between, the bytes cut anywhere.
fn sse_bytes(
    pieces: &[String],
    reasoning_every: usize,
    crlf: bool,
    usage: &serde_json::Value,
) -> Vec<u8> {
    let end = if crlf { "\r\n" } else { "\n" };
    let mut out = format!(": OPENROUTER PROCESSING{end}{end}");
    out.push_str(&format!(
        "data: {}{end}{end}",
        json!({"model": "served/model", "choices": [{"delta": {"role": "assistant", "content": ""}}]})
    ));
    for (i, piece) in pieces.iter().enumerate() {
        if reasoning_every > 0 && i % reasoning_every == 0 {
            out.push_str(&format!(
                "data: {}{end}{end}: keep-alive{end}",
                json!({"choices": [{"delta": {"reasoning": format!("step {i}")}}]})
            ));
        }
        out.push_str(&format!("data: {}{end}{end}", delta(piece)));
    }
    out.push_str(&format!(
        "data: {}{end}{end}",
        json!({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": usage})
    ));
    out.push_str(&format!("data: [DONE]{end}{end}"));
    out.into_bytes()
}

proptest! {
    /// The assembled answer equals what the non-streaming path returns for
    /// the same content, whatever the split, the keep-alives, the reasoning
    /// and the line endings.
    #[test]
    fn streamed_and_whole_answers_agree(
        pieces in prop::collection::vec("\\PC{0,12}", 0..12),
        reasoning_every in 0usize..4,
        crlf in any::<bool>(),
        cuts in prop::collection::vec(0usize..2000, 0..10),
        prompt in 0u32..100_000,
        completion in 0u32..100_000,
    ) {
        let content: String = pieces.concat();
        let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion});
        let whole = json!({
            "model": "served/model",
            "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
            "usage": usage,
        });
        let expected = parse_reply(whole.to_string().as_bytes(), "asked/model", &Scrubber::none());

        let bytes = sse_bytes(&pieces, reasoning_every, crlf, &usage);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
        cuts.sort_unstable();
        let mut parser = SseParser::new(1 << 20);
        let mut assembler = Assembler::new(Scrubber::none());
        let mut at = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            parser
                .feed(&bytes[at..cut], &mut |d: &str| assembler.event(d).map(|_| ()))
                .unwrap();
            at = cut;
        }
        parser.finish(&mut |d: &str| assembler.event(d).map(|_| ())).unwrap();
        prop_assert_eq!(assembler.finish("asked/model"), expected);
    }
}

#[test]
fn streamed_annotations_are_kept_once_and_a_bad_one_fails_nothing() {
    let cite = json!({"type": "url_citation",
                      "url_citation": {"url": "https://a.example", "title": "A",
                                       "start_index": 0, "end_index": 5}});
    let reply = assemble(
        &[
            delta("Hello world"),
            json!({"choices": [{"delta": {"annotations": [cite.clone()]}}]}),
            // Repeated on a later chunk, with junk beside it.
            json!({"choices": [{"delta": {"annotations": [cite, {"url_citation": 3}, "x"]}}]}),
            json!({"choices": [{"delta": {"annotations": "not a list"}, "finish_reason": "stop"}]}),
        ],
        true,
    )
    .unwrap();
    assert_eq!(*reply.content, "Hello world");
    assert_eq!(reply.citations.len(), 1);
    assert_eq!(reply.citations[0].cited.as_deref(), Some("Hello"));
    let whole = parse_reply(
        br#"{"choices": [{"message": {"content": "Hi", "annotations": {"odd": true}}}]}"#,
        "m",
        &Scrubber::none(),
    )
    .unwrap();
    assert!(whole.citations.is_empty());
}
