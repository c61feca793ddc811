//! Honest fitting end to end: small windows still read a real share of
//! every answer; a window that would leave stubs is skipped for a bigger
//! one, and when none fits the answers come back side by side — never a
//! "synthesis" of stubs; five 3 MB answers reach council, judge and vote
//! without losing one, and are kept whole in the record; and a run of 8 MB
//! answers reads as resources that each fit one MCP message.

use crate::support::*;

fn pipeline(name: &str, synthesizer: &str) -> String {
    format!(
        "\n[plugins.{synthesizer}]\nbuiltin = \"{synthesizer}\"\n\n[pipelines.{name}]\ndescription = \"{name}\"\nselector = \"panel\"\nprompter = \"passthrough\"\nsynthesizer = \"{synthesizer}\"\n"
    )
}

/// The test config with the synthesizers' windows set to these.
fn windows(mock: &Mock, extra: &str, synth: u32, synth2: u32) -> String {
    config(mock, extra)
        .replace(
            "[models.synth]\ncontext_window = 100000",
            &format!("[models.synth]\ncontext_window = {synth}"),
        )
        .replace(
            "[models.synth2]\ncontext_window = 100000",
            &format!("[models.synth2]\ncontext_window = {synth2}"),
        )
}

fn long_answers(mock: &Mock, chars: usize) {
    for model in PANEL {
        let text = format!("{model}: {}", "word ".repeat(chars / 5));
        mock.script(model, [Step::answer(&text)]);
    }
}

