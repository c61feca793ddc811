//! What a caller names as an attachment, before anything is read: the
//! `attachments` argument of a pipeline tool (`{path}`, `{url}`,
//! `{data, mime_type, name?}`, `{uri}`, or an MCP content block —
//! `{"type": "image", "data", "mimeType"}`, an embedded resource, a
//! resource link), or a CLI `--attach`.

use std::path::PathBuf;

use serde_json::{Map, Value};

/// The argument every pipeline tool takes.
pub const ARGUMENT: &str = "attachments";

/// One attachment as named, not yet read.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A file on the machine chorus runs on (stdio and CLI only).
    Path(PathBuf),
    /// An https URL, passed on to providers as it is.
    Url {
        url: String,
        mime: Option<String>,
        name: Option<String>,
    },
    /// Base64 of the bytes, as sent.
    Data {
        base64: String,
        name: Option<String>,
    },
    /// Bytes already in hand (the CLI's stdin).
    Bytes {
        bytes: Vec<u8>,
        name: Option<String>,
    },
    /// A resource the client exposes.
    Uri(String),
}

/// Takes the `attachments` argument out of a call's arguments.
pub fn take(arguments: &mut Map<String, Value>) -> Result<Vec<Source>, String> {
    match arguments.remove(ARGUMENT) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| parse(item).map_err(|e| format!("`{ARGUMENT}[{i}]`: {e}")))
            .collect(),
        Some(other) => Err(format!(
            "`{ARGUMENT}` must be a list of attachments ({SHAPES}), got {}",
            short(&other)
        )),
    }
}

const SHAPES: &str = "each {\"path\": …}, {\"url\": \"https://…\"}, {\"data\": BASE64, \"mime_type\": …, \"name\": …} or an MCP image/audio/resource content block";

fn parse(item: Value) -> Result<Source, String> {
    let mut item = match item {
        Value::String(text) if text.starts_with("https://") => {
            return Ok(Source::Url {
                url: text,
                mime: None,
                name: None,
            });
        }
        Value::String(path) if !path.trim().is_empty() => return Ok(Source::Path(path.into())),
        Value::Object(item) => item,
        other => return Err(format!("expected {SHAPES}; got {}", short(&other))),
    };
    let name = string(&item, "name")?;
    let kind = string(&item, "type")?;
    match kind.as_deref() {
        Some("image" | "audio") => {
            let base64 = string(&item, "data")?
                .ok_or("an MCP image or audio block carries its bytes in `data`")?;
            return Ok(Source::Data { base64, name });
        }
        Some("resource") => return embedded(item.remove("resource")),
        Some("resource_link") => {
            let uri = string(&item, "uri")?.ok_or("a resource link names its `uri`")?;
            return Ok(Source::Uri(uri));
        }
        Some("text") => {
            let text = string(&item, "text")?.ok_or("a text block carries `text`")?;
            return Ok(Source::Bytes {
                bytes: text.into_bytes(),
                name,
            });
        }
        Some(other) => {
            return Err(format!(
                "unknown content block type `{other}` (chorus takes image, audio, resource and resource_link blocks)"
            ));
        }
        None => {}
    }
    if let Some(path) = string(&item, "path")? {
        return Ok(Source::Path(path.into()));
    }
    if let Some(url) = string(&item, "url")? {
        if !url.starts_with("https://") {
            return Err(format!(
                "`url` must be an https URL the providers can fetch, got {url:?}; send the bytes as `data` instead"
            ));
        }
        let mime = string(&item, "mime_type")?.or(string(&item, "mimeType")?);
        return Ok(Source::Url { url, mime, name });
    }
    if let Some(base64) = string(&item, "data")? {
        return Ok(Source::Data { base64, name });
    }
    if let Some(uri) = string(&item, "uri")? {
        return Ok(Source::Uri(uri));
    }
    Err(format!(
        "expected {SHAPES}; got an object without any of them"
    ))
}

/// An embedded resource: `{uri, mimeType, blob}` or `{uri, mimeType, text}`.
fn embedded(resource: Option<Value>) -> Result<Source, String> {
    let Some(Value::Object(resource)) = resource else {
        return Err("an embedded resource block carries a `resource` object".to_owned());
    };
    let name = string(&resource, "uri")?.map(|uri| {
        uri.rsplit('/')
            .find(|s| !s.is_empty())
            .unwrap_or(&uri)
            .to_owned()
    });
    if let Some(base64) = string(&resource, "blob")? {
        return Ok(Source::Data { base64, name });
    }
    if let Some(text) = string(&resource, "text")? {
        return Ok(Source::Bytes {
            bytes: text.into_bytes(),
            name,
        });
    }
    Err("an embedded resource carries its contents in `blob` (base64) or `text`".to_owned())
}

fn string(item: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match item.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{key}` must be a string, got {}", short(other))),
    }
}

/// A value for a message: its JSON, cut.
fn short(value: &Value) -> String {
    crate::text::ellipsized(&value.to_string(), 60)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sources(value: Value) -> Result<Vec<Source>, String> {
        let mut arguments = Map::new();
        arguments.insert(ARGUMENT.into(), value);
        take(&mut arguments)
    }

    #[test]
    fn every_shape_a_caller_has() {
        let got = sources(json!([
            {"path": "/tmp/a.png"},
            "notes.md",
            {"url": "https://example.com/d.png"},
            {"data": "iVBORw0KGgo=", "mime_type": "image/png", "name": "d.png"},
            {"type": "image", "data": "R0lGODlh", "mimeType": "image/gif"},
            {"type": "resource", "resource": {"uri": "file:///w/spec.md", "mimeType": "text/markdown", "text": "# Spec"}},
            {"type": "resource_link", "uri": "file:///w/big.pdf"},
        ]))
        .unwrap();
        assert_eq!(got[0], Source::Path("/tmp/a.png".into()));
        assert_eq!(got[1], Source::Path("notes.md".into()));
        assert!(matches!(&got[2], Source::Url { url, .. } if url == "https://example.com/d.png"));
        assert!(
            matches!(&got[3], Source::Data { base64, name } if base64 == "iVBORw0KGgo=" && name.as_deref() == Some("d.png"))
        );
        assert!(matches!(&got[4], Source::Data { .. }));
        assert!(
            matches!(&got[5], Source::Bytes { bytes, name } if bytes == b"# Spec" && name.as_deref() == Some("spec.md"))
        );
        assert_eq!(got[6], Source::Uri("file:///w/big.pdf".into()));
    }

    #[test]
    fn a_bad_shape_says_which_item_and_what_is_taken() {
        let err = sources(json!([{"path": "a"}, {"url": "http://x/y.png"}])).unwrap_err();
        assert!(
            err.starts_with("`attachments[1]`: `url` must be an https URL"),
            "{err}"
        );
        let err = sources(json!("a.png")).unwrap_err();
        assert!(err.contains("must be a list"), "{err}");
        let err = sources(json!([{"type": "video", "data": "x"}])).unwrap_err();
        assert!(err.contains("unknown content block type `video`"), "{err}");
        let err = sources(json!([{"name": "x"}])).unwrap_err();
        assert!(err.contains("without any of them"), "{err}");
        assert_eq!(sources(Value::Null), Ok(Vec::new()));
    }
}
