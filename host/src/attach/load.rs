//! Reading what a caller named into attachments, held to `[limits]` —
//! `max_attachments`, `max_attachment_bytes`, `max_attachments_bytes` —
//! before anything is sent or paid: a file over the limit is refused from
//! its size, never read whole.

use std::io::Read;
use std::sync::Arc;

use base64::Engine;
use sha2::{Digest, Sha256};

use super::sniff::{self, ACCEPTED};
use super::{Access, Attachment, Attachments, Body, Kind, Source};
use crate::text::{hex, show_bytes};

/// What one run may attach.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_attachments: usize,
    pub max_attachment_bytes: usize,
    pub max_attachments_bytes: usize,
}

/// Reads every source (in order; numbered from 1) or says what is wrong
/// with the first that cannot be taken.
pub fn load(sources: Vec<Source>, access: &Access, limits: &Limits) -> Result<Attachments, String> {
    if sources.len() > limits.max_attachments {
        return Err(format!(
            "{} attachments, over the limit of {} per run (limits.max_attachments)",
            sources.len(),
            limits.max_attachments
        ));
    }
    let mut total = 0usize;
    let mut list = Vec::with_capacity(sources.len());
    for (i, source) in sources.into_iter().enumerate() {
        let id = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let attachment =
            one(id, source, access, limits).map_err(|e| format!("attachment {id}: {e}"))?;
        total += attachment.bytes;
        if total > limits.max_attachments_bytes {
            return Err(format!(
                "the attachments come to more than {}, over the limit of {} per run (limits.max_attachments_bytes)",
                show_bytes(total as u64),
                show_bytes(limits.max_attachments_bytes as u64)
            ));
        }
        list.push(attachment);
    }
    Ok(Attachments::new(list))
}

/// Opens `path` for reading without waiting on it: a FIFO or a device in
/// an allowed directory would block an open (and the read) forever, so the
/// open does not block (the caller then refuses anything but a file).
fn open_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

