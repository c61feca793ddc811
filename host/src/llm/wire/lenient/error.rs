//! A provider's error object, read leniently: a message, a code that may
//! be an HTTP status or a word, and OpenRouter's `metadata.raw`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{Text, drain_map, drain_seq};
use crate::llm::secret::Scrubber;
use crate::text::ellipsized;

/// A provider's error object: `{"message", "code", "metadata": {"raw"}}`
/// or a bare string. Codes may be HTTP statuses or words.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireError {
    pub message: Option<String>,
    /// A numeric code in the HTTP status range.
    pub status: Option<u16>,
    /// A textual code (`invalid_api_key`), when there was no message; kept
    /// whole (the body is bounded) so `describe` can scrub before cutting.
    pub code: Option<String>,
    /// OpenRouter's `metadata.raw`: the upstream provider's own words.
    pub raw: Option<String>,
}

impl WireError {
    /// The provider's words, as one line for a failure message: scrubbed
    /// of the key before anything is cut.
    pub fn describe(&self, scrubber: &Scrubber) -> String {
        let message = match (&self.message, &self.code) {
            (Some(message), _) => scrubber.scrub(message).into_owned(),
            (None, Some(code)) => ellipsized(&scrubber.scrub(code), 100),
            (None, None) => "the provider reported an error without a message".to_owned(),
        };
        match &self.raw {
            Some(raw) if !raw.is_empty() => {
                format!("{message} ({})", ellipsized(&scrubber.scrub(raw), 300))
            }
            _ => message,
        }
    }
}

impl<'de> Deserialize<'de> for WireError {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WireError;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an error object")
            }
            fn visit_str<E>(self, v: &str) -> Result<WireError, E> {
                Ok(WireError {
                    message: Some(v.to_owned()),
                    ..WireError::default()
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireError, A::Error> {
                let mut error = WireError::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "message" => error.message = map.next_value::<Text>()?.into_string(),
                        "code" | "status" => match map.next_value::<CodeValue>()? {
                            CodeValue::Number(n) => {
                                error.status =
                                    u16::try_from(n).ok().filter(|c| (100..600).contains(c));
                            }
                            CodeValue::Text(t) => error.code = Some(t),
                            CodeValue::None => {}
                        },
                        "metadata" => error.raw = map.next_value::<Metadata>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(error)
            }
            fn visit_u64<E>(self, v: u64) -> Result<WireError, E> {
                Ok(WireError {
                    status: u16::try_from(v).ok().filter(|c| (100..600).contains(c)),
                    ..WireError::default()
                })
            }
            otherwise!('de, WireError::default(); seq, i64, f64, bool, unit);
        }
        deserializer.deserialize_any(V)
    }
}

enum CodeValue {
    Number(u64),
    Text(String),
    None,
}

impl<'de> Deserialize<'de> for CodeValue {
    /// Integral numbers (or numeric strings) are numbers, other strings
    /// are words.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CodeValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a code")
            }
            fn visit_u64<E>(self, v: u64) -> Result<CodeValue, E> {
                Ok(CodeValue::Number(v))
            }
            otherwise!('de, CodeValue::None; i64);
            fn visit_f64<E>(self, v: f64) -> Result<CodeValue, E> {
                Ok(if v.fract() == 0.0 && (0.0..1e6).contains(&v) {
                    CodeValue::Number(v as u64)
                } else {
                    CodeValue::None
                })
            }
            fn visit_str<E>(self, v: &str) -> Result<CodeValue, E> {
                Ok(match v.trim().parse::<u64>() {
                    Ok(n) => CodeValue::Number(n),
                    Err(_) => CodeValue::Text(v.to_owned()),
                })
            }
            otherwise!('de, CodeValue::None; bool, unit, seq, map);
        }
        deserializer.deserialize_any(V)
    }
}

/// `metadata.raw`, when it is text.
struct Metadata(Option<String>);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Metadata;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("metadata")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metadata, A::Error> {
                let mut raw = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "raw" {
                        raw = map.next_value::<Text>()?.into_string();
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Metadata(raw))
            }
            otherwise!('de, Metadata(None); seq, str, u64, i64, f64, bool, unit);
        }
        deserializer.deserialize_any(V)
    }
}
