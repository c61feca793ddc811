//! How many input tokens an attachment sent as itself may cost: the one
//! estimate every worst case (the cost ceiling, `tokens_per_minute`, a
//! call's estimated usage) adds to its messages' text, through
//! `llm::estimate_prompt_tokens`. Providers do not say before a call what
//! a file costs, so each figure is from their published rules, rounded
//! up; where chorus cannot know the shape (a URL it never fetched, a PDF
//! whose pages it could not count) it assumes a large one, so a ceiling
//! refuses a call rather than lets it overspend.

use super::{Attachment, Body, Kind};

/// Tokens a PDF page sent as a file may cost. Anthropic documents each
/// page as its text (1,500–3,000 tokens, by density) plus an image of the
/// page; OpenAI likewise sends both the extracted text and a picture of
/// each page; Gemini counts 258 a page. The top of Anthropic's text range
/// covers a dense page's text, or a typical page's text and its image.
pub const PDF_PAGE: u64 = 3_000;

/// Bytes of PDF assumed to make one page when the pages could not be
/// counted (a damaged or encrypted file): a compressed page of text with
/// shared fonts rarely takes less, so this overcounts rather than under.
const PDF_BYTES_PER_PAGE: u64 = 2_048;

/// A PDF by URL, whose size chorus never knows: 100 pages, the most one
/// document may have on OpenAI's and Anthropic's file inputs for most
/// models. A longer one may cost more than this says.
const PDF_BY_URL_PAGES: u64 = 100;

/// An image of unknown size (a URL, or a header that would not parse):
/// above the most one image costs under either rule `image` uses (1,445
/// and ~1,600), with room for models that count small patches instead.
pub const IMAGE_UNKNOWN: u64 = 3_000;

/// Audio tokens a second: Gemini's documented 32 (OpenAI's audio models
/// come to fewer).
const AUDIO_TOKENS_PER_SECOND: u64 = 32;

/// Bytes assumed to make a second of audio: 16 kbit/s, the low end of
/// speech in mp3 or Opus; WAV and music take far more bytes a second, so
/// this overcounts their seconds.
const AUDIO_BYTES_PER_SECOND: u64 = 2_000;

/// Audio by URL, whose length chorus never knows: an hour.
const AUDIO_BY_URL_SECONDS: u64 = 3_600;

/// Bytes of a text file a token: three, more tokens than the four-byte
/// rule for message text gives (code and data tokenize worse than prose).
const TEXT_BYTES_PER_TOKEN: u64 = 3;

/// A text file by URL, whose size chorus never knows.
const TEXT_BY_URL: u64 = 100_000;

/// The input tokens `a` may cost when sent as itself.
pub fn estimate(a: &Attachment) -> u64 {
    let by_url = matches!(a.body, Body::Url(_));
    let bytes = match &a.body {
        Body::Text(text) => text.len(),
        _ => a.bytes,
    } as u64;
    match a.kind {
        Kind::Pdf => {
            let pages = match a.shape.pages {
                Some(pages) => u64::from(pages),
                None if by_url => PDF_BY_URL_PAGES,
                None => bytes.div_ceil(PDF_BYTES_PER_PAGE).max(1),
            };
            pages.saturating_mul(PDF_PAGE)
        }
        Kind::Image => match (a.shape.width, a.shape.height) {
            (Some(w), Some(h)) if w > 0 && h > 0 => image(w, h),
            _ => IMAGE_UNKNOWN,
        },
        Kind::Audio => {
            let seconds = if by_url {
                AUDIO_BY_URL_SECONDS
            } else {
                bytes.div_ceil(AUDIO_BYTES_PER_SECOND).max(1)
            };
            seconds.saturating_mul(AUDIO_TOKENS_PER_SECOND)
        }
        Kind::Text if by_url => TEXT_BY_URL,
        Kind::Text => bytes.div_ceil(TEXT_BYTES_PER_TOKEN),
    }
}

