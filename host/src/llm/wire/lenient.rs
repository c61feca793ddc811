//! Lenient, allocation-light readers for the parts of provider JSON whose
//! shape varies between servers: numbers sent as floats, strings or
//! negatives; content as a string or a list of parts; error objects with
//! numeric or textual codes. A field of the wrong type becomes "unknown",
//! never a failure that would discard a complete answer — and no reader
//! builds a `serde_json::Value` tree, whose per-node overhead made an
//! 8 MB body of many small parts cost hundreds of megabytes.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The visitor methods for the JSON types a reader has no use for: each
/// gives `$value`; lists and objects are drained without being built.
macro_rules! otherwise {
    ($de:lifetime, $value:expr; $($kind:ident),* $(,)?) => {
        $( otherwise!(@ $kind, $de, $value); )*
    };
    (@ str, $de:lifetime, $v:expr) => {
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ u64, $de:lifetime, $v:expr) => {
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ i64, $de:lifetime, $v:expr) => {
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ f64, $de:lifetime, $v:expr) => {
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ bool, $de:lifetime, $v:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ unit, $de:lifetime, $v:expr) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> { Ok($v) }
        fn visit_none<E>(self) -> Result<Self::Value, E> { Ok($v) }
    };
    (@ seq, $de:lifetime, $v:expr) => {
        fn visit_seq<A: SeqAccess<$de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            drain_seq(seq).map(|()| $v)
        }
    };
    (@ map, $de:lifetime, $v:expr) => {
        fn visit_map<A: MapAccess<$de>>(self, map: A) -> Result<Self::Value, A::Error> {
            drain_map(map).map(|()| $v)
        }
    };
}

mod error;
pub use error::WireError;

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A non-negative number read from an integer, a float, or a numeric
/// string; anything else (negative, NaN, text, objects) is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Number(pub Option<f64>);

