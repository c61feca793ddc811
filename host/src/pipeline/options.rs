//! A call's options: checked against the pipeline's declared options and
//! the built-in ones every pipeline takes, defaults filled in, and turned
//! into the JSON object plugins receive. `follow_up_of` is built in too, but
//! chorus handles it itself and takes it out before plugins see anything.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::config::{OptionSpec, OptionType, check_option, integral};

/// The option that lowers the run's cost ceiling (`limits.max_cost_usd`).
pub const MAX_COST_USD: &str = "max_cost_usd";

/// Options every pipeline tool takes, whatever its plugins.
pub fn builtin() -> BTreeMap<String, OptionSpec> {
    BTreeMap::from([
        (
            MAX_COST_USD.to_owned(),
            OptionSpec {
                kind: OptionType::Number,
                description: "Most this call may spend, in USD: model calls that could cross it are not made. Can lower the server's limits.max_cost_usd, not raise it.".to_owned(),
                minimum: Some(0.0),
                maximum: None,
                default: None,
            },
        ),
        (
            WEB_SEARCH.to_owned(),
            OptionSpec {
                kind: OptionType::Boolean,
                description: "Let each panel member search the web; the answer ends with the numbered sources they cited. Default: the pipeline's web_search setting.".to_owned(),
                minimum: None,
                maximum: None,
                default: None,
            },
        ),
    ])
}

/// Built-in option: search the web for this call (see `web_search`).
pub const WEB_SEARCH: &str = "web_search";

/// The run's web search: the call's `web_search` argument, else the
/// pipeline's `web_search`, with the pipeline's result count and context.
pub fn web_search(
    pipeline: &crate::config::Pipeline,
    options: &Value,
) -> Option<crate::llm::WebSearch> {
    let asked = options
        .get(WEB_SEARCH)
        .and_then(Value::as_bool)
        .unwrap_or(pipeline.web_search);
    asked.then_some(crate::llm::WebSearch {
        max_results: pipeline.web_search_max_results,
        context: pipeline.web_search_context,
    })
}

/// Built-in option: the run a call follows up (see `follow_up`).
pub const FOLLOW_UP_OF: &str = "follow_up_of";

/// Takes `follow_up_of` out of a call's arguments: the run id, if given.
pub fn take_follow_up(given: &mut Map<String, Value>) -> Result<Option<String>, String> {
    match given.remove(FOLLOW_UP_OF) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(Some(id.trim().to_owned())),
        Some(other) => Err(format!(
            "`{FOLLOW_UP_OF}` must be the run_id of an earlier run, got {other}"
        )),
    }
}

/// The JSON schema properties of the built-in options.
fn builtin_schema() -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert(
        FOLLOW_UP_OF.into(),
        json!({
            "type": "string",
            "description": "The run_id of an earlier run to follow up: the models see its question and answer first."
        }),
    );
    properties.insert(
        crate::attach::source::ARGUMENT.into(),
        json!({
            "type": "array",
            "description": "Files the question is about: images, PDFs, audio, text. Each {\"path\": …} (a file in a directory you share; not over HTTP), {\"url\": \"https://…\"}, {\"data\": BASE64, \"mime_type\": …, \"name\": …}, or an MCP image/resource content block.",
            // `anyOf`, not a `type` list: strict validators (Ajv, as
            // Gemini CLI runs it) warn on union types.
            "items": {"anyOf": [{"type": "object"}, {"type": "string"}]}
        }),
    );
    properties
}

/// Resolves `given` (the call's arguments other than `prompt`).
pub fn resolve(
    specs: &BTreeMap<String, OptionSpec>,
    given: Map<String, Value>,
) -> Result<Value, String> {
    let mut all = builtin();
    all.extend(specs.iter().map(|(k, v)| (k.clone(), v.clone())));
    let specs = &all;
    let mut options = Map::new();
    for (name, value) in given {
        let Some(spec) = specs.get(&name) else {
            let known: Vec<&str> = specs
                .keys()
                .map(String::as_str)
                .chain([FOLLOW_UP_OF])
                .collect();
            return Err(format!(
                "unknown argument `{name}`: this tool takes `prompt`, {}",
                known.join(", ")
            ));
        };
        if value.is_null() {
            // `null` leaves the option unset: its default applies.
            continue;
        }
        check_option(&name, spec, &value)?;
        options.insert(name, normalized(spec, value));
    }
    for (name, spec) in specs {
        if let (false, Some(default)) = (options.contains_key(name), &spec.default) {
            options.insert(
                name.clone(),
                serde_json::to_value(default).unwrap_or(Value::Null),
            );
        }
    }
    Ok(Value::Object(options))
}

/// An integer option written `2.0` reaches plugins as `2`.
fn normalized(spec: &OptionSpec, value: Value) -> Value {
    match (&value, spec.kind) {
        (Value::Number(n), OptionType::Integer) => integral(n).map_or(value, Value::from),
        _ => value,
    }
}