fn one(id: u32, source: Source, access: &Access, limits: &Limits) -> Result<Attachment, String> {
    let max = limits.max_attachment_bytes;
    let too_big = |size: usize| {
        format!(
            "{} is over the limit of {} per attachment (limits.max_attachment_bytes)",
            show_bytes(size as u64),
            show_bytes(max as u64)
        )
    };
    let (bytes, name) = match source {
        Source::Path(path) => {
            let real = access.resolve(&path)?;
            let file =
                open_file(&real).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            let meta = file
                .metadata()
                .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            if !meta.is_file() {
                return Err(format!("`{}` is not a file", path.display()));
            }
            let size = usize::try_from(meta.len()).unwrap_or(usize::MAX);
            if size > max {
                return Err(format!("`{}`: {}", path.display(), too_big(size)));
            }
            let mut bytes = Vec::with_capacity(size);
            file.take(max as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
            if bytes.len() > max {
                return Err(format!("`{}`: {}", path.display(), too_big(bytes.len())));
            }
            let name = real.file_name().map(|n| n.to_string_lossy().into_owned());
            (bytes, name)
        }
        Source::Data { base64, name } => {
            let encoded = strip_data_url(base64.trim());
            // Four characters carry three bytes: refused before decoding.
            let at_least = encoded.len() / 4 * 3;
            if at_least.saturating_sub(2) > max {
                return Err(too_big(at_least));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.as_bytes())
                .map_err(|e| format!("`data` is not base64 ({e})"))?;
            if bytes.len() > max {
                return Err(too_big(bytes.len()));
            }
            (bytes, name)
        }
        Source::Bytes { bytes, name } => {
            if bytes.len() > max {
                return Err(too_big(bytes.len()));
            }
            (bytes, name)
        }
        Source::Url { url, mime, name } => return by_url(id, url, mime, name),
        Source::Uri(uri) => {
            return Err(format!(
                "chorus cannot read the client's resource `{uri}`: MCP gives a server no way to read its client's resources; send its contents instead, as {{\"data\": BASE64}} or an embedded resource block"
            ));
        }
    };
    accept(id, bytes, name)
}

/// Attachment `id` of `bytes` (already held to the size limit), its type
/// sniffed from them, or what is wrong with them.
pub fn accept(id: u32, bytes: Vec<u8>, name: Option<String>) -> Result<Attachment, String> {
    let name = name.unwrap_or_else(|| format!("attachment-{id}"));
    let (kind, mime) = sniff::sniff(&bytes)
        .map_err(|found| format!("`{name}` is {found}; chorus takes {ACCEPTED}"))?;
    let sha256 = hex(&Sha256::digest(&bytes));
    let size = bytes.len();
    let body = match kind {
        Kind::Text => Body::Text(Arc::from(
            String::from_utf8(bytes).map_err(|_| format!("`{name}` is not UTF-8 text"))?,
        )),
        _ => Body::Base64(Arc::from(
            base64::engine::general_purpose::STANDARD.encode(&bytes),
        )),
    };
    Ok(Attachment {
        id,
        name,
        kind,
        mime: mime.to_owned(),
        bytes: size,
        sha256,
        shape: super::Shape::default(),
        body,
    })
}

/// A URL the provider fetches (or chorus, for one that cannot: see
/// `llm::fetch`): an image unless `mime` says PDF.
fn by_url(
    id: u32,
    url: String,
    mime: Option<String>,
    name: Option<String>,
) -> Result<Attachment, String> {
    let kind = match mime.as_deref() {
        None => Kind::Image,
        Some(m) if m.starts_with("image/") => Kind::Image,
        Some("application/pdf") => Kind::Pdf,
        Some(other) => {
            return Err(format!(
                "a URL attachment is sent to providers as an image or a PDF, not {other}; send other types as `data`"
            ));
        }
    };
    let name = name.unwrap_or_else(|| {
        url.rsplit('/').find(|s| !s.is_empty()).map_or_else(
            || format!("attachment-{id}"),
            |s| crate::text::ellipsized(s, 80),
        )
    });
    Ok(Attachment {
        id,
        name,
        kind,
        mime: mime.unwrap_or_else(|| "image/*".to_owned()),
        bytes: 0,
        sha256: hex(&Sha256::digest(url.as_bytes())),
        shape: super::Shape::default(),
        body: Body::Url(Arc::from(url)),
    })
}

/// The base64 of a `data:…;base64,` URL, or the text as it is.
fn strip_data_url(text: &str) -> &str {
    match text.strip_prefix("data:") {
        Some(rest) => rest.split_once(";base64,").map_or(text, |(_, data)| data),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_attachments: 2,
        max_attachment_bytes: 64,
        max_attachments_bytes: 100,
    };
    const GIF: &[u8] = b"GIF89a\x01\0\x01\0\x80\0\0\0\0\0\xff\xff\xff!";

    fn data(bytes: &[u8], name: &str) -> Source {
        Source::Data {
            base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            name: Some(name.to_owned()),
        }
    }

    #[test]
    fn a_gif_named_png_is_a_gif_and_text_stays_text() {
        let got = load(
            vec![data(GIF, "photo.png"), data(b"a,b\n1,2\n", "t.csv")],
            &Access::Remote,
            &LIMITS,
        )
        .unwrap();
        let all: Vec<&Attachment> = got.iter().collect();
        assert_eq!(
            (all[0].kind, all[0].mime.as_str()),
            (Kind::Image, "image/gif")
        );
        assert!(all[0].url().starts_with("data:image/gif;base64,R0lGOD"));
        assert_eq!(all[1].body, Body::Text(Arc::from("a,b\n1,2\n")));
        assert_eq!(all[1].id, 2);
    }

    #[test]
    fn limits_hold_before_anything_is_sent() {
        let big = vec![b'x'; 65];
        let err = load(vec![data(&big, "big.txt")], &Access::Remote, &LIMITS).unwrap_err();
        assert!(err.contains("max_attachment_bytes"), "{err}");
        let three = vec![data(GIF, "a"), data(GIF, "b"), data(GIF, "c")];
        let err = load(three, &Access::Remote, &LIMITS).unwrap_err();
        assert!(err.contains("limits.max_attachments)"), "{err}");
        let sixty = vec![b'y'; 60];
        let err = load(
            vec![data(&sixty, "a"), data(&sixty, "b")],
            &Access::Remote,
            &LIMITS,
        )
        .unwrap_err();
        assert!(err.contains("max_attachments_bytes"), "{err}");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_from_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.bin");
        std::fs::write(&file, vec![0u8; 1000]).unwrap();
        let err = load(vec![Source::Path(file)], &Access::Anywhere, &LIMITS).unwrap_err();
        assert!(
            err.contains("1000 bytes is over the limit of 64 bytes"),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Without the non-blocking open this waits forever for a writer.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(load(vec![Source::Path(fifo)], &Access::Anywhere, &LIMITS));
        });
        let loaded = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a FIFO is refused at once, not waited on");
        let err = loaded.unwrap_err();
        assert!(err.contains("is not a file"), "{err}");
    }

    #[test]
    fn unknown_types_and_client_resources_say_what_to_do() {
        let err = load(
            vec![data(b"PK\x03\x04\x14\0\0\0", "a.docx")],
            &Access::Remote,
            &LIMITS,
        )
        .unwrap_err();
        assert!(
            err.contains("application/zip") && err.contains("chorus takes images"),
            "{err}"
        );
        let err = load(
            vec![Source::Uri("file:///x".into())],
            &Access::Remote,
            &LIMITS,
        )
        .unwrap_err();
        assert!(err.contains("send its contents instead"), "{err}");
        let data_url = Source::Data {
            base64: format!(
                "data:image/gif;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(GIF)
            ),
            name: None,
        };
        let got = load(vec![data_url], &Access::Remote, &LIMITS).unwrap();
        assert_eq!(got.iter().next().unwrap().name, "attachment-1");
    }
}
