//! API keys: a type that cannot be printed by accident, and the scrubber
//! that removes any echo of a key from what providers send back.
//!
//! Providers have been seen echoing the request's credentials in error
//! messages, sometimes truncated. So the scrubber removes every run of
//! `MIN_RUN` or more consecutive characters of the key, not just the whole
//! key — and it runs on provider text before anything logs, keeps, retries
//! on, or truncates it. Keys shorter than `MIN_RUN` (`ollama`, `EMPTY`)
//! are placeholders, not secrets: scrubbing them would only mangle answers
//! that happen to contain the word.

use std::borrow::Cow;
use std::fmt;

use aho_corasick::AhoCorasick;

/// The shortest run of a key's characters that is removed wherever it
/// appears; also the shortest key that is treated as a secret.
pub const MIN_RUN: usize = 10;

/// What replaces a key (or part of one) in provider text.
pub const REDACTED: &str = "[redacted]";

/// An API key. No `Display`, no `Serialize`, and a `Debug` that shows
/// nothing: the only way to the text is `expose`, used to build the header.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(key: String) -> Self {
        Self(key)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Removes this key from provider text (see the module docs).
    pub fn scrubber(&self) -> Scrubber {
        Scrubber::new(&self.0)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Removes every run of `MIN_RUN` or more characters of one key.
#[derive(Clone, Default)]
pub struct Scrubber {
    /// Every `MIN_RUN`-character window of the key; `None` when the key is
    /// too short to be a secret (or there is none).
    windows: Option<AhoCorasick>,
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scrubber")
    }
}

impl Scrubber {
    /// A scrubber that changes nothing (no key).
    pub fn none() -> Self {
        Self::default()
    }

    fn new(key: &str) -> Self {
        let chars: Vec<(usize, char)> = key.char_indices().collect();
        if chars.len() < MIN_RUN {
            return Self::none();
        }
        let windows: Vec<&str> = (0..=chars.len() - MIN_RUN)
            .map(|i| {
                let start = chars[i].0;
                let end = chars.get(i + MIN_RUN).map_or(key.len(), |c| c.0);
                &key[start..end]
            })
            .collect();
        Self {
            windows: AhoCorasick::new(windows).ok(),
        }
    }

    /// `text` with every run of `MIN_RUN`+ key characters replaced by
    /// `[redacted]`; borrowed (no copy) when there is nothing to remove.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(windows) = &self.windows else {
            return Cow::Borrowed(text);
        };
        // Overlapping windows of one echo merge into one covered range.
        let mut covered: Vec<(usize, usize)> = Vec::new();
        for found in windows.find_overlapping_iter(text) {
            match covered.last_mut() {
                Some(last) if found.start() <= last.1 => last.1 = last.1.max(found.end()),
                _ => covered.push((found.start(), found.end())),
            }
        }
        if covered.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in covered {
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
            at = end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// `scrub` for an owned string, without a copy when nothing changes.
    pub fn scrub_owned(&self, text: String) -> String {
        match self.scrub(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(scrubbed) => scrubbed,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const KEY: &str = "sk-canary-7d3f9a61c0b2e845";

    #[test]
    fn whole_partial_and_repeated_echoes_are_removed() {
        let s = Secret::new(KEY.into()).scrubber();
        assert_eq!(s.scrub(&format!("bad key {KEY}!")), "bad key [redacted]!");
        assert_eq!(s.scrub("prefix sk-canary-7d3f9a…"), "prefix [redacted]…");
        assert_eq!(s.scrub("tail …9a61c0b2e845"), "tail …[redacted]");
        assert_eq!(s.scrub(&format!("{KEY}{KEY}")), "[redacted]");
        assert_eq!(s.scrub("sk-canary"), "sk-canary", "9 characters stay");
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_placeholder_keys_change_nothing() {
        for key in ["ollama", "EMPTY", ""] {
            let s = Secret::new(key.into()).scrubber();
            let text = format!("the {key} is EMPTY and ollama runs");
            assert_eq!(s.scrub(&text), text);
        }
    }

    #[test]
    fn debug_shows_nothing() {
        let secret = Secret::new(KEY.into());
        assert_eq!(format!("{secret:?}"), "Secret([redacted])");
    }

    proptest! {
        /// No run of MIN_RUN key characters survives, whatever surrounds
        /// the echo and wherever it was cut.
        #[test]
        fn no_run_of_the_key_survives(
            key in "[A-Za-z0-9_-]{10,64}",
            before in "\\PC{0,20}",
            after in "\\PC{0,20}",
            cut_start in 0usize..64,
            cut_len in 10usize..64,
        ) {
            let start = cut_start.min(key.len() - MIN_RUN);
            let end = (start + cut_len).min(key.len());
            let text = format!("{before}{}{after}", &key[start..end]);
            let scrubbed = Secret::new(key.clone()).scrubber().scrub(&text).into_owned();
            for i in 0..=key.len() - MIN_RUN {
                prop_assert!(!scrubbed.contains(&key[i..i + MIN_RUN]), "{scrubbed}");
            }
        }
    }
}
