//! Server-sent events framing, as providers stream chat completions:
//! lines end in LF, CRLF or CR (a CRLF may be split across reads); `data:`
//! lines accumulate (joined with newlines) until a blank line dispatches
//! the event; lines starting with `:` are comments (keep-alives such as
//! `: OPENROUTER PROCESSING`) and are dropped; `event:`, `id:` and `retry:`
//! carry nothing chorus needs. An event larger than the limit is an error,
//! so a stream without line breaks cannot grow memory without bound.

/// Splits a byte stream into the data of its events.
#[derive(Debug)]
pub struct SseParser {
    /// The current, unfinished line.
    line: Vec<u8>,
    /// The current event's data lines, each followed by `\n`.
    data: Vec<u8>,
    /// The previous read ended with CR: a leading LF belongs to it.
    after_cr: bool,
    max_event_bytes: usize,
}

/// An event grew past the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge(pub usize);

impl SseParser {
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            after_cr: false,
            max_event_bytes,
        }
    }

    /// Feeds bytes as they arrive; `event` gets each complete event's data.
    /// Stops at the first error `event` returns.
    pub fn feed<E>(
        &mut self,
        mut bytes: &[u8],
        event: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            let (line, rest) = (&bytes[..end], &bytes[end + 1..]);
            let crlf = bytes[end] == b'\r';
            bytes = match (crlf, rest.first()) {
                (true, Some(b'\n')) => &rest[1..],
                (true, None) => {
                    self.after_cr = true;
                    rest
                }
                _ => rest,
            };
            if self.line.is_empty() {
                self.line_done(line, event)?;
            } else {
                self.grow_line(line)?;
                let whole = std::mem::take(&mut self.line);
                self.line_done(&whole, event)?;
            }
        }
        self.grow_line(bytes)
    }

    /// The stream ended: an event still open is dispatched (some servers
    /// end without the final blank line).
    pub fn finish<E>(
        &mut self,
        event: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if !self.line.is_empty() {
            let whole = std::mem::take(&mut self.line);
            self.line_done(&whole, event)?;
        }
        self.dispatch(event)
    }

    fn grow_line<E>(&mut self, bytes: &[u8]) -> Result<(), FeedError<E>> {
        if self.line.len() + self.data.len() + bytes.len() > self.max_event_bytes {
            return Err(FeedError::TooLarge(TooLarge(self.max_event_bytes)));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done<E>(
        &mut self,
        line: &[u8],
        event: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if line.is_empty() {
            return self.dispatch(event);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.max_event_bytes {
                return Err(FeedError::TooLarge(TooLarge(self.max_event_bytes)));
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
        }
        Ok(())
    }

    fn dispatch<E>(
        &mut self,
        event: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if self.data.is_empty() {
            return Ok(());
        }
        self.data.pop();
        let result = match std::str::from_utf8(&self.data) {
            Ok(text) => event(text),
            Err(_) => event(&String::from_utf8_lossy(&self.data)),
        };
        self.data.clear();
        result.map_err(FeedError::Event)
    }
}

/// Why feeding stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum FeedError<E> {
    TooLarge(TooLarge),
    Event(E),
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn events(chunks: &[&[u8]], limit: usize) -> Result<Vec<String>, FeedError<()>> {
        let mut parser = SseParser::new(limit);
        let mut out = Vec::new();
        let mut push = |d: &str| -> Result<(), ()> {
            out.push(d.to_owned());
            Ok(())
        };
        for chunk in chunks {
            parser.feed(chunk, &mut push)?;
        }
        parser.finish(&mut push)?;
        Ok(out)
    }

    #[test]
    fn comments_crlf_multiline_and_other_fields() {
        let stream = b": OPENROUTER PROCESSING\r\n\r\nevent: x\r\nid: 1\r\ndata: {\"a\":\r\ndata:1}\r\n\r\ndata: [DONE]\n\n";
        assert_eq!(events(&[stream], 1024).unwrap(), ["{\"a\":\n1}", "[DONE]"]);
    }

    #[test]
    fn a_crlf_split_across_reads_is_one_line_end() {
        let got = events(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"], 64).unwrap();
        assert_eq!(got, ["a\nb"]);
        let cr_only = events(&[b"data: a\r\rdata: b\r\r"], 64).unwrap();
        assert_eq!(cr_only, ["a", "b"]);
    }

    #[test]
    fn an_unterminated_last_event_is_still_dispatched() {
        assert_eq!(events(&[b"data: last"], 64).unwrap(), ["last"]);
    }

    #[test]
    fn events_and_lines_are_bounded() {
        assert_eq!(
            events(&[&[b'x'; 100]], 64).unwrap_err(),
            FeedError::TooLarge(TooLarge(64))
        );
        let many_lines = "data: 0123456789\n".repeat(10);
        assert!(events(&[many_lines.as_bytes()], 64).is_err());
    }

    proptest! {
        /// However the bytes are split, the same events come out.
        #[test]
        fn splitting_never_changes_the_events(
            data in prop::collection::vec("[a-z{}\":, ]{0,20}", 1..6),
            crlf in any::<bool>(),
            cuts in prop::collection::vec(0usize..400, 0..8),
        ) {
            let end = if crlf { "\r\n" } else { "\n" };
            let mut stream = String::new();
            for d in &data {
                stream.push_str(&format!(": keep-alive{end}data: {d}{end}{end}"));
            }
            let bytes = stream.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for cut in cuts {
                chunks.push(&bytes[at..cut]);
                at = cut;
            }
            chunks.push(&bytes[at..]);
            let whole = events(&[bytes], 4096).unwrap();
            prop_assert_eq!(events(&chunks, 4096).unwrap(), whole.clone());
            let expected: Vec<String> = data.iter().filter(|d| !d.is_empty()).cloned().collect();
            // An empty `data:` line still makes an event: "" joined is "".
            let non_empty: Vec<String> = whole.into_iter().filter(|d| !d.is_empty()).collect();
            prop_assert_eq!(non_empty, expected);
        }
    }
}