/// The JSON schema properties of a pipeline's options and the built-in
/// ones, for its tool.
pub fn schema(specs: &BTreeMap<String, OptionSpec>) -> Map<String, Value> {
    let mut properties = declared_schema(specs);
    properties.extend(builtin_schema());
    properties
}

fn declared_schema(specs: &BTreeMap<String, OptionSpec>) -> Map<String, Value> {
    let mut all = builtin();
    all.extend(specs.iter().map(|(k, v)| (k.clone(), v.clone())));
    all.iter()
        .map(|(name, spec)| {
            let mut property = Map::new();
            property.insert("type".into(), spec.kind.as_str().into());
            property.insert("description".into(), spec.description.clone().into());
            if let Some(min) = spec.minimum {
                property.insert("minimum".into(), number(min));
            }
            if let Some(max) = spec.maximum {
                property.insert("maximum".into(), number(max));
            }
            if let Some(default) = &spec.default {
                property.insert(
                    "default".into(),
                    serde_json::to_value(default).unwrap_or(Value::Null),
                );
            }
            (name.clone(), Value::Object(property))
        })
        .collect()
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9e15 {
        Value::from(n as i64)
    } else {
        Value::from(n)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn agents() -> BTreeMap<String, OptionSpec> {
        let spec = OptionSpec {
            kind: OptionType::Integer,
            description: "How many agents.".into(),
            minimum: Some(1.0),
            maximum: Some(16.0),
            default: Some(toml::Value::Integer(4)),
        };
        BTreeMap::from([("agents".to_owned(), spec)])
    }

    fn given(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn defaults_fill_in_and_valid_values_pass() {
        assert_eq!(
            resolve(&agents(), Map::new()).unwrap(),
            json!({"agents": 4})
        );
        assert_eq!(
            resolve(&agents(), given(json!({"agents": 16}))).unwrap(),
            json!({"agents": 16})
        );
    }

    #[test]
    fn wrong_types_ranges_and_names_say_what_is_wrong() {
        let error = |v| resolve(&agents(), given(v)).unwrap_err();
        assert_eq!(
            error(json!({"agents": 17})),
            "`agents` must be between 1 and 16, got 17"
        );
        assert_eq!(
            error(json!({"agents": 2.5})),
            "`agents` must be an integer, got 2.5"
        );
        assert_eq!(
            error(json!({"agents": "4"})),
            "`agents` must be an integer, got \"4\""
        );
        assert_eq!(
            error(json!({"agent": 4})),
            "unknown argument `agent`: this tool takes `prompt`, agents, max_cost_usd, web_search, follow_up_of"
        );
        assert_eq!(
            resolve(&BTreeMap::new(), given(json!({"x": 1}))).unwrap_err(),
            "unknown argument `x`: this tool takes `prompt`, max_cost_usd, web_search, follow_up_of"
        );
        assert_eq!(
            resolve(&BTreeMap::new(), given(json!({"max_cost_usd": -1}))).unwrap_err(),
            "`max_cost_usd` must be between 0 and …, got -1"
        );
        assert_eq!(
            resolve(&BTreeMap::new(), given(json!({"max_cost_usd": 0.25}))).unwrap(),
            json!({"max_cost_usd": 0.25})
        );
    }

    #[test]
    fn integral_floats_count_as_integers_and_null_means_unset() {
        assert_eq!(
            resolve(&agents(), given(json!({"agents": 2.0}))).unwrap(),
            json!({"agents": 2})
        );
        assert_eq!(
            resolve(&agents(), given(json!({"agents": null}))).unwrap(),
            json!({"agents": 4})
        );
        assert_eq!(
            resolve(&agents(), given(json!({"agents": 1e300}))).unwrap_err(),
            "`agents` must be an integer, got 1e+300"
        );
    }

    #[test]
    fn the_schema_lists_each_option_and_the_builtin_ones() {
        let schema = Value::Object(schema(&agents()));
        assert_eq!(
            schema["agents"],
            json!({"type": "integer", "description": "How many agents.", "minimum": 1, "maximum": 16, "default": 4})
        );
        assert_eq!(schema["max_cost_usd"]["type"], "number");
        assert_eq!(schema["max_cost_usd"]["minimum"], 0);
        assert_eq!(schema["follow_up_of"]["type"], "string");
    }

    #[test]
    fn follow_up_of_is_taken_out_and_checked() {
        let mut arguments = given(json!({"follow_up_of": " abc ", "agents": 2}));
        assert_eq!(
            take_follow_up(&mut arguments).unwrap().as_deref(),
            Some("abc")
        );
        assert_eq!(Value::Object(arguments), json!({"agents": 2}));
        let mut arguments = given(json!({"follow_up_of": null}));
        assert_eq!(take_follow_up(&mut arguments).unwrap(), None);
        let mut arguments = given(json!({"follow_up_of": 7}));
        assert_eq!(
            take_follow_up(&mut arguments).unwrap_err(),
            "`follow_up_of` must be the run_id of an earlier run, got 7"
        );
    }
}
