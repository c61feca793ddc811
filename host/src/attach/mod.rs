//! Attachments: the images, PDFs, audio and text files a question comes
//! with. This module owns what an attachment is once accepted — its kind
//! (from its bytes, never its name), its size, its hash, and the one
//! encoding every request shares — and how one gets in: `source` reads
//! what a tool call or the CLI names, `access` decides which paths may be
//! read, `sniff` tells the type from the bytes, `load` holds all of it to
//! the limits before anything is sent or paid; `pdf` reads a PDF's text
//! layer for models that cannot take the file; `shape` measures an image's
//! pixels and a PDF's pages when a run starts; `tokens` what one may cost
//! a model as input, for every worst case. Where each attachment goes
//! in a run (which model sees which, and what a text-only model gets
//! instead) is the pipeline's business; the wire shape is `llm::wire`'s.

mod access;
mod load;
pub mod pdf;
pub mod shape;
pub mod sniff;
pub mod source;
pub mod tokens;

use std::sync::Arc;

use base64::Engine;
use serde::{Deserialize, Serialize};

pub use access::Access;
pub use load::{Limits, accept, load};
pub use shape::Shape;
pub use source::{Source, take};

/// What an attachment is, as far as a model's input goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Image,
    Pdf,
    Audio,
    /// Plain text (code, markdown, CSV…): inlined in the message with its
    /// name, so every model reads it.
    Text,
}

impl Kind {
    /// The input modality a model must list to take this kind as it is
    /// (OpenRouter's `architecture.input_modalities`, or `[models] input`).
    pub fn modality(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Pdf => "file",
            Self::Audio => "audio",
            Self::Text => "text",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Pdf => "pdf",
            Self::Audio => "audio",
            Self::Text => "text",
        }
    }
}

/// The bytes of an attachment, as every request carries them.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Base64 of the bytes, encoded once for every call of the run.
    Base64(Arc<str>),
    /// An https URL the provider fetches (chorus fetches it only for a
    /// provider that cannot: `llm::fetch`).
    Url(Arc<str>),
    /// A text file's contents.
    Text(Arc<str>),
}

/// One accepted attachment.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// Its number in the run, from 1, in the order given.
    pub id: u32,
    /// The file's name, or `attachment-N` when it came without one.
    pub name: String,
    pub kind: Kind,
    /// The media type found in the bytes (or given with a URL).
    pub mime: String,
    /// Size in bytes (0 for a URL: chorus never fetched it).
    pub bytes: usize,
    /// Hex SHA-256 of the bytes (of the URL, for a URL).
    pub sha256: String,
    /// Its pages or pixels, once measured (`shape::measured`).
    pub shape: Shape,
    pub body: Body,
}

impl Attachment {
    /// The `data:` URL of the bytes, or the URL itself.
    pub fn url(&self) -> String {
        match &self.body {
            Body::Base64(data) => format!("data:{};base64,{data}", self.mime),
            Body::Url(url) => url.to_string(),
            Body::Text(text) => format!(
                "data:{};base64,{}",
                self.mime,
                base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
            ),
        }
    }

    /// The audio format name OpenAI's `input_audio` takes.
    pub fn audio_format(&self) -> &str {
        sniff::audio_format(&self.mime)
    }

    /// How the attachment is named to the models and in notes:
    /// `#1 diagram.png (image/png, 41 KiB)`.
    pub fn label(&self) -> String {
        if matches!(self.body, Body::Url(_)) {
            return format!("#{} {} ({}, by URL)", self.id, self.name, self.mime);
        }
        format!(
            "#{} {} ({}, {})",
            self.id,
            self.name,
            self.mime,
            crate::text::show_bytes(self.bytes as u64)
        )
    }

    /// What the run's record keeps of it: everything but the bytes.
    pub fn info(&self) -> Info {
        Info {
            id: self.id,
            name: self.name.clone(),
            kind: self.kind,
            mime: self.mime.clone(),
            bytes: self.bytes,
            sha256: self.sha256.clone(),
            shape: self.shape,
            url: match &self.body {
                Body::Url(url) => Some(url.to_string()),
                _ => None,
            },
        }
    }
}

/// An attachment as recorded: metadata, not bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Info {
    pub id: u32,
    pub name: String,
    pub kind: Kind,
    pub mime: String,
    pub bytes: usize,
    pub sha256: String,
    /// Pages or pixels, when chorus measured them from the bytes.
    #[serde(flatten)]
    pub shape: Shape,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A run's attachments: shared by every request of the run, never copied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attachments(Arc<[Attachment]>);

impl Attachments {
    pub fn new(list: Vec<Attachment>) -> Self {
        Self(list.into())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Attachment> {
        self.0.iter()
    }

    /// Those a model must see as they are (not text).
    pub fn binary(&self) -> impl Iterator<Item = &Attachment> {
        self.0.iter().filter(|a| a.kind != Kind::Text)
    }

    /// Those of `self` for which `keep` holds, sharing nothing else.
    pub fn only(&self, keep: impl Fn(&Attachment) -> bool) -> Self {
        Self(self.0.iter().filter(|a| keep(a)).cloned().collect())
    }

    /// The same attachments, all said, none of their bytes held (a URL
    /// stays: it holds none).
    pub fn without_bytes(&self) -> Self {
        Self(
            self.0
                .iter()
                .map(|a| Attachment {
                    body: match &a.body {
                        Body::Url(url) => Body::Url(url.clone()),
                        _ => Body::Base64(Arc::from("")),
                    },
                    ..a.clone()
                })
                .collect(),
        )
    }

    pub fn infos(&self) -> Vec<Info> {
        self.0.iter().map(Attachment::info).collect()
    }
}
