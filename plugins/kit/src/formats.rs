//! Response formats a plugin asks the host for when it reads a reply as
//! data: strict JSON Schemas (every property required, no others — what
//! providers' strict structured outputs demand) built from a map of
//! properties. The host sends one only to models that take it, so a
//! plugin parses the reply leniently all the same.

use serde_json::{Value, json};

use crate::wit::types::{JsonSchema, ResponseFormat};

/// A strict object schema with `properties` (a JSON object of schemas).
pub fn object(properties: Value) -> Value {
    let required: Vec<&String> = properties
        .as_object()
        .map_or_else(Vec::new, |p| p.keys().collect());
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The response format holding a reply to `schema`, strictly, under `name`
/// (1 to 64 letters, digits, `_` or `-`).
pub fn json_schema(name: &str, schema: &Value) -> ResponseFormat {
    ResponseFormat::JsonSchema(JsonSchema {
        name: name.to_owned(),
        schema: schema.to_string(),
        strict: true,
    })
}
