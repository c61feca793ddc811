//! Cutting text to a limit, writing bytes as hex and sizes for people:
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
}
