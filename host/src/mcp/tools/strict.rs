//! Every schema of every tool is one a strict validator takes without a
//! warning: no `type` list (Ajv's strict mode refuses union types, and
//! Gemini CLI warned on every start). Ajv itself checks them in the e2e
//! test `schema::every_tool_schema_compiles_in_ajvs_strict_mode`.

use serde_json::Value;

use super::*;

/// Where `schema` has a `type` list. (A property named `type` has an
/// object for its value, never a list.)
fn type_lists(schema: &Value, at: &str, found: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                let here = format!("{at}/{key}");
                if key == "type" && value.is_array() {
                    found.push(here.clone());
                }
                type_lists(value, &here, found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                type_lists(item, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

#[test]
fn no_tool_schema_has_a_type_list() {
    let pipeline: Pipeline = toml::from_str(
        r#"
        description = "Every kind of option."
        selector = "panel"
        prompter = "passthrough"
        synthesizer = "synthesize"
        options.n = { type = "integer", description = "n", minimum = 1, maximum = 4, default = 2 }
        options.x = { type = "number", description = "x", minimum = 0.5 }
        options.s = { type = "string", description = "s", default = "a" }
        options.b = { type = "boolean", description = "b" }
        "#,
    )
    .unwrap();
    let metrics = toml::from_str(
        "helpful = { type = \"boolean\" }\nscore = { type = \"float\", min = 0, max = 10 }",
    )
    .unwrap();
    let tools = [
        tool("ask", &pipeline),
        resynthesize_tool(&["synthesize"], &["ask"]),
        super::feedback::tool(&metrics).expect("a feedback tool"),
    ];
    for tool in tools {
        let output = tool.output_schema.clone().expect("an output schema");
        for (which, schema) in [("input", tool.input_schema), ("output", output)] {
            let schema = Value::Object(schema.as_ref().clone());
            let mut found = Vec::new();
            type_lists(&schema, "#", &mut found);
            assert!(
                found.is_empty(),
                "{} {which} schema: `type` lists at {found:?}; use `anyOf`",
                tool.name
            );
        }
    }
}
