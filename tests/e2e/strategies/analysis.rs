//! The `analysis` pipeline end to end: the panel answers, an analyst maps
//! their agreement and disagreement (who holds which side), a writer
//! answers from it. A garbage analysis is used as free text and said so;
//! a failing analyst falls over to the next, and with no analyst and no
//! writer the paid answers come back side by side.

use serde_json::{Value, json};

use crate::support::*;

const PIPELINE: &str = r#"
[plugins.analysis]
builtin = "analysis"

[pipelines.analysis]
description = "Analysis, then an answer written from it."
selector = "panel"
prompter = "passthrough"
synthesizer = "analysis"
"#;

fn panel_disagrees(mock: &Mock) {
    for model in ["m1", "m2", "m3"] {
        mock.script(model, [Step::answer(&format!("{model}: about 70 C"))]);
    }
    for model in ["m4", "m5"] {
        mock.script(model, [Step::answer(&format!("{model}: about 90 C"))]);
    }
}

/// The models under each letter in the analyst's prompt.
fn letters(prompt: &str) -> Vec<(String, String)> {
    prompt
        .split("--- Answer ")
        .skip(1)
        .map(|part| {
            let (letter, rest) = part.split_once(" ---").unwrap();
            let model = rest.trim().split(':').next().unwrap().to_owned();
            (letter.to_owned(), model)
        })
        .collect()
}

