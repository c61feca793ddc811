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
    /// The characters the key is made of, sorted: a window can only be
    /// made of them.
    alphabet: Vec<char>,
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
        let mut alphabet: Vec<char> = key.chars().collect();
        alphabet.sort_unstable();
        alphabet.dedup();
        Self {
            windows: AhoCorasick::new(windows).ok(),
            alphabet,
        }
    }

    /// `text` with every run of `MIN_RUN`+ key characters replaced by
    /// `[redacted]`; borrowed (no copy) when there is nothing to remove.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let covered = self.covered(text);
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

    /// The byte ranges of `text` that echo the key: overlapping windows of
    /// one echo merge into one range.
    fn covered(&self, text: &str) -> Vec<(usize, usize)> {
        let Some(windows) = &self.windows else {
            return Vec::new();
        };
        let mut covered: Vec<(usize, usize)> = Vec::new();
        for found in windows.find_overlapping_iter(text) {
            match covered.last_mut() {
                Some(last) if found.start() <= last.1 => last.1 = last.1.max(found.end()),
                _ => covered.push((found.start(), found.end())),
            }
        }
        covered
    }

    /// Scrubs text that arrives in pieces (a streamed answer passed on as
    /// it comes): see [`ScrubbedStream`].
    pub fn stream(&self) -> ScrubbedStream {
        ScrubbedStream {
            scrubber: self.clone(),
            pending: String::new(),
        }
    }

    /// `scrub` for an owned string, without a copy when nothing changes.
    pub fn scrub_owned(&self, text: String) -> String {
        match self.scrub(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(scrubbed) => scrubbed,
        }
    }
}

/// Text scrubbed as it arrives, piece by piece: what goes out never holds
/// a run of `MIN_RUN` key characters, even one split across pieces.
///
/// A window of the key that the next piece could complete ends the text so
/// far and is made of the key's characters only, so what waits is the
/// text's last run of them (at most `MIN_RUN - 1`: in prose, the word
/// being written), and any echo found that reaches into it; `finish`
/// gives the rest. With no key, pieces pass at once.
pub struct ScrubbedStream {
    scrubber: Scrubber,
    pending: String,
}

impl ScrubbedStream {
    /// Takes a piece; returns what may go out now (nothing while it waits).
    pub fn push(&mut self, piece: &str) -> Option<String> {
        if self.scrubber.windows.is_none() {
            return (!piece.is_empty()).then(|| piece.to_owned());
        }
        self.pending.push_str(piece);
        let alphabet = &self.scrubber.alphabet;
        let mut end = self.pending.len();
        for (held, (at, c)) in self.pending.char_indices().rev().enumerate() {
            if held + 1 >= MIN_RUN || alphabet.binary_search(&c).is_err() {
                break;
            }
            end = at;
        }
        // A window that could still grow starts at `end` or later; an echo
        // found already that reaches past it waits whole.
        if let Some(&(start, _)) = self
            .scrubber
            .covered(&self.pending)
            .iter()
            .find(|&&(start, stop)| start < end && stop > end)
        {
            end = start;
        }
        if end == 0 {
            return None;
        }
        let out = self.scrubber.scrub(&self.pending[..end]).into_owned();
        self.pending.drain(..end);
        Some(out)
    }

    /// The stream ended: what is left, scrubbed.
    pub fn finish(self) -> String {
        self.scrubber.scrub_owned(self.pending)
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

        /// Streamed in any pieces, no run of the key goes out either, and
        /// text without the key goes out as it came.
        #[test]
        fn no_run_of_the_key_survives_a_stream(
            key in "[A-Za-z0-9_-]{10,64}",
            before in "\\PC{0,80}",
            after in "\\PC{0,80}",
            cut_start in 0usize..64,
            cut_len in 10usize..64,
            sizes in proptest::collection::vec(1usize..30, 1..40),
        ) {
            let start = cut_start.min(key.len() - MIN_RUN);
            let end = (start + cut_len).min(key.len());
            let text = format!("{before}{}{after}", &key[start..end]);
            let scrubber = Secret::new(key.clone()).scrubber();
            for (text, echo) in [(text.clone(), true), (format!("{before}{after}"), false)] {
                let mut stream = scrubber.stream();
                let mut out = String::new();
                let mut at = 0;
                for size in sizes.iter().cycle() {
                    if at >= text.len() {
                        break;
                    }
                    let mut next = (at + size).min(text.len());
                    while !text.is_char_boundary(next) {
                        next += 1;
                    }
                    out.extend(stream.push(&text[at..next]));
                    at = next;
                }
                out.push_str(&stream.finish());
                for i in 0..=key.len() - MIN_RUN {
                    prop_assert!(!out.contains(&key[i..i + MIN_RUN]), "{out}");
                }
                if !echo && !text.contains(&key[..MIN_RUN]) {
                    prop_assert_eq!(&out, &scrubber.scrub(&text).into_owned());
                }
            }
        }
    }
}
