//! What chorus tells of an attachment's shape from the bytes it holds: an
//! image's width and height, read from its header only (PNG, JPEG, WebP,
//! GIF, with `imagesize`), and a PDF's page count, from the leaves of its
//! page tree (`pdf::pages`, bounded as `pdf` bounds its reads): what a
//! file costs a model is estimated from it, so the count the file
//! declares is not taken on its word. Measured once, when a run starts,
//! off the async runtime; what cannot be read (a URL attachment, whose
//! bytes chorus never holds; a damaged or encrypted file) stays unknown.

use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::{Attachment, Attachments, Body, Kind, pdf};

/// Pages of a PDF, pixels of an image: contract 0.4's `attachment-info`
/// fields, and what the run's record and `chorus runs show` list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

impl Shape {
    pub fn is_known(&self) -> bool {
        *self != Self::default()
    }

    /// `1200×800 px`, `12 pages`, or nothing when not known.
    pub fn describe(&self) -> Option<String> {
        match (self.pages, self.width, self.height) {
            (Some(1), ..) => Some("1 page".to_owned()),
            (Some(n), ..) => Some(format!("{n} pages")),
            (None, Some(w), Some(h)) => Some(format!("{w}×{h} px")),
            _ => None,
        }
    }
}

/// How much base64 an image's header is first looked for in: its first
/// 48 KiB. A JPEG whose frame header comes later (after a large embedded
/// colour profile) is read whole.
const HEADER_BASE64: usize = 64 << 10;

/// How long counting one PDF's pages may take, waiting for its turn
/// included (a run's PDFs together are held to `pdf::RUN_TIME`). The
/// count parses the whole file (its page tree may be anywhere in it): a
/// 5 MB file of 20,000 pages takes about 2 s in a debug build.
const COUNT_TIME: Duration = Duration::from_secs(5);

/// An image's width and height from its header; unknown when the header
/// does not say (or does not parse).
pub fn image(bytes: &[u8]) -> Shape {
    match imagesize::blob_size(bytes) {
        Ok(size) => Shape {
            pages: None,
            width: u32::try_from(size.width).ok(),
            height: u32::try_from(size.height).ok(),
        },
        Err(_) => Shape::default(),
    }
}

/// The same attachments, each with what can be told of its shape from the
/// bytes held (those already measured, and URLs, as they are).
pub async fn measured(attachments: Attachments) -> Attachments {
    let unmeasured = |a: &Attachment| {
        !a.shape.is_known()
            && matches!(a.body, Body::Base64(_))
            && matches!(a.kind, Kind::Image | Kind::Pdf)
    };
    if !attachments.iter().any(unmeasured) {
        return attachments;
    }
    let bounds = pdf::Bounds {
        time: COUNT_TIME,
        ..pdf::Bounds::DEFAULT
    };
    let mut list: Vec<Attachment> = attachments.iter().cloned().collect();
    for a in list.iter_mut().filter(|a| unmeasured(a)) {
        let Body::Base64(data) = &a.body else {
            continue;
        };
        a.shape = match a.kind {
            Kind::Pdf => Shape {
                pages: pdf::pages(data.clone(), bounds).await,
                ..Shape::default()
            },
            _ => image_of_base64(data.clone()).await,
        };
    }
    Attachments::new(list)
}