fn models_of(held_by: &Value) -> Vec<String> {
    let mut models: Vec<String> = held_by
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["model"].as_str().unwrap().to_owned())
        .collect();
    models.sort();
    models
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_disagreement_shows_both_sides_and_who_holds_them() {
    let mock = Mock::start().await;
    panel_disagrees(&mock);
    let analysis = r#"Here is my analysis.
```json
{
  "consensus": ["water boils lower at altitude"],
  "disagreements": [{"point": "the boiling point on Everest",
    "sides": [{"position": "about 70 C", "held_by": ["A", "B"]},
              {"position": "about 90 C", "held_by": ["C", "D", "E"]}]}],
  "unique_insights": [],
  "likely_errors": [{"error": "90 C is too high at 8,849 m", "held_by": ["C"]}],
  "blind_spots": ["air pressure varies with weather"],
  "confidence": {"level": "medium", "score": 0.6, "why": "the answers split"}
}
```"#;
    mock.script(
        SYNTH,
        [
            Step::answer(analysis),
            Step::answer("Water boils at about 70 C on Everest."),
        ],
    );
    let server = Server::start(&config(&mock, PIPELINE)).await;
    let result = server
        .ask(
            "analysis",
            "At what temperature does water boil on Everest?",
        )
        .await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis", "{}", structured["notes"]);
    assert_eq!(
        structured["answer"],
        "Water boils at about 70 C on Everest."
    );
    assert_eq!(structured["summary"], "Synthesis of 5 of 5 answers.");

    // The analyst saw anonymous letters; the result names the models
    // that were really under them, on each side.
    let requests = mock.requests_for(SYNTH);
    let analyst_prompt = requests[0].text();
    let letters = letters(&analyst_prompt);
    assert_eq!(letters.len(), 5);
    let under = |wanted: &[&str]| {
        let mut models: Vec<String> = letters
            .iter()
            .filter(|(l, _)| wanted.contains(&l.as_str()))
            .map(|(_, m)| m.clone())
            .collect();
        models.sort();
        models
    };
    let details = &structured["details"];
    assert_eq!(details["analysis"]["parsed"], true);
    let sides = &details["analysis"]["disagreements"][0]["sides"];
    assert_eq!(sides[0]["position"], "about 70 C");
    assert_eq!(models_of(&sides[0]["held_by"]), under(&["A", "B"]));
    assert_eq!(models_of(&sides[1]["held_by"]), under(&["C", "D", "E"]));
    assert_eq!(details["analysis"]["confidence"]["level"], "medium");

    // Every holder is cited by its call id, and the analyst's call too.
    let fan_out = calls(structured, "fan-out");
    for holder in sides[1]["held_by"].as_array().unwrap() {
        let call = fan_out
            .iter()
            .find(|c| c["id"] == holder["call"])
            .expect("a fan-out call");
        assert_eq!(call["model"], holder["model"]);
    }
    let analyst_call = structured["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "analysis")
        .unwrap();
    assert_eq!(details["analyst"]["call"], analyst_call["id"]);
    assert_eq!(details["writer"], SYNTH);

    // Readable in the text: the sides with their models, the confidence.
    let text = text(&result);
    let named = |wanted: &[&str]| -> String {
        wanted
            .iter()
            .map(|w| letters.iter().find(|(l, _)| l == w).unwrap().1.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let line = format!(
        "Disagreement: the boiling point on Everest — \"about 70 C\" ({}) vs \"about 90 C\" ({})",
        named(&["A", "B"]),
        named(&["C", "D", "E"])
    );
    assert!(text.contains(&line), "{line}\n{text}");
    assert!(
        text.contains(&format!(
            "Likely error: 90 C is too high at 8,849 m ({})",
            named(&["C"])
        )),
        "{text}"
    );
    assert!(
        text.contains("Confidence: medium (0.60) — the answers split."),
        "{text}"
    );
    assert!(text.contains("Consensus: water boils lower at altitude."));

    // The writer read the analysis and every answer.
    let writer_prompt = requests[1].text();
    assert!(writer_prompt.contains("Analysis of the answers:"));
    assert!(writer_prompt.contains("\"about 70 C\" (A, B) vs \"about 90 C\" (C, D, E)"));
    for model in PANEL {
        assert!(
            writer_prompt.contains(&format!("{model}: about")),
            "{model}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_analyst_that_returns_garbage_still_yields_an_answer_marked_unparsed() {
    let mock = Mock::start().await;
    panel_disagrees(&mock);
    mock.script(
        SYNTH,
        [
            Step::answer("honestly they all look fine to me {{{ not json"),
            Step::answer("The final answer."),
        ],
    );
    let server = Server::start(&config(&mock, PIPELINE)).await;
    let result = server.ask("analysis", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["answer"], "The final answer.");
    assert_eq!(structured["details"]["analysis"]["parsed"], false);
    assert_eq!(
        structured["details"]["analysis"]["text"],
        "honestly they all look fine to me {{{ not json"
    );
    assert!(
        text(&result).contains(
            "did not reply in the structured form asked for, so its analysis was used as free text"
        ),
        "{}",
        text(&result)
    );
    let writer_prompt = mock.requests_for(SYNTH)[1].text();
    assert!(writer_prompt.contains("Analysis of the answers (free text):"));
    // With no catalog saying the model takes a response format, none was
    // sent, and the notes say the reply was read leniently.
    assert!(
        mock.requests_for(SYNTH)[0]
            .body
            .get("response_format")
            .is_none()
    );
    assert!(
        text(&result).contains(
            "The analyst synth takes no response format (by its catalog entry, or its provider refused one), so its reply was read leniently."
        ),
        "{}",
        text(&result)
    );
    assert_eq!(structured["details"]["analyst"]["format"], "none");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_analyst_falls_over_and_with_none_left_the_answers_come_side_by_side() {
    let mock = Mock::start().await;
    panel_disagrees(&mock);
    mock.script(SYNTH, [Step::status(500, "synth is down")]);
    mock.script(
        SYNTH2,
        [
            Step::answer(r#"{"consensus": ["it is hot"], "confidence": "low"}"#),
            Step::answer("Written by the second."),
        ],
    );
    let server = Server::start(&config(&mock, PIPELINE)).await;
    let structured = crate::support::structured(&server.ask("analysis", "q").await).clone();
    assert_eq!(structured["kind"], "synthesis");
    assert_eq!(structured["answer"], "Written by the second.");
    let notes = structured["notes"].to_string();
    assert!(
        notes.contains(
            "Analyst synth failed (HTTP error (HTTP 500): synth is down); fell back to synth2."
        ),
        "{notes}"
    );
    assert!(
        notes.contains(
            "The analysis left out disagreements, unique insights, likely errors, blind spots"
        ),
        "{notes}"
    );
    assert_eq!(structured["details"]["analyst"]["model"], SYNTH2);
    drop(server);

    // No analyst and no writer: the paid answers, side by side.
    let mock = Mock::start().await;
    panel_disagrees(&mock);
    mock.script(SYNTH, [Step::status(500, "synth is down")]);
    mock.script(SYNTH2, [Step::status(503, "synth2 is down")]);
    let server = Server::start(&config(&mock, PIPELINE)).await;
    let structured = crate::support::structured(&server.ask("analysis", "q").await).clone();
    assert_eq!(structured["kind"], "unmerged", "{}", structured["notes"]);
    let answer = structured["answer"].as_str().unwrap();
    for model in PANEL {
        assert!(answer.contains(&format!("## {model}")), "{answer}");
    }
    let notes = structured["notes"].to_string();
    assert!(
        notes.contains("Every writer failed, so the 5 answers are shown side by side."),
        "{notes}"
    );
    assert!(
        notes.contains("No analyst could analyse the answers"),
        "{notes}"
    );
    assert_eq!(structured["details"]["analysis"], Value::Null);
}

const STRICT_ANALYSIS: &str = r#"{"consensus": ["it boils lower up high"], "disagreements": [],
  "unique_insights": [], "likely_errors": [], "blind_spots": [],
  "confidence": {"level": "high", "score": 0.9, "why": "they agree"}}"#;

fn analysis_call(structured: &Value) -> Value {
    structured["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "analysis")
        .cloned()
        .expect("an analysis call")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_analyst_is_held_to_the_schema_where_its_model_takes_structured_outputs() {
    let mock = Mock::start().await;
    panel_disagrees(&mock);
    catalog_taking(
        &mock,
        &[(SYNTH, &["structured_outputs", "response_format"])],
    );
    mock.script(
        SYNTH,
        [
            Step::answer(STRICT_ANALYSIS),
            Step::answer("It boils at about 70 C."),
        ],
    );
    let server = Server::start(&config(&mock, PIPELINE)).await;
    let result = server.ask("analysis", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis", "{}", structured["notes"]);

    let requests = mock.requests_for(SYNTH);
    let format = &requests[0].body["response_format"];
    assert_eq!(format["type"], "json_schema", "{format}");
    assert_eq!(format["json_schema"]["name"], "panel_analysis");
    assert_eq!(format["json_schema"]["strict"], true);
    let schema = &format["json_schema"]["schema"];
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"].as_array().unwrap().len(), 6, "{schema}");
    // A strict model can only cite the letters the analyst was shown.
    let held_by = &schema["properties"]["likely_errors"]["items"]["properties"]["held_by"];
    assert_eq!(held_by["items"]["enum"], json!(["A", "B", "C", "D", "E"]));
    // Nothing else asked for a format: not the writer, not the panel.
    assert!(requests[1].body.get("response_format").is_none());
    for model in PANEL {
        assert!(
            mock.requests_for(model)[0]
                .body
                .get("response_format")
                .is_none()
        );
    }

    // The user sees what was sent, in the notes, the details and the call.
    assert!(
        text(&result).contains(
            "The analyst synth was held to the analysis's JSON schema (structured outputs)."
        ),
        "{}",
        text(&result)
    );
    assert_eq!(structured["details"]["analyst"]["format"], "json-schema");
    assert_eq!(analysis_call(structured)["format_sent"], "json-schema");
    assert_eq!(
        structured["details"]["analysis"]["confidence"]["level"],
        "high"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_with_only_a_json_mode_is_asked_for_json() {
    let mock = Mock::start().await;
    panel_disagrees(&mock);
    catalog_taking(&mock, &[(SYNTH, &["response_format"])]);
    mock.script(
        SYNTH,
        [Step::answer(STRICT_ANALYSIS), Step::answer("Final.")],
    );
    let server = Server::start(&config(&mock, PIPELINE)).await;
    let result = server.ask("analysis", "q").await;
    let format = &mock.requests_for(SYNTH)[0].body["response_format"];
    assert_eq!(format, &json!({"type": "json_object"}));
    assert!(
        text(&result).contains(
            "The analyst synth was asked for JSON (its provider has a JSON mode but no schemas); its reply was read leniently."
        ),
        "{}",
        text(&result)
    );
    assert_eq!(
        analysis_call(structured(&result))["format_sent"],
        "json-object"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_refuses_the_schema_is_asked_again_without_it() {
    let mock = Mock::start().await;
    panel_disagrees(&mock);
    catalog_taking(&mock, &[(SYNTH, &["structured_outputs"])]);
    mock.script(
        SYNTH,
        [
            Step::status(400, "Invalid schema for response_format 'panel_analysis'"),
            Step::answer(STRICT_ANALYSIS),
            Step::answer("Final."),
        ],
    );
    let server = Server::start(&config(&mock, PIPELINE)).await;
    let result = server.ask("analysis", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "synthesis", "{}", structured["notes"]);
    let requests = mock.requests_for(SYNTH);
    assert_eq!(requests[0].body["response_format"]["type"], "json_schema");
    assert!(requests[1].body.get("response_format").is_none());
    assert_eq!(
        requests[1].text(),
        requests[0].text(),
        "the same request, without the format"
    );
    let call = analysis_call(structured);
    assert_eq!(call["status"], "ok");
    assert_eq!(call["attempts"], 2, "{call}");
    assert!(call.get("format_sent").is_none(), "{call}");
    assert_eq!(structured["details"]["analyst"]["format"], "none");
    assert_eq!(structured["details"]["analysis"]["parsed"], true);
}
