//! The type of an attachment, from its bytes: magic numbers for images,
//! PDF and audio (the `infer` crate), valid UTF-8 without NULs for text.
//! A file's name or a caller's claim never decides it: a GIF named
//! `.png` is a GIF.

use super::Kind;

/// The types chorus takes, for messages that list them.
pub const ACCEPTED: &str = "images (PNG, JPEG, WebP, GIF), PDF, audio (WAV, MP3, FLAC, OGG, M4A/AAC) and plain text (UTF-8: code, markdown, CSV…)";

/// How far into a file text is checked for NULs (binary files have them
/// early); the whole file is still checked to be UTF-8.
const NUL_WINDOW: usize = 8192;

/// The kind and media type of `bytes`, or what was found instead.
pub fn sniff(bytes: &[u8]) -> Result<(Kind, &'static str), String> {
    if let Some(found) = infer::get(bytes) {
        let mime = found.mime_type();
        let kind = match mime {
            "image/png" | "image/jpeg" | "image/webp" | "image/gif" => Some(Kind::Image),
            "application/pdf" => Some(Kind::Pdf),
            "audio/x-wav" | "audio/mpeg" | "audio/x-flac" | "audio/ogg" | "audio/m4a"
            | "audio/aac" => Some(Kind::Audio),
            _ => None,
        };
        if let Some(kind) = kind {
            return Ok((kind, canonical(mime)));
        }
        // infer names some text formats (HTML, XML, shell scripts): those
        // are text like any other.
        if !(mime.starts_with("text/") || mime.ends_with("xml")) || !is_text(bytes) {
            return Err(format!("{mime} ({})", found.extension()));
        }
    }
    if is_text(bytes) {
        return Ok((Kind::Text, "text/plain"));
    }
    Err("binary data of no type chorus knows".to_owned())
}

/// UTF-8, with no NUL among the first bytes.
fn is_text(bytes: &[u8]) -> bool {
    !bytes[..bytes.len().min(NUL_WINDOW)].contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// The media type providers expect for what `infer` names otherwise.
fn canonical(mime: &'static str) -> &'static str {
    match mime {
        "audio/x-wav" => "audio/wav",
        "audio/x-flac" => "audio/flac",
        "audio/m4a" => "audio/mp4",
        other => other,
    }
}

/// The format name OpenAI's `input_audio.format` takes for `mime`.
pub fn audio_format(mime: &str) -> &str {
    match mime {
        "audio/wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/flac" => "flac",
        "audio/ogg" => "ogg",
        "audio/mp4" => "m4a",
        "audio/aac" => "aac",
        other => other.strip_prefix("audio/").unwrap_or(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
    const GIF: &[u8] = b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff!";

    #[test]
    fn the_type_comes_from_the_bytes() {
        assert_eq!(sniff(PNG), Ok((Kind::Image, "image/png")));
        assert_eq!(sniff(GIF), Ok((Kind::Image, "image/gif")));
        assert_eq!(
            sniff(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"),
            Ok((Kind::Pdf, "application/pdf"))
        );
        assert_eq!(
            sniff(b"RIFF\x24\0\0\0WAVEfmt "),
            Ok((Kind::Audio, "audio/wav"))
        );
        assert_eq!(
            sniff("a,b\n1,2\n".as_bytes()),
            Ok((Kind::Text, "text/plain"))
        );
        assert_eq!(
            sniff(b"<html><body>hi</body></html>"),
            Ok((Kind::Text, "text/plain"))
        );
    }

    #[test]
    fn what_chorus_cannot_send_is_named() {
        let zip = b"PK\x03\x04\x14\0\0\0\x08\0";
        let err = sniff(zip).unwrap_err();
        assert!(err.contains("application/zip"), "{err}");
        let midi = b"MThd\0\0\0\x06\0\x01\0\x01\0\x60";
        assert!(sniff(midi).unwrap_err().contains("audio/midi"));
        assert!(
            sniff(b"\0\x01\x02\xff\xfe")
                .unwrap_err()
                .contains("binary data")
        );
        // Latin-1 text is not UTF-8: said, not sent as garbage.
        assert!(sniff(b"caf\xe9 au lait").is_err());
    }

    #[test]
    fn audio_formats_are_the_names_openai_takes() {
        assert_eq!(audio_format("audio/wav"), "wav");
        assert_eq!(audio_format("audio/mpeg"), "mp3");
    }
}