/// An image of `w`×`h` pixels: the larger of OpenAI's and Anthropic's
/// published counts.
///
/// OpenAI (`detail: high`, the default for large images): fitted into
/// 2048×2048, then scaled down so its short side is at most 768, it costs
/// 85 tokens plus 170 for each 512×512 tile it spans. Anthropic: fitted
/// into 1568 px on the long side and ~1.15 megapixels, it costs w·h/750
/// tokens, so at most ~1,600.
pub fn image(w: u32, h: u32) -> u64 {
    let (w, h) = (f64::from(w), f64::from(h));
    let fit = (2048.0 / w.max(h)).min(1.0);
    let (w1, h1) = (w * fit, h * fit);
    let short = (768.0 / w1.min(h1)).min(1.0);
    let (w2, h2) = ((w1 * short).ceil(), (h1 * short).ceil());
    let tiles = (w2 / 512.0).ceil() * (h2 / 512.0).ceil();
    let openai = 85.0 + 170.0 * tiles;
    let long = (1568.0 / w.max(h)).min(1.0);
    let area = (1_150_000.0 / (w * h)).sqrt().min(1.0);
    let scale = long.min(area);
    let anthropic = ((w * scale) * (h * scale) / 750.0).ceil();
    openai.max(anthropic) as u64
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::attach::Shape;

    fn attachment(kind: Kind, bytes: usize, shape: Shape, body: Body) -> Attachment {
        Attachment {
            id: 1,
            name: "a".to_owned(),
            kind,
            mime: "application/octet-stream".to_owned(),
            bytes,
            sha256: String::new(),
            shape,
            body,
        }
    }

    fn held(kind: Kind, bytes: usize, shape: Shape) -> Attachment {
        attachment(kind, bytes, shape, Body::Base64(Arc::from("")))
    }

    fn url(kind: Kind) -> Attachment {
        attachment(
            kind,
            0,
            Shape::default(),
            Body::Url(Arc::from("https://example.com/x")),
        )
    }

    fn pages(n: u32) -> Shape {
        Shape {
            pages: Some(n),
            ..Shape::default()
        }
    }

    fn pixels(w: u32, h: u32) -> Shape {
        Shape {
            pages: None,
            width: Some(w),
            height: Some(h),
        }
    }

    #[test]
    fn a_pdf_costs_its_pages() {
        assert_eq!(estimate(&held(Kind::Pdf, 40_000, pages(1))), 3_000);
        assert_eq!(estimate(&held(Kind::Pdf, 900_000, pages(300))), 900_000);
        // Pages not counted: a page per 2 KiB, never none.
        assert_eq!(estimate(&held(Kind::Pdf, 20_480, Shape::default())), 30_000);
        assert_eq!(estimate(&held(Kind::Pdf, 10, Shape::default())), 3_000);
        // By URL: a 100-page document.
        assert_eq!(estimate(&url(Kind::Pdf)), 300_000);
    }

    #[test]
    fn an_image_costs_what_its_pixels_come_to() {
        // OpenAI's examples: 1024×1024 is 765 tokens, 2048×4096 1,105
        // (768×1536, six tiles); Anthropic's rule counts more for both:
        // 1000×1000 is ~1,334, and 2048×4096, fitted to 1.15 MP, ~1,534.
        assert_eq!(image(1000, 1000), 1_334);
        assert_eq!(image(2048, 4096), 1_534);
        // A narrow one spans more OpenAI tiles than Anthropic counts.
        assert_eq!(image(768, 2048), 1_445);
        // Small images: one tile (255) or a few pixels' worth.
        assert_eq!(image(512, 512), 350);
        assert_eq!(image(1, 1), 255);
        // Huge ones are resized first: bounded.
        assert!(
            image(100_000, 100_000) <= 1_600,
            "{}",
            image(100_000, 100_000)
        );
        assert!(image(100_000, 10) <= 1_600, "{}", image(100_000, 10));
        assert_eq!(estimate(&held(Kind::Image, 9, pixels(512, 512))), 350);
        // Size unknown: a bound above either rule's most.
        assert_eq!(estimate(&held(Kind::Image, 9, Shape::default())), 3_000);
        assert_eq!(estimate(&url(Kind::Image)), 3_000);
        assert!(IMAGE_UNKNOWN >= image(768, 2048).max(image(1568, 733)));
    }

    #[test]
    fn audio_costs_its_seconds_at_a_low_bitrate_and_text_its_bytes() {
        // 1 MB at 16 kbit/s: 500 s, 32 tokens each.
        assert_eq!(
            estimate(&held(Kind::Audio, 1_000_000, Shape::default())),
            16_000
        );
        assert_eq!(estimate(&held(Kind::Audio, 1, Shape::default())), 32);
        assert_eq!(estimate(&url(Kind::Audio)), 3_600 * 32);
        let text = attachment(
            Kind::Text,
            0,
            Shape::default(),
            Body::Text(Arc::from("a".repeat(3_001))),
        );
        assert_eq!(estimate(&text), 1_001);
        assert_eq!(estimate(&url(Kind::Text)), 100_000);
    }
}
