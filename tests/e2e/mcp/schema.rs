//! Every `structuredContent` chorus sends fits the tool's `outputSchema`:
//! for every pipeline of the shipped plugins.toml, in success, when every
//! model fails, and when the arguments are wrong — checked by a JSON Schema
//! validator, as clients that validate (the TypeScript SDK) would. And
//! every tool's schemas compile in Ajv's strict mode, as clients run it.

use std::path::Path;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::mcp::clients::{node, run_client};
use crate::support::*;

/// The shipped plugins.toml, pointed at `mock`; and its models.
fn shipped(mock: &Mock) -> (String, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("plugins.toml")).unwrap();
    let parsed: toml::Table = text.parse().unwrap();
    let models = parsed["models"]
        .as_table()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let text = text
        .replace("https://openrouter.ai/api/v1", &mock.base_url)
        .replace("\"OPENROUTER_API_KEY\"", &format!("\"{KEY_VAR}\""));
    (text, models)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_result_of_every_shipped_pipeline_fits_its_output_schema() {
    let mock = Mock::start().await;
    let (config, models) = shipped(&mock);
    for model in &models {
        mock.script(
            model,
            [Step::Echo {
                prefix: "An answer to: ".into(),
                delay: std::time::Duration::ZERO,
            }],
        );
    }
    let server = Server::start(&config).await;
    let tools = server.client.list_all_tools().await.unwrap();
    assert!(tools.len() >= 10, "every shipped pipeline is a tool");
    let check = |tool: &str, case: &str, result: &CallToolResult, schema: &Value| {
        let validator = jsonschema::validator_for(schema).expect("the output schema is valid");
        let content = structured(result);
        let errors: Vec<String> = validator
            .iter_errors(content)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{tool} ({case}): {errors:?}\n{content:#}"
        );
        assert!(content["details"].is_object(), "{tool} ({case})");
    };
    let prompt = json!({"prompt": "Which is better for a small team, A or B?"});
    let schemas: Vec<(String, Value)> = tools
        .iter()
        .map(|tool| {
            let schema = tool.output_schema.as_ref().expect("an output schema");
            (
                tool.name.to_string(),
                Value::Object(schema.as_ref().clone()),
            )
        })
        .collect();
    let (resynthesize, pipelines): (Vec<_>, Vec<_>) =
        schemas.iter().partition(|(tool, _)| tool == "resynthesize");
    let mut last_run = String::new();
    for (tool, schema) in &pipelines {
        let result = server.call(tool, prompt.clone()).await;
        assert_eq!(result.is_error, Some(false), "{tool}: {}", text(&result));
        check(tool, "answered", &result, schema);
        last_run = structured(&result)["run_id"].as_str().unwrap().to_owned();
        let result = server.call(tool, json!({"prompt": 5})).await;
        assert_eq!(result.is_error, Some(true));
        check(tool, "bad arguments", &result, schema);
    }
    let [(tool, schema)] = resynthesize[..] else {
        panic!("one resynthesize tool")
    };
    let result = server.call(tool, json!({"run_id": last_run})).await;
    assert_eq!(result.is_error, Some(false), "{tool}: {}", text(&result));
    check(tool, "answered", &result, schema);
    let result = server.call(tool, json!({"run_id": 5})).await;
    assert_eq!(result.is_error, Some(true));
    check(tool, "bad arguments", &result, schema);
    for model in &models {
        mock.script(model, [Step::status(400, "this model is unavailable")]);
    }
    for (tool, schema) in &pipelines {
        let result = server.call(tool, prompt.clone()).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {}", text(&result));
        check(tool, "every model failed", &result, schema);
    }
}

/// Gemini CLI compiles every tool's schemas with Ajv and warned on each
/// start about a `type` list; strict mode turns every such warning into a
/// failure here, for every tool of the shipped plugins.toml.
#[tokio::test(flavor = "multi_thread")]
async fn every_tool_schema_compiles_in_ajvs_strict_mode() {
    let mock = Mock::start().await;
    let (config, _) = shipped(&mock);
    let config = write_config(&config);
    let report = run_client(&node(), &["strict_schemas.mjs"], &config).await;
    let tools = report["tools"].as_u64().unwrap();
    assert!(tools >= 10, "every shipped pipeline is a tool: {report}");
    assert_eq!(
        report["compiled"].as_u64(),
        Some(tools * 4),
        "input and output schema of each, in both dialects: {report}"
    );
}
