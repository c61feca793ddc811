//! Cutting text to a limit, writing bytes as hex and sizes for people,
//! and making outside text safe to print on a terminal:
//! the one place that knows a cut must fall on a character boundary.
//! Everything that shortens outside text (provider replies, plugin output,
//! prompts, answers) cuts here, so none of it can panic inside a
//! multi-byte character.

use std::fmt::Write;

/// The longest prefix of `s` of at most `max_bytes` bytes that ends on a
/// character boundary.
pub fn cut_at_char_boundary(s: &str, max_bytes: usize) -> &str {
    &s[..s.floor_char_boundary(max_bytes)]
}

/// The first `max_chars` characters of `s`; `None` when `s` has no more.
pub fn cut_at_chars(s: &str, max_chars: usize) -> Option<&str> {
    let (at, _) = s.char_indices().nth(max_chars)?;
    Some(&s[..at])
}

/// `s` cut to `max_chars` characters, an ellipsis marking a cut.
pub fn ellipsized(s: &str, max_chars: usize) -> String {
    match cut_at_chars(s, max_chars) {
        Some(head) => format!("{head}…"),
        None => s.to_owned(),
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A size for people: `1.5 KiB`, `2.0 MiB`, `12 bytes`.
pub fn show_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30)),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// `s` with every control character but newline and tab replaced by `�`:
/// an escape sequence in a stored prompt or answer (a clipboard write,
/// cursor moves, a retitled window) is shown, never obeyed, by a terminal.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let obeyed = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.contains(obeyed) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.replace(obeyed, "\u{fffd}"))
}

/// A writer that passes text on through [`printable`]. `write!` hands it
/// whole `str` pieces, so no character is split between two writes.
pub struct Printable<W>(pub W);

impl<W: std::io::Write> std::io::Write for Printable<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(printable(&text).as_bytes())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Query parameters whose value is a credential, in any case.
const SECRET_PARAMS: [&str; 7] = [
    "password",
    "sslpassword",
    "token",
    "access_token",
    "api_key",
    "apikey",
    "secret",
];

/// `url` as it may be shown (`chorus check`, an error, a log line): its
/// userinfo password and credential query parameters (`?password=`,
/// `sslpassword`, `token`…) as `***`. Text that is not a URL shows its
/// scheme at most, never what could be a secret.
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url
            .split_once("://")
            .map_or("<not a URL>".to_owned(), |(scheme, _)| {
                format!("{scheme}://…")
            });
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    let secret = |name: &str| SECRET_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(name));
    if parsed.query_pairs().any(|(name, _)| secret(&name)) {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(name, value)| {
                let value = if secret(&name) {
                    "***".into()
                } else {
                    value.into_owned()
                };
                (name.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_cuts_fall_back_to_a_character_boundary() {
        // `“` is bytes 3..6.
        let s = "ab “c”";
        assert_eq!(cut_at_char_boundary(s, 4), "ab ");
        assert_eq!(cut_at_char_boundary(s, 6), "ab “");
        assert_eq!(cut_at_char_boundary(s, 100), s);
        assert_eq!(cut_at_char_boundary(s, 0), "");
    }

    #[test]
    fn char_cuts_count_characters_and_mark_the_cut() {
        assert_eq!(cut_at_chars("ééé", 2), Some("éé"));
        assert_eq!(cut_at_chars("ééé", 3), None);
        assert_eq!(ellipsized("ééééé", 3), "ééé…");
        assert_eq!(ellipsized("short", 10), "short");
    }

    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn escapes_in_stored_text_are_shown_not_obeyed() {
        use std::io::Write;
        let hostile = "ok\x1b]52;c;ZXZpbA==\x07 \x1b[2J\u{9b}31m\r\nline\ttab";
        let mut out = Printable(Vec::new());
        write!(out, "{hostile}").unwrap();
        let shown = String::from_utf8(out.0).unwrap();
        assert!(
            !shown.contains(|c: char| c.is_control() && c != '\n' && c != '\t'),
            "{shown:?}"
        );
        assert!(shown.contains("\nline\ttab") && shown.contains("]52;c;ZXZpbA=="));
        assert_eq!(printable("plain\ntext"), "plain\ntext");
    }

    #[test]
    fn credentials_in_urls_are_never_shown() {
        for (url, secret) in [
            ("postgres://u:s3cret@db/runs", "s3cret"),
            (
                "postgres://u@db/runs?sslmode=require&password=s3cret",
                "s3cret",
            ),
            ("postgres://db/runs?SSLPASSWORD=s3cret", "s3cret"),
            ("https://collector:4318/?token=s3cret", "s3cret"),
            ("postgres://u:s3cret@[bad", "s3cret"),
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains(secret), "{url} -> {shown}");
        }
        assert_eq!(
            redact_url("postgres://u@db/runs?sslmode=require&password=x"),
            "postgres://u@db/runs?sslmode=require&password=***"
        );
        assert_eq!(redact_url("postgres://u@db/runs"), "postgres://u@db/runs");
    }
}
