//! `chorus eval`: the harness against the mock, with scripted right and
//! wrong answers — the accuracy and the cost it computes, the journal it
//! resumes from, the chart it draws, and the errors it gives before
//! spending anything.

use serde_json::Value;

use crate::support::*;

const DATASET: &str = r#"
{"id": "capital", "question": "Capital of France?", "expected": "Paris"}
{"id": "product", "question": "6 times 7?", "expected": "42", "grader": "numeric"}
{"id": "yes", "question": "Is water wet?", "expected": "^(?i)yes\\b", "grader": "regex"}
{"id": "sky", "question": "What colour is the sky?", "expected": "blue", "grader": "judge", "rubric": "Right if it says blue."}
"#;

async fn chorus(args: &[&str]) -> (i32, String, String) {
    let output = command(args).output().await.expect("chorus ran");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_grades_scripted_answers_and_counts_cost_then_resumes_from_its_journal() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("a panel answer")]);
    }
    // The `ask` pipeline's merged answers: right, wrong, right, right.
    mock.script(
        SYNTH,
        [
            Step::answer("The capital is Paris."),
            Step::answer("It is 41."),
            Step::answer("Yes, it is."),
            Step::answer("Blue."),
        ],
    );
    // synth2 judges `ask`'s last answer, then answers as a model on its own
    // (right, right, wrong, and a fourth the judge fails).
    mock.script(
        SYNTH2,
        [
            Step::answer("PASS: it says blue"),
            Step::answer("Paris"),
            Step::answer("6 x 7 = 42"),
            Step::answer("No."),
            Step::answer("Red."),
            Step::answer("FAIL: it says red"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("questions.jsonl");
    std::fs::write(&dataset, DATASET).unwrap();
    let chart = dir.path().join("chart.svg");
    let file = write_config(&config(&mock, ""));
    let config = file.path.to_str().unwrap();
    let run = |extra: &'static [&'static str]| {
        let mut args = vec![
            "eval",
            dataset.to_str().unwrap(),
            "--config",
            config,
            "--pipelines",
            "ask,model:synth2",
            "--judge",
            "synth2",
            "--concurrency",
            "1",
            "--json",
            "--chart",
            chart.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        async move { chorus(&args).await }
    };
    let (code, stdout, stderr) = run(&[]).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let summaries = report["summaries"].as_array().unwrap();
    let ask = &summaries[0];
    assert_eq!(ask["target"], "ask");
    assert_eq!(
        (ask["correct"].as_u64(), ask["questions"].as_u64()),
        (Some(3), Some(4))
    );
    assert_eq!(ask["accuracy"], 0.75);
    // Six calls a run (five panel answers and the merge) at $0.0005 each.
    assert_eq!(ask["cost_usd"], 0.012);
    assert_eq!(ask["cost_per_question_usd"], 0.003);
    let model = &summaries[1];
    assert_eq!(model["target"], "model:synth2");
    assert_eq!(model["correct"], 2);
    assert_eq!(
        model["cost_usd"], 0.002,
        "one call a question; judging is not billed to it"
    );
    let outcomes = report["outcomes"].as_array().unwrap();
    let wrong = outcomes
        .iter()
        .find(|o| o["target"] == "ask" && o["item"] == "product")
        .unwrap();
    assert_eq!(wrong["grade"]["pass"], false);
    assert_eq!(wrong["grade"]["why"], "41 is outside 42 ± 0");
    assert!(wrong["run_id"].is_string(), "the run is in the store");
    let judged = outcomes
        .iter()
        .find(|o| o["target"] == "model:synth2" && o["item"] == "sky")
        .unwrap();
    assert_eq!(judged["grade"]["why"], "judge synth2: FAIL: it says red");
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("ask (75%)") && svg.contains("model:synth2 (50%)")
    );
    let calls = mock.requests().len();
    assert_eq!(calls, 4 * 6 + 4 + 2, "runs, model answers, judgements");

    // Run again: everything comes from the journal, nothing is asked.
    let (code, stdout, stderr) = run(&["--quiet"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mock.requests().len(), calls, "nothing asked again");
    let again: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(again["summaries"], report["summaries"]);

    // A journal cut short: only the missing outcome is asked again.
    let journal = dir.path().join("questions.results.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("\"item\":\"capital\",\"target\":\"model:synth2\""))
        .collect();
    assert_eq!(kept.len(), 7);
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();
    mock.script(SYNTH2, [Step::answer("Paris")]);
    let (code, _, stderr) = run(&[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mock.requests().len(), calls + 1);
    assert!(stderr.contains("7 of 8 outcomes were resumed"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_says_what_is_wrong_before_spending_anything() {
    let mock = Mock::start().await;
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("q.jsonl");
    let file = write_config(&config(&mock, ""));
    let config = file.path.to_str().unwrap();

    std::fs::write(
        &dataset,
        "{\"question\": \"q\", \"expected\": \"(\", \"grader\": \"regex\"}\n",
    )
    .unwrap();
    let (code, _, stderr) = chorus(&["eval", dataset.to_str().unwrap(), "--config", config]).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("q.jsonl:1: `expected` is not a regular expression"),
        "{stderr}"
    );

    std::fs::write(&dataset, DATASET).unwrap();
    let (code, _, stderr) = chorus(&[
        "eval",
        dataset.to_str().unwrap(),
        "--config",
        config,
        "--pipelines",
        "nope,model:gone",
    ])
    .await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no pipeline `nope` (pipelines: ask;"),
        "{stderr}"
    );
    assert!(stderr.contains("no model `gone`"), "{stderr}");
    assert!(
        stderr.contains("graded by a judge: name its model with --judge MODEL"),
        "{stderr}"
    );
    assert!(mock.requests().is_empty());
}

/// The shipped example runs as documented. With `CHORUS_SHOW_EVAL=1` the
/// table is printed and the chart kept in the target directory.
#[tokio::test(flavor = "multi_thread")]
async fn the_example_dataset_runs_against_scripted_models() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(model, [Step::answer("a panel answer")]);
    }
    mock.script(
        SYNTH,
        [
            "Canberra",
            "1.414",
            "There are 25.",
            "212 °F",
            "Yes: switching wins two times in three.",
            "The ball costs 5 cents.",
            "3",
            "Each side must learn and acknowledge the other's initial sequence number: SYN, SYN-ACK, ACK.",
        ]
        .map(Step::answer),
    );
    mock.script(
        SYNTH2,
        [
            "PASS: it names the sequence numbers of both sides",
            "Sydney",
            "1.414",
            "25",
            "212",
            "No, it makes no difference.",
            "10 cents",
            "2",
            "It makes the connection reliable.",
            "FAIL: it does not mention sequence numbers",
        ]
        .map(Step::answer),
    );
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/questions.jsonl");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("eval-example");
    let file = write_config(&config(&mock, ""));
    let journal = out.join("questions.results.jsonl");
    let chart = out.join("questions.svg");
    let output = command(&[
        "eval",
        example,
        "--config",
        file.path.to_str().unwrap(),
        "--pipelines",
        "ask,model:synth2",
        "--judge",
        "synth2",
        "--concurrency",
        "1",
        "--fresh",
        "--journal",
        journal.to_str().unwrap(),
        "--chart",
        chart.to_str().unwrap(),
    ])
    .output()
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<&str> = table.lines().collect();
    assert!(
        rows[1].starts_with("ask ") && rows[1].contains("100.0%") && rows[1].contains("8/8"),
        "{table}"
    );
    assert!(
        rows[2].starts_with("model:synth2") && rows[2].contains("37.5%") && rows[2].contains("3/8"),
        "{table}"
    );
    if std::env::var_os("CHORUS_SHOW_EVAL").is_some() {
        println!("{table}\nchart: {}", chart.display());
    }
}
