//! Each ensemble strategy end to end over MCP, with scripted answers that
//! show its logic: heavy's sub-questions and fallback, mixture layers, the
//! vote's majority and ties, the judge's blind pick, the council's
//! self-excluding ballots, and the debate stopping when it converges.

use serde_json::json;

use crate::support::*;

fn pipeline(name: &str, prompter: &str, synthesizer: &str, options: &str) -> String {
    format!(
        r#"
[pipelines.{name}]
description = "{name}"
selector = "panel"
prompter = "{prompter}"
synthesizer = "{synthesizer}"
{options}
"#
    )
}

fn plugin(name: &str, builtin: &str, settings: &str) -> String {
    format!("\n[plugins.{name}]\nbuiltin = \"{builtin}\"\nsettings = {{ {settings} }}\n")
}

fn heavy_config(mock: &Mock) -> String {
    let extra = [
        plugin("heavy-planner", "heavy-planner", ""),
        plugin("parts", "synthesize", "show_labels = true"),
        pipeline(
            "heavy",
            "heavy-planner",
            "parts",
            r#"options.agents = { type = "integer", description = "Agents.", minimum = 1, maximum = 16, default = 4 }"#,
        ),
    ]
    .concat();
    config(mock, &extra)
}

#[tokio::test(flavor = "multi_thread")]
async fn heavy_splits_the_question_and_shows_which_agent_answered_what() {
    let mock = Mock::start().await;
    let plan = r#"Here is the plan:
```json
["What is the history of X?", "What are the risks of X?", "What do experts recommend about X?"]
```"#;
    mock.script(
        SYNTH,
        [Step::answer(plan), Step::answer("THE HEAVY ANSWER")],
    );
    for model in PANEL {
        mock.script(model, [Step::answer(&format!("{model} on its part"))]);
    }
    let server = Server::start(&heavy_config(&mock)).await;
    let result = server
        .call(
            "heavy",
            json!({"prompt": "Should we adopt X?", "agents": 3}),
        )
        .await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    let structured = structured(&result);
    assert_eq!(structured["answer"], "THE HEAVY ANSWER");
    assert_eq!(structured["kind"], "synthesis");

    let agents = calls(structured, "fan-out");
    let labels: Vec<&str> = agents
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "agent 1: What is the history of X?",
            "agent 2: What are the risks of X?",
            "agent 3: What do experts recommend about X?"
        ]
    );
    let models: Vec<&str> = agents
        .iter()
        .map(|c| c["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["m1", "m2", "m3"], "agents cycle through the panel");
    assert!(
        mock.requests_for("m2")[0]
            .text()
            .contains("Your sub-question:\nWhat are the risks of X?")
    );
    let merge = mock.requests_for(SYNTH)[1].text();
    assert!(
        merge.contains("--- agent 2: What are the risks of X? ---\nm2 on its part"),
        "{merge}"
    );
    assert_eq!(
        structured["details"]["inputs"][1]["label"],
        "agent 2: What are the risks of X?"
    );
    assert_eq!(structured["details"]["inputs"][1]["model"], "m2");

    let too_many = server
        .call("heavy", json!({"prompt": "q", "agents": 17}))
        .await;
    assert_eq!(too_many.is_error, Some(true));
    assert!(
        text(&too_many).contains("`agents` must be between 1 and 16, got 17"),
        "{}",
        text(&too_many)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn heavy_falls_back_to_fixed_angles_when_the_plan_is_garbage_and_says_so() {
    let mock = Mock::start().await;
    mock.script(
        SYNTH,
        [
            Step::answer("I'd rather not make a list."),
            Step::answer("merged angles"),
        ],
    );
    for model in PANEL {
        mock.script(model, [Step::answer("an angle")]);
    }
    let server = Server::start(&heavy_config(&mock)).await;
    let result = server
        .call("heavy", json!({"prompt": "q", "agents": 2}))
        .await;
    let structured = structured(&result);
    let labels: Vec<String> = calls(structured, "fan-out")
        .iter()
        .map(|c| c["label"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        labels[0].starts_with("agent 1: Research:") && labels[1].starts_with("agent 2: Analysis:"),
        "{labels:?}"
    );
    let notes = structured["notes"].to_string();
    assert!(
        notes.contains("0 usable sub-questions of the 2 asked") && notes.contains("fixed angles"),
        "{notes}"
    );
    assert_eq!(structured["answer"], "merged angles");
}

#[tokio::test(flavor = "multi_thread")]
async fn mixture_of_agents_feeds_each_layer_the_previous_answers() {
    let mock = Mock::start().await;
    for (i, model) in PANEL.iter().enumerate() {
        mock.script(
            model,
            [
                Step::answer(&format!("draft {i}")),
                Step::answer(&format!("refined {i}")),
            ],
        );
    }
    mock.script(SYNTH, [Step::answer("aggregated")]);
    let extra = [
        plugin("mixture", "mixture", "layers = 2"),
        pipeline("moa", "passthrough", "mixture", ""),
    ]
    .concat();
    let server = Server::start(&config(&mock, &extra)).await;
    let result = server.ask("moa", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["answer"], "aggregated");
    for model in PANEL {
        let sent = mock.requests_for(model);
        assert_eq!(sent.len(), 2, "{model} answered in both layers");
        for i in 0..5 {
            assert!(
                sent[1].text().contains(&format!("draft {i}")),
                "layer 2 sees every draft"
            );
        }
    }
    let aggregate = mock.requests_for(SYNTH)[0].text();
    assert!(
        (0..5).all(|i| aggregate.contains(&format!("refined {i}")))
            && !aggregate.contains("draft 0")
    );
    assert_eq!(
        structured["details"]["layers"],
        json!([{"layer": 1, "answered": 5, "of": 5}, {"layer": 2, "answered": 5, "of": 5}])
    );
}

fn vote_config(mock: &Mock) -> String {
    config(
        mock,
        &[
            plugin("vote", "vote", ""),
            pipeline("vote", "passthrough", "vote", ""),
        ]
        .concat(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_vote_picks_the_normalised_majority_and_reports_the_counts() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Paris.")]);
    mock.script(
        "m2",
        [Step::answer(
            "Let me think. The capital is clear.\nFinal answer: **Paris**",
        )],
    );
    mock.script("m3", [Step::answer("paris")]);
    mock.script("m4", [Step::answer("Lyon")]);
    mock.script("m5", [Step::answer("Marseille")]);
    let server = Server::start(&vote_config(&mock)).await;
    let result = server.ask("vote", "What is the capital of France?").await;
    let structured = structured(&result);
    assert_eq!(structured["kind"], "vote");
    assert_eq!(
        structured["answer"], "Paris.",
        "the first majority answer, verbatim"
    );
    assert_eq!(structured["details"]["tie"], false);
    assert_eq!(
        structured["details"]["votes"][0],
        json!({"answer": "paris", "votes": 3, "models": ["m1", "m2", "m3"]})
    );
    assert!(
        structured["notes"][0]
            .as_str()
            .unwrap()
            .contains("Majority: 3 of 5 answers agree.")
    );
    assert!(
        mock.requests_for(SYNTH).is_empty(),
        "a vote needs no synthesizer"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tied_vote_says_it_was_a_tie() {
    let mock = Mock::start().await;
    mock.script("m1", [Step::answer("Blue")]);
    mock.script("m2", [Step::answer("blue!")]);
    mock.script("m3", [Step::answer("Green")]);
    mock.script("m4", [Step::answer("green")]);
    mock.script("m5", [Step::status(500, "down")]);
    let server = Server::start(&vote_config(&mock)).await;
    let structured = structured(&server.ask("vote", "q").await).clone();
    assert_eq!(structured["details"]["tie"], true);
    assert_eq!(structured["answer"], "Blue");
    let note = structured["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("Tie: 2 answers got 2 of 4 votes each"),
        "{note}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_judge_scores_blind_and_its_pick_is_returned_verbatim() {
    let mock = Mock::start().await;
    let answers = [
        "alpha answer",
        "bravo answer",
        "charlie answer",
        "delta answer",
        "echo answer",
    ];
    for (model, answer) in PANEL.iter().zip(answers) {
        mock.script(model, [Step::answer(answer)]);
    }
    mock.script(
        SYNTH,
        [Step::answer(
            r#"Verdict: {"scores": {"A": 3, "B": 9, "C": 5, "D": 1, "E": 4}}"#,
        )],
    );
    catalog_taking(&mock, &[(SYNTH, &["structured_outputs"])]);
    let extra = [
        plugin("judge", "judge", ""),
        pipeline("best-of", "passthrough", "judge", ""),
    ]
    .concat();
    let server = Server::start(&config(&mock, &extra)).await;
    let result = server.ask("best-of", "q").await;
    let structured = structured(&result);

    // Held to a score for every candidate, where the judge's model takes it.
    let format = &mock.requests_for(SYNTH)[0].body["response_format"];
    assert_eq!(format["json_schema"]["name"], "scores", "{format}");
    assert_eq!(
        format["json_schema"]["schema"]["properties"]["scores"]["required"],
        json!(["A", "B", "C", "D", "E"])
    );
    let judged = mock.requests_for(SYNTH)[0].text();
    for model in PANEL {
        assert!(
            !judged.contains(&format!("{model} ")),
            "the judge never sees model names"
        );
    }
    // The candidate the judge saw as B is the one returned.
    let b = judged
        .split("--- Candidate B ---\n")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap();
    assert_eq!(structured["kind"], "pick");
    assert_eq!(structured["answer"], b);
    let scores = structured["details"]["scores"].as_array().unwrap();
    assert_eq!(scores.len(), 5);
    let best = scores.iter().find(|s| s["candidate"] == "B").unwrap();
    assert_eq!(best["score"], 9.0);
    assert_eq!(
        answers[PANEL.iter().position(|m| *m == best["model"]).unwrap()],
        b
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_council_ranks_without_self_votes_and_a_chairman_merges() {
    let mock = Mock::start().await;
    for model in PANEL {
        mock.script(
            model,
            [
                Step::answer(&format!("{model}'s own answer")),
                Step::answer(r#"{"ranking": ["A", "B", "C", "D"]}"#),
            ],
        );
    }
    mock.script(SYNTH, [Step::answer("the chairman's answer")]);
    catalog_taking(&mock, &[("m1", &["structured_outputs"])]);
    let extra = [
        plugin("council", "council", ""),
        pipeline("council", "passthrough", "council", ""),
    ]
    .concat();
    let server = Server::start(&config(&mock, &extra)).await;
    let result = server.ask("council", "q").await;
    let structured = structured(&result);
    assert_eq!(structured["answer"], "the chairman's answer");

    // Ballots are held to the letters shown, where the model takes it.
    let ballot = &mock.requests_for("m1")[1].body["response_format"]["json_schema"];
    assert_eq!(ballot["name"], "ranking", "{ballot}");
    assert_eq!(
        ballot["schema"]["properties"]["ranking"]["items"]["enum"],
        json!(["A", "B", "C", "D"])
    );
    assert!(
        mock.requests_for("m2")[1]
            .body
            .get("response_format")
            .is_none()
    );
    for model in PANEL {
        let ballot_request = &mock.requests_for(model)[1];
        let shown = ballot_request.text();
        assert!(
            !shown.contains(&format!("{model}'s own answer")),
            "{model} never sees its own answer"
        );
        assert_eq!(
            PANEL
                .iter()
                .filter(|m| shown.contains(&format!("{m}'s own answer")))
                .count(),
            4
        );
    }
    let ballots = structured["details"]["ballots"].as_array().unwrap();
    assert_eq!(ballots.len(), 5);
    for ballot in ballots {
        let ranked: Vec<&str> = ballot["ranking"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap())
            .collect();
        assert_eq!(ranked.len(), 4);
        assert!(
            !ranked.contains(&ballot["ranker"].as_str().unwrap()),
            "no self-votes: {ballot}"
        );
    }
    let ranking = structured["details"]["ranking"].as_array().unwrap();
    assert_eq!(ranking.len(), 5);
    assert!(
        ranking
            .windows(2)
            .all(|w| w[0]["score"].as_f64() >= w[1]["score"].as_f64())
    );
    let chair = mock.requests_for(SYNTH)[0].text();
    assert!(chair.contains("--- Answer ranked 1 of 5 ---"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_debate_stops_early_when_the_answers_converge() {
    let mock = Mock::start().await;
    let opening = [
        "apples are best",
        "bananas win",
        "cherries obviously",
        "dates, surely",
        "elderberries",
    ];
    for (model, first) in PANEL.iter().zip(opening) {
        mock.script(
            model,
            [
                Step::answer(first),
                Step::answer("After discussion: bananas are the best fruit."),
            ],
        );
    }
    mock.script(SYNTH, [Step::answer("Bananas.")]);
    let extra = [
        plugin("debate", "debate", "threshold = 0.9"),
        pipeline(
            "debate",
            "passthrough",
            "debate",
            r#"options.rounds = { type = "integer", description = "Rounds.", minimum = 1, maximum = 5, default = 3 }"#,
        ),
    ]
    .concat();
    let server = Server::start(&config(&mock, &extra)).await;
    let result = server.ask("debate", "Which fruit is best?").await;
    let structured = structured(&result);
    for model in PANEL {
        assert_eq!(
            mock.requests_for(model).len(),
            2,
            "{model}: an opening and one round, then convergence"
        );
    }
    let round = mock.requests_for("m1")[1].text();
    assert!(
        round.contains("Your previous answer:\napples are best") && round.contains("bananas win")
    );
    assert!(
        !round
            .split("Your previous answer:")
            .nth(1)
            .unwrap()
            .contains("--- Participant E"),
        "4 others, A-D"
    );
    assert_eq!(structured["details"]["rounds"], 1);
    assert_eq!(structured["details"]["converged"], true);
    assert!(
        structured["notes"][0]
            .as_str()
            .unwrap()
            .contains("converged after 1 of at most 3 rounds")
    );
    assert_eq!(structured["answer"], "Bananas.");
}