/// An image's shape from its base64: the header from the first bytes, or
/// (rarely) from all of them, decoded on a blocking thread.
async fn image_of_base64(data: std::sync::Arc<str>) -> Shape {
    let head = &data[..data.len().min(HEADER_BASE64)];
    if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(head) {
        let shape = image(&bytes);
        if shape.is_known() || head.len() == data.len() {
            return shape;
        }
    }
    tokio::task::spawn_blocking(move || {
        base64::engine::general_purpose::STANDARD
            .decode(data.as_bytes())
            .map_or_else(|_| Shape::default(), |bytes| image(&bytes))
    })
    .await
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3×2 PNG: the signature, then IHDR (width, height, 8-bit RGB).
    const PNG: &[u8] =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x03\0\0\0\x02\x08\x02\0\0\0\x12\x16\xf1\x4d";
    /// A 5×4 GIF: the header and logical screen descriptor.
    const GIF: &[u8] = b"GIF89a\x05\0\x04\0\x80\0\0\0\0\0\xff\xff\xff!";
    /// A 7×6 lossless WebP: RIFF, VP8L, the signature byte, then 14-bit
    /// width-1 and height-1.
    const WEBP: &[u8] = b"RIFF\x1a\0\0\0WEBPVP8L\x0d\0\0\0\x2f\x06\x40\x01\0\0\0\0\0\0\0\0\0\0";

    /// A 9×8 baseline JPEG: SOI, a JFIF APP0, then SOF0 (precision 8,
    /// height 8, width 9, 3 components).
    fn jpeg(padding: usize) -> Vec<u8> {
        let mut bytes = b"\xff\xd8".to_vec();
        // APP0 carrying `padding` more bytes, as a large colour profile would.
        let length = 16 + padding;
        bytes.extend([0xff, 0xe0, (length >> 8) as u8, length as u8]);
        bytes.extend(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        bytes.resize(bytes.len() + padding, 0);
        bytes.extend(b"\xff\xc0\0\x11\x08\0\x08\0\x09\x03\x01\x22\0\x02\x11\x01\x03\x11\x01");
        bytes.extend(b"\xff\xd9");
        bytes
    }

    fn shape(width: u32, height: u32) -> Shape {
        Shape {
            pages: None,
            width: Some(width),
            height: Some(height),
        }
    }

    #[test]
    fn the_four_image_types_give_their_size_from_the_header() {
        assert_eq!(image(PNG), shape(3, 2));
        assert_eq!(image(GIF), shape(5, 4));
        assert_eq!(image(WEBP), shape(7, 6));
        assert_eq!(image(&jpeg(0)), shape(9, 8));
        assert_eq!(image(b"\x89PNG\r\n\x1a\n"), Shape::default());
        assert_eq!(image(b"not an image"), Shape::default());
    }

    #[test]
    fn a_shape_says_what_is_known() {
        assert_eq!(shape(1200, 800).describe().as_deref(), Some("1200×800 px"));
        let pages = |n| Shape {
            pages: Some(n),
            ..Shape::default()
        };
        assert_eq!(pages(1).describe().as_deref(), Some("1 page"));
        assert_eq!(pages(12).describe().as_deref(), Some("12 pages"));
        assert_eq!(Shape::default().describe(), None);
        assert_eq!(
            serde_json::to_value(shape(3, 2)).unwrap(),
            serde_json::json!({"width": 3, "height": 2})
        );
    }

    fn attachment(id: u32, kind: Kind, bytes: &[u8]) -> Attachment {
        Attachment {
            id,
            name: format!("a{id}"),
            kind,
            mime: "application/octet-stream".into(),
            bytes: bytes.len(),
            sha256: String::new(),
            shape: Shape::default(),
            body: Body::Base64(
                base64::engine::general_purpose::STANDARD
                    .encode(bytes)
                    .into(),
            ),
        }
    }

    #[tokio::test]
    async fn a_runs_attachments_are_measured_from_the_bytes_held() {
        // The JPEG's frame header lies past the first 48 KiB: read whole.
        let far = jpeg(60 << 10);
        let by_url = Attachment {
            body: Body::Url("https://example.com/x.png".into()),
            ..attachment(3, Kind::Image, b"")
        };
        let text = Attachment {
            body: Body::Text("hello".into()),
            ..attachment(4, Kind::Text, b"")
        };
        let all = Attachments::new(vec![
            attachment(1, Kind::Image, PNG),
            attachment(2, Kind::Image, &far),
            by_url,
            text,
            attachment(5, Kind::Pdf, b"%PDF-1.7\nnot really a pdf"),
        ]);
        let got: Vec<Shape> = measured(all).await.iter().map(|a| a.shape).collect();
        assert_eq!(
            got,
            [
                shape(3, 2),
                shape(9, 8),
                Shape::default(),
                Shape::default(),
                Shape::default()
            ]
        );
    }
}