fn note(structured: &serde_json::Value, needle: &str) -> String {
    let notes = structured["notes"].to_string();
    assert!(notes.contains(needle), "no note with {needle:?} in {notes}");
    notes
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_of_8192_tokens_still_reads_a_real_share_of_every_answer() {
    let mock = Mock::start().await;
    long_answers(&mock, 10_000);
    mock.script(SYNTH, [Step::answer("merged")]);
    let server = Server::start(&windows(&mock, "", 8_192, 100_000)).await;
    let result = server.ask("ask", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    note(
        structured,
        "To fit synth's context window, the answers were cut to",
    );
    let sent = mock.requests_for(SYNTH)[0].text();
    assert_eq!(sent.matches("[… cut to fit the context window]").count(), 5);
    // A quarter of the window is kept for the reply, not 8,192 tokens: each
    // answer keeps thousands of characters (it used to keep none).
    for model in PANEL {
        let start = sent.find(&format!("{model}: ")).unwrap();
        let kept = sent[start..].find("[… cut").unwrap();
        assert!(kept > 2_500, "{model} kept {kept} characters");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_synthesizer_whose_window_would_leave_stubs_is_skipped_for_a_bigger_one() {
    let mock = Mock::start().await;
    long_answers(&mock, 10_000);
    mock.script(SYNTH, [Step::answer("never asked")]);
    mock.script(SYNTH2, [Step::answer("merged by the big one")]);
    let server = Server::start(&windows(&mock, "", 1_000, 100_000)).await;
    let result = server.ask("ask", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["answer"], "merged by the big one");
    assert!(
        mock.requests_for(SYNTH).is_empty(),
        "synth is never sent stubs"
    );
    note(
        structured,
        "Synthesizer synth failed (too small for the answers: its context window of 1000 tokens",
    );
    let sent = mock.requests_for(SYNTH2)[0].text();
    assert!(!sent.contains("[… cut"), "synth2 reads every answer whole");
}

#[tokio::test(flavor = "multi_thread")]
async fn when_no_window_can_hold_the_answers_they_come_back_side_by_side() {
    let mock = Mock::start().await;
    long_answers(&mock, 10_000);
    let server = Server::start(&windows(&mock, "", 1_000, 1_200)).await;
    let result = server.ask("ask", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "unmerged", "{structured}");
    assert!(mock.requests_for(SYNTH).is_empty() && mock.requests_for(SYNTH2).is_empty());
    let answer = structured["answer"].as_str().unwrap();
    for model in PANEL {
        assert!(answer.contains(&format!("{model}: word word")), "{model}");
    }
    assert!(answer.len() > 50_000, "every answer whole");
    note(
        structured,
        "Every synthesizer failed, so the 5 answers are shown side by side.",
    );
    note(structured, "its context window of 1200 tokens");
    assert_eq!(
        structured["summary"],
        "5 of 5 answers, side by side: merging them failed."
    );
}

const BIG: usize = 3_000_000;

fn big(model: &str, fill: &str) -> String {
    format!("{model} {}", fill.repeat(BIG / fill.len() + 1))
}

/// Call `n`'s answer, as the run store keeps it (whole: under one part).
async fn recorded_call(server: &Server, run_id: &str, n: u32) -> String {
    let (text, meta) = read_text(server, &format!("chorus://runs/{run_id}/calls/{n}/reply")).await;
    assert!(meta.is_none(), "one part");
    text
}

/// A resource's text and its `_meta`; the text fits one message.
async fn read_text(server: &Server, uri: &str) -> (String, Option<serde_json::Value>) {
    let read = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.to_owned()))
        .await
        .unwrap_or_else(|e| panic!("{uri}: {e}"));
    let rmcp::model::ResourceContents::TextResourceContents { text, meta, .. } = &read.contents[0]
    else {
        panic!("a text resource")
    };
    assert!(text.len() <= 4 << 20, "{uri} is {} bytes", text.len());
    let meta = meta
        .as_ref()
        .map(|m| serde_json::Value::Object(m.0.clone()));
    (text.clone(), meta)
}

/// A long text read part by part, each part's closing line taken off.
async fn read_parts(server: &Server, uri: &str) -> (String, u64) {
    let (mut whole, mut next, mut parts) = (String::new(), Some(uri.to_owned()), 0);
    while let Some(uri) = next.take() {
        let (text, meta) = read_text(server, &uri).await;
        let meta = meta.expect("a text in parts says so in _meta");
        parts = meta["chorus/parts"].as_u64().unwrap();
        next = meta["chorus/next"].as_str().map(str::to_owned);
        let footer = text.rfind("\n\n[part ").expect("a closing line");
        whole.push_str(&text[..footer]);
    }
    (whole, parts)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_of_five_8mb_answers_reads_as_resources_that_each_fit_one_message() {
    const EIGHT: usize = 8_000_000;
    let mock = Mock::start().await;
    let answer = |model: &str| format!("{model} {}", "é".repeat(EIGHT / 2 - 10));
    for model in PANEL {
        mock.script(model, [Step::answer(&answer(model))]);
    }
    let merged = format!("merged {}", "m".repeat(6_000_000));
    mock.script(SYNTH, [Step::answer(&merged)]);
    let server = Server::start(&config(&mock, "")).await;
    let result = server.ask("ask", "q").await;
    let run_id = structured(&result)["run_id"].as_str().unwrap().to_owned();
    let run_uri = format!("chorus://runs/{run_id}");

    // The record: every long text cut, each cut naming where it is whole.
    let (text, _) = read_text(&server, &run_uri).await;
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(record["answer_cut"]["bytes"], merged.len());
    assert_eq!(
        record["answer_cut"]["whole_at"],
        format!("{run_uri}/answer")
    );
    let calls = record["calls"].as_array().unwrap();
    let answered: Vec<u64> = calls
        .iter()
        .filter(|c| c["stage"] == "fan-out" && c["status"] == "ok")
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    assert!(!answered.is_empty(), "{:#}", record["calls"]);
    for call in calls
        .iter()
        .filter(|c| answered.contains(&c["id"].as_u64().unwrap()))
    {
        let id = call["id"].as_u64().unwrap();
        assert_eq!(
            call["reply_cut"]["whole_at"],
            format!("{run_uri}/calls/{id}/reply")
        );
    }

    // The answer and a model's reply, whole, part by part.
    let (whole, parts) = read_parts(&server, &format!("{run_uri}/answer")).await;
    assert_eq!((whole.len(), parts), (merged.len(), 2));
    assert!(whole == merged, "the parts make the answer");
    let n = answered[0];
    let (call, _) = read_text(&server, &format!("{run_uri}/calls/{n}")).await;
    let call: serde_json::Value = serde_json::from_str(&call).unwrap();
    let model = call["model"].as_str().unwrap().to_owned();
    assert_eq!(call["reply_cut"]["bytes"], answer(&model).len());
    let (reply, parts) = read_parts(&server, &format!("{run_uri}/calls/{n}/reply")).await;
    assert_eq!(parts, 2);
    assert!(reply == answer(&model), "the parts make {model}'s answer");

    // Past the last part: what there is.
    let missing = server
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "{run_uri}/answer?part=3"
        )))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("has 2 part(s); there is no part 3"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn five_3mb_answers_reach_council_judge_and_vote_and_none_is_lost() {
    // Best-of: the judge reads cut copies; its pick comes back whole.
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(&big(model, "judge me "))]);
    }
    mock.script(
        SYNTH,
        [Step::answer(
            r#"{"scores": {"A": 9, "B": 1, "C": 1, "D": 1, "E": 1}}"#,
        )],
    );
    let server = Server::start(&config(&mock, &pipeline("best-of", "judge"))).await;
    let judged = server.ask("best-of", "q").await;
    let verdict = structured(&judged).clone();
    assert_eq!(verdict["kind"], "pick", "{}", verdict["notes"]);
    let answer = verdict["answer"].as_str().unwrap();
    assert!(answer.len() > BIG && !answer.contains("[… chorus cut"));
    let sent = mock.requests_for(SYNTH)[0].text();
    assert!(sent.len() < 600_000, "the judge got {} bytes", sent.len());
    note(&verdict, "were handed to the strategy cut to ");
    let run_id = verdict["run_id"].as_str().unwrap();
    assert!(recorded_call(&server, run_id, 0).await.len() > BIG);
    drop(server);

    // Council: five rankers, each shown four answers, and a chairman.
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(
            model,
            [
                Step::answer(&big(model, "rank me ")),
                Step::answer(r#"{"ranking": ["A", "B", "C", "D"]}"#),
            ],
        );
    }
    mock.script(SYNTH, [Step::answer("the chairman's answer")]);
    let server = Server::start(&config(&mock, &pipeline("council", "council"))).await;
    let structured = crate::support::structured(&server.ask("council", "q").await).clone();
    assert_eq!(structured["kind"], "synthesis", "{}", structured["notes"]);
    assert_eq!(structured["answer"], "the chairman's answer");
    assert_eq!(
        structured["details"]["ballots"].as_array().unwrap().len(),
        5
    );
    drop(server);

    // Vote: three identical 3 MB answers win, returned whole.
    let mock = Mock::start().await;
    let same = big("same", "vote ");
    for (i, model) in PANEL.iter().enumerate() {
        let text = if i < 3 {
            same.clone()
        } else {
            big(model, "other ")
        };
        mock.script(model, [Step::answer(&text)]);
    }
    let server = Server::start(&config(&mock, &pipeline("vote", "vote"))).await;
    let structured = crate::support::structured(&server.ask("vote", "q").await).clone();
    assert_eq!(structured["kind"], "vote", "{}", structured["notes"]);
    assert_eq!(structured["answer"].as_str().unwrap(), same.as_str());
    note(&structured, "3 of 5");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_synthesizer_that_fails_returns_the_3mb_answers_whole() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer(&big(model, "paid for "))]);
    }
    // It cites a call the run never made: the merge is unusable.
    let extra = format!(
        "\n[plugins.broken]\npath = \"{}/chaos_synthesizer.wasm\"\nsettings = {{ mode = \"bad-id\" }}\n\n[pipelines.broken]\ndescription = \"broken\"\nselector = \"panel\"\nprompter = \"passthrough\"\nsynthesizer = \"broken\"\n",
        plugin_dir().display()
    );
    let config = config(&mock, &extra);

    // Over MCP, the side by side (15 MB) is more than one message carries
    // (rmcp's clients drop lines over 16 MiB): it is cut, and says where
    // each answer is whole — and there they are.
    let server = Server::start(&config).await;
    let result = server.ask("broken", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "unmerged", "{}", structured["notes"]);
    note(structured, "Merging failed");
    note(structured, "more than one MCP message carries");
    let run_id = structured["run_id"].as_str().unwrap();
    for call in calls(structured, "fan-out") {
        let id = call["id"].as_u64().unwrap() as u32;
        assert!(recorded_call(&server, run_id, id).await.len() > BIG);
    }
    drop(server);

    // From the terminal, every paid answer whole.
    let file = write_config(&config);
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        command(&[
            "ask",
            "--json",
            "-q",
            "-p",
            "broken",
            "--config",
            file.path.to_str().unwrap(),
            "q",
        ])
        .output(),
    )
    .await
    .expect("chorus finished within 60 s")
    .expect("chorus ran");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let record: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(record["kind"], "unmerged");
    let answer = record["answer"].as_str().unwrap();
    assert!(
        answer.len() > 5 * BIG,
        "every paid answer whole: {}",
        answer.len()
    );
    assert!(!answer.contains("[… chorus cut") && !answer.contains("[… cut"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_council_member_whose_window_is_too_small_casts_no_ballot_and_says_why() {
    let mock = Mock::start().await;
    for model in PANEL {
        let text = format!("{model}: {}", "word ".repeat(2_000));
        mock.script(
            model,
            [
                Step::answer(&text),
                Step::answer(r#"{"ranking": ["A", "B", "C", "D"]}"#),
            ],
        );
    }
    mock.script(SYNTH, [Step::answer("the chairman's answer")]);
    let text = config(&mock, &pipeline("council", "council")).replace(
        "[models.m5]\ncontext_window = 100000",
        "[models.m5]\ncontext_window = 1000",
    );
    let server = Server::start(&text).await;
    let structured = structured(&server.ask("council", "q").await).clone();
    assert_eq!(structured["kind"], "synthesis", "{}", structured["notes"]);
    assert_eq!(
        structured["details"]["ballots"].as_array().unwrap().len(),
        4
    );
    assert_eq!(mock.requests_for("m5").len(), 1, "m5 is not asked to rank");
    note(
        &structured,
        "m5 did not rank: its context window of 1000 tokens leaves",
    );
}
