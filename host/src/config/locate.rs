//! Finds where a dotted key (`models."a/b".params`, `plugins.p.settings.panel[2]`)
//! is written in a TOML text, so that errors found after parsing (bounds,
//! references, model ids) still point at a line.

use toml::de::{DeTable, DeValue};

/// The 1-based line and column of `key`'s value (or of the deepest table
/// on its path that exists) in `text`.
pub fn position(text: &str, key: &str) -> Option<(usize, usize)> {
    let segments = split(key)?;
    let document = DeTable::parse(text).ok()?;
    let mut span = None;
    let mut table = document.get_ref();
    let mut value: Option<&DeValue> = None;
    for segment in &segments {
        let current = match (segment, value) {
            (Segment::Key(name), None) => table.get(name.as_str()),
            (Segment::Key(name), Some(DeValue::Table(t))) => t.get(name.as_str()),
            (Segment::Index(i), Some(DeValue::Array(items))) => items.get(*i),
            _ => None,
        };
        let Some(found) = current else { break };
        span = Some(found.span());
        value = Some(found.get_ref());
        if let DeValue::Table(t) = found.get_ref() {
            table = t;
        }
    }
    super::position_of(text, span)
}

enum Segment {
    Key(String),
    Index(usize),
}

/// `a."b.c"[2].d` → `a`, `b.c`, `[2]`, `d`. `None` when it is not a key path.
fn split(key: &str) -> Option<Vec<Segment>> {
    let mut segments = Vec::new();
    let mut chars = key.chars().peekable();
    while chars.peek().is_some() {
        match chars.peek() {
            Some('"') => {
                chars.next();
                let mut name = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => name.push(chars.next()?),
                        c => name.push(c),
                    }
                }
                segments.push(Segment::Key(name));
            }
            Some('[') => {
                chars.next();
                let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
                segments.push(Segment::Index(digits.parse().ok()?));
            }
            Some('.') => {
                chars.next();
            }
            _ => {
                let mut name = String::new();
                while let Some(&c) = chars.peek() {
                    if c == '.' || c == '[' {
                        break;
                    }
                    name.push(c);
                    chars.next();
                }
                segments.push(Segment::Key(name));
            }
        }
    }
    Some(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[limits]\nrun_timeout = \"1s\"\n\n[models.\"a/b.c\"]\nparams = { max_tokens = 5 }\n\n[plugins.p]\nsettings = { panel = [\"x\", \"y\"] }\n";

    #[test]
    fn keys_are_found_through_tables_quotes_and_arrays() {
        assert_eq!(position(TEXT, "limits.run_timeout").map(|p| p.0), Some(2));
        assert_eq!(
            position(TEXT, "models.\"a/b.c\".params.max_tokens").map(|p| p.0),
            Some(5)
        );
        assert_eq!(position(TEXT, "plugins.p.settings.panel[1]"), Some((8, 28)));
        // A key that is not written points at the deepest table that is.
        assert_eq!(position(TEXT, "limits.max_cost_usd").map(|p| p.0), Some(1));
        assert_eq!(position(TEXT, "nothing.here"), None);
    }
}
