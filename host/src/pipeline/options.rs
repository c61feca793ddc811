//! A call's options: checked against the pipeline's declared options,
//! defaults filled in, and turned into the JSON object plugins receive.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::config::{OptionSpec, OptionType, check_option, integral};

/// Resolves `given` (the call's arguments other than `prompt`).
pub fn resolve(
    specs: &BTreeMap<String, OptionSpec>,
    given: Map<String, Value>,
) -> Result<Value, String> {
    let mut options = Map::new();
    for (name, value) in given {
        let Some(spec) = specs.get(&name) else {
            let known: Vec<&str> = specs.keys().map(String::as_str).collect();
            return Err(if known.is_empty() {
                format!("unknown argument `{name}`: this tool takes only `prompt`")
            } else {
                format!(
                    "unknown argument `{name}`: this tool takes `prompt`, {}",
                    known.join(", ")
                )
            });
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

/// The JSON schema properties of a pipeline's options, for its tool.
pub fn schema(specs: &BTreeMap<String, OptionSpec>) -> Map<String, Value> {
    specs
        .iter()
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
            "unknown argument `agent`: this tool takes `prompt`, agents"
        );
        assert_eq!(
            resolve(&BTreeMap::new(), given(json!({"x": 1}))).unwrap_err(),
            "unknown argument `x`: this tool takes only `prompt`"
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
    fn the_schema_lists_each_option() {
        assert_eq!(
            Value::Object(schema(&agents())),
            json!({"agents": {"type": "integer", "description": "How many agents.", "minimum": 1, "maximum": 16, "default": 4}})
        );
    }
}
