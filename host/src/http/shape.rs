//! The shape of a request body, bounded before it is parsed, at every door
//! that parses one (`/mcp`, the OpenAI endpoint): a parsed JSON value
//! costs tens of bytes for every value in its text, so a body of tiny
//! values (a million `0,`s) would parse into tens of times its size.

/// JSON values one request body may hold: a conversation of a thousand
/// messages with a few parts each, or an MCP call, holds a few thousand.
pub const MAX_VALUES: usize = 1 << 16;

/// An upper bound on the JSON values `text` holds, counted without parsing
/// it: one for the first, one more for each `,` and each opening bracket
/// outside a string. Wrong JSON may count anything; the parse refuses it.
pub fn values_at_most(text: &[u8]) -> usize {
    let mut count = 1;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => count += 1,
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// The values `text` holds, as a parse counts them.
    fn parsed(text: &str) -> usize {
        fn count(value: &Value) -> usize {
            1 + match value {
                Value::Array(items) => items.iter().map(count).sum(),
                Value::Object(pairs) => pairs.values().map(count).sum(),
                _ => 0,
            }
        }
        count(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn the_count_is_never_below_what_a_parse_makes() {
        for text in [
            r#"{}"#,
            r#"[]"#,
            r#"0"#,
            r#"[0,1,[2,{"a":[3,4]}],"x,[{"]"#,
            r#"{"model":"ask","messages":[{"role":"user","content":"a \" , [ { b"}]}"#,
            r#"[[[[[]]]],{},{"k":{"k":{"k":null}}}]"#,
        ] {
            let bound = values_at_most(text.as_bytes());
            assert!(bound >= parsed(text), "{text}: {bound} < {}", parsed(text));
        }
    }

    #[test]
    fn commas_and_brackets_inside_strings_are_not_counted() {
        let text = r#"{"content":"[,{,[,{,\",\\"}"#;
        assert_eq!(values_at_most(text.as_bytes()), 2);
    }

    #[test]
    fn a_body_of_tiny_values_is_counted_as_many() {
        let text = format!("[{}0]", "0,".repeat(100_000));
        assert!(values_at_most(text.as_bytes()) > MAX_VALUES);
    }
}