impl Number {
    /// As a token count, saturating at `u32::MAX`.
    pub fn count(self) -> Option<u32> {
        self.0.map(|n| {
            if n >= f64::from(u32::MAX) {
                u32::MAX
            } else {
                n.round() as u32
            }
        })
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("anything")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Number, E> {
                Ok(Number((v >= 0).then_some(v as f64)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Number, E> {
                Ok(Number((v.is_finite() && v >= 0.0).then_some(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Number, E> {
                match v.trim().parse::<f64>() {
                    Ok(n) => self.visit_f64(n),
                    Err(_) => Ok(Number(None)),
                }
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Number, D::Error> {
                Number::deserialize(d)
            }
            otherwise!('de, Number(None); bool, unit, seq, map);
        }
        deserializer.deserialize_any(V)
    }
}

/// A string, borrowed from the body when it has no escapes; anything that
/// is not a string is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl Text<'_> {
    pub fn into_string(self) -> Option<String> {
        self.0.map(Cow::into_owned)
    }
    pub fn is_nonempty(&self) -> bool {
        self.0.as_deref().is_some_and(|t| !t.is_empty())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("anything")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(v))))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Text<'de>, D::Error> {
                Text::deserialize(d)
            }
            otherwise!('de, Text(None); u64, i64, f64, bool, unit, seq, map);
        }
        deserializer.deserialize_any(V)
    }
}

/// Message content: a string, a list of parts (strings or objects with a
/// `text`), or null. The parts are joined as they are read, so thousands of
/// parts cost one string, not a tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Content {
    #[default]
    Null,
    Text(String),
    /// Content of another type (a number, an object): not an answer.
    Other(&'static str),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("text, a list of parts, or null")
            }
            fn visit_str<E>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            otherwise!('de, Content::Null; unit);
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Content, D::Error> {
                Content::deserialize(d)
            }
            otherwise!('de, Content::Other("a number"); u64, i64, f64);
            otherwise!('de, Content::Other("a boolean"); bool);
            otherwise!('de, Content::Other("an object"); map);
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut text = String::new();
                while let Some(part) = seq.next_element::<Part>()? {
                    if let Some(t) = part.0 {
                        text.push_str(&t);
                    }
                }
                Ok(Content::Text(text))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// One content part: its text, if it has one.
struct Part<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Part<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Part<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a content part")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Part<'de>, E> {
                Ok(Part(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Part<'de>, E> {
                Ok(Part(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part<'de>, A::Error> {
                let mut text = None;
                let mut kind_is_text = true;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "text" => text = map.next_value::<Text<'de>>()?.0,
                        "type" => {
                            let kind = map.next_value::<Text<'de>>()?;
                            // Reasoning or refusal parts are not the answer.
                            kind_is_text =
                                matches!(kind.0.as_deref(), None | Some("text" | "output_text"));
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Part(if kind_is_text { text } else { None }))
            }
            otherwise!('de, Part(None); seq, u64, i64, f64, bool, unit);
        }
        deserializer.deserialize_any(V)
    }
}

/// Token counts and cost, from whatever shape the provider used.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WireUsage {
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub reasoning_tokens: Option<u32>,
    pub cost: Option<f64>,
    /// Of the prompt tokens, those read from the provider's prompt cache.
    pub cached_tokens: Option<u32>,
    /// Of the prompt tokens, those written to it.
    pub cache_write_tokens: Option<u32>,
}

impl<'de> Deserialize<'de> for WireUsage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WireUsage;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a usage object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WireUsage, A::Error> {
                let mut usage = WireUsage::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "prompt_tokens" | "input_tokens" => {
                            usage.prompt_tokens = map.next_value::<Number>()?.count();
                        }
                        "completion_tokens" | "output_tokens" => {
                            usage.completion_tokens = map.next_value::<Number>()?.count();
                        }
                        "cost" => usage.cost = map.next_value::<Number>()?.0,
                        "completion_tokens_details" | "output_tokens_details" => {
                            usage.reasoning_tokens = map.next_value::<Details>()?.reasoning;
                        }
                        "prompt_tokens_details" | "input_tokens_details" => {
                            let details = map.next_value::<Details>()?;
                            usage.cached_tokens = usage.cached_tokens.or(details.cached);
                            usage.cache_write_tokens =
                                usage.cache_write_tokens.or(details.cache_write);
                        }
                        // Anthropic's own names, which some proxies pass on.
                        "cache_read_input_tokens" => {
                            usage.cached_tokens = map.next_value::<Number>()?.count();
                        }
                        "cache_creation_input_tokens" => {
                            usage.cache_write_tokens = map.next_value::<Number>()?.count();
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(usage)
            }
            otherwise!('de, WireUsage::default(); seq, str, u64, i64, f64, bool, unit);
        }
        deserializer.deserialize_any(V)
    }
}

/// `completion_tokens_details.reasoning_tokens`, and
/// `prompt_tokens_details.cached_tokens` and `.cache_write_tokens`.
#[derive(Default)]
struct Details {
    reasoning: Option<u32>,
    cached: Option<u32>,
    cache_write: Option<u32>,
}

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Details;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("token details")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Details, A::Error> {
                let mut details = Details::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "reasoning_tokens" => {
                            details.reasoning = map.next_value::<Number>()?.count();
                        }
                        "cached_tokens" | "cache_read_tokens" => {
                            details.cached = map.next_value::<Number>()?.count();
                        }
                        "cache_write_tokens" | "cache_creation_tokens" => {
                            details.cache_write = map.next_value::<Number>()?.count();
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(details)
            }
            otherwise!('de, Details::default(); seq, str, u64, i64, f64, bool, unit);
        }
        deserializer.deserialize_any(V)
    }
}

/// The first element of a list, the rest skipped without being built.
#[derive(Debug)]
pub struct First<T>(pub Option<T>);

impl<T> Default for First<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<T>, A::Error> {
                let first = seq.next_element::<T>()?;
                drain_seq(seq)?;
                Ok(First(first))
            }
            otherwise!('de, First(None); unit, map, str, u64, i64, f64, bool);
        }
        deserializer.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Whether a reasoning field carried anything (its text is never kept).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Seen(pub bool);

impl<'de> Deserialize<'de> for Seen {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Seen;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("anything")
            }
            fn visit_str<E>(self, v: &str) -> Result<Seen, E> {
                Ok(Seen(!v.is_empty()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seen, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(Seen(any))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Seen, A::Error> {
                let mut any = false;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(Seen(any))
            }
            otherwise!('de, Seen(false); u64, i64, f64, bool, unit);
        }
        deserializer.deserialize_any(V)
    }
}

/// A list of strings; other elements (and non-lists) are skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Strings(pub Vec<String>);

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Strings;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strings, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<Text>()? {
                    if let Some(text) = item.into_string() {
                        out.push(text);
                    }
                }
                Ok(Strings(out))
            }
            otherwise!('de, Strings::default(); map, str, u64, i64, f64, bool, unit);
        }
        deserializer.deserialize_any(V)
    }
}
