//! A message's content parts: text, and what becomes the run's
//! attachments — `image_url` (`https://` or a base64 `data:` URL), `file`
//! (`file_data` as base64 or a data URL), `input_audio` — as the
//! `attach::Source`s MCP's `attachments` argument names, read later under
//! the same limits.

use serde_json::Value;

use super::errors::ApiError;
use crate::attach::Source;

/// A message's text: a string, text parts, or null.
pub(super) fn text_only(content: &Value, param: &str) -> Result<String, ApiError> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut texts = Vec::new();
            for (j, part) in parts.iter().enumerate() {
                match (
                    part["type"].as_str(),
                    part["text"].as_str(),
                    part["refusal"].as_str(),
                ) {
                    (Some("text"), Some(text), _) => texts.push(text.to_owned()),
                    (Some("refusal"), _, Some(text)) => texts.push(text.to_owned()),
                    _ => {
                        return Err(ApiError::invalid(
                            &format!("{param}.content[{j}]"),
                            format!(
                                "`{param}.content[{j}]`: only text parts are taken in system and assistant messages."
                            ),
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(ApiError::invalid(
            &format!("{param}.content"),
            format!("`{param}.content` must be a string or a list of content parts."),
        )),
    }
}

/// A user message's text, its other parts added to `sources`.
pub(super) fn user_content(
    content: &Value,
    param: &str,
    sources: &mut Vec<Source>,
) -> Result<String, ApiError> {
    let Value::Array(parts) = content else {
        return text_only(content, param);
    };
    let mut texts = Vec::new();
    for (j, part) in parts.iter().enumerate() {
        let at = format!("{param}.content[{j}]");
        match part["type"].as_str() {
            Some("text") => texts.push(
                part["text"]
                    .as_str()
                    .ok_or_else(|| {
                        ApiError::invalid(&at, format!("`{at}.text` must be a string."))
                    })?
                    .to_owned(),
            ),
            Some("image_url") => {
                let url = part["image_url"]["url"]
                    .as_str()
                    .or_else(|| part["image_url"].as_str())
                    .ok_or_else(|| {
                        ApiError::invalid(&at, format!("`{at}.image_url.url` must be a URL."))
                    })?;
                sources.push(url_source(url, None, &at)?);
            }
            Some("file") => {
                let file = &part["file"];
                if file.get("file_id").is_some_and(|id| !id.is_null()) {
                    return Err(ApiError::unsupported(
                        &at,
                        format!(
                            "`{at}.file.file_id`: chorus has no Files API; send the file's bytes in `file_data` (base64, or a data: URL)."
                        ),
                    ));
                }
                let data = file["file_data"].as_str().ok_or_else(|| {
                    ApiError::invalid(
                        &at,
                        format!(
                            "`{at}.file.file_data` must hold the file as base64 or a data: URL."
                        ),
                    )
                })?;
                let name = file["filename"].as_str().map(str::to_owned);
                sources.push(if data.starts_with("data:") {
                    url_source(data, name, &at)?
                } else {
                    Source::Data {
                        base64: data.to_owned(),
                        name,
                    }
                });
            }
            Some("input_audio") => {
                let audio = &part["input_audio"];
                let data = audio["data"].as_str().ok_or_else(|| {
                    ApiError::invalid(&at, format!("`{at}.input_audio.data` must be base64."))
                })?;
                let format = audio["format"].as_str().unwrap_or("wav");
                sources.push(Source::Data {
                    base64: data.to_owned(),
                    name: Some(format!("audio.{format}")),
                });
            }
            other => {
                return Err(ApiError::invalid(
                    &at,
                    format!(
                        "`{at}` is of type {}: chorus takes text, image_url, file and input_audio parts.",
                        other.map_or("none".into(), |t| format!("{t:?}"))
                    ),
                ));
            }
        }
    }
    Ok(texts.join("\n"))
}

/// An `https` URL (passed to providers, or fetched, as MCP's are) or a
/// `data:` URL of base64 bytes.
fn url_source(url: &str, name: Option<String>, at: &str) -> Result<Source, ApiError> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (meta, data) = rest.split_once(',').ok_or_else(|| {
            ApiError::invalid(
                at,
                format!("`{at}`: a data: URL needs a comma before its data."),
            )
        })?;
        if !meta.ends_with(";base64") {
            return Err(ApiError::invalid(
                at,
                format!("`{at}`: chorus takes data: URLs in base64 (data:TYPE;base64,…)."),
            ));
        }
        return Ok(Source::Data {
            base64: data.to_owned(),
            name,
        });
    }
    if url.starts_with("https://") {
        return Ok(Source::Url {
            url: url.to_owned(),
            mime: None,
            name,
        });
    }
    Err(ApiError::invalid(
        at,
        format!("`{at}`: chorus takes https:// and data: URLs."),
    ))
}
