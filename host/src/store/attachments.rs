//! Attachment bytes in the store: kept once per content (SHA-256) however
//! many runs refer to them, written by the backends' writers when a run
//! starts (never on the run's own path), counted toward `[store]
//! max_bytes`, and freed by retention once no kept run refers to them.
//! This module says what is kept of a run's attachments and reads them
//! back; each backend has the SQL (`sqlite/attachments.rs`,
//! `postgres/attachments.rs`).

use std::sync::Arc;

use base64::Engine;
use serde::Serialize;

use super::{Store, StoreError};
use crate::attach::{Attachment, Attachments, Body, Info, Kind};
use crate::record::StoredRun;
use crate::text::show_bytes;

/// What the store holds of one of a run's attachments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "why")]
pub enum Held {
    /// The bytes are kept.
    Kept,
    /// They were never kept; why (too large for `[store] max_bytes`, runs
    /// kept in memory, a run recorded before chorus kept bytes).
    NotKept(String),
    /// They were kept, and retention has removed them since.
    Removed,
    /// Sent by URL: the provider fetched it; there are no bytes to keep.
    ByUrl,
}

impl Held {
    pub fn is_kept(&self) -> bool {
        *self == Self::Kept
    }

    /// `kept`, `not kept: …` — for `chorus runs show` and notes.
    pub fn describe(&self) -> String {
        match self {
            Self::Kept => "kept".into(),
            Self::NotKept(why) => format!("not kept: {why}"),
            Self::Removed => {
                "not kept: removed by retention ([store] max_runs, max_age or max_bytes)".into()
            }
            Self::ByUrl => "by URL (no bytes to keep)".into(),
        }
    }
}

/// One of a run's attachments as the store has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub info: Info,
    pub held: Held,
    /// The bytes, when kept and asked for.
    pub bytes: Option<Vec<u8>>,
}

impl Stored {
    /// The attachment as a run sends it again, when it can be: its bytes
    /// (or its URL) with the metadata it was recorded with.
    pub fn attachment(&self) -> Option<Attachment> {
        let body = match (&self.info.url, &self.bytes) {
            (Some(url), _) => Body::Url(Arc::from(url.as_str())),
            (None, Some(bytes)) if self.info.kind == Kind::Text => {
                Body::Text(Arc::from(String::from_utf8_lossy(bytes).as_ref()))
            }
            (None, Some(bytes)) => Body::Base64(Arc::from(
                base64::engine::general_purpose::STANDARD.encode(bytes),
            )),
            (None, None) => return None,
        };
        Some(Attachment {
            id: self.info.id,
            name: self.info.name.clone(),
            kind: self.info.kind,
            mime: self.info.mime.clone(),
            bytes: self.info.bytes,
            sha256: self.info.sha256.clone(),
            shape: self.info.shape,
            body,
        })
    }
}

/// What a backend's row says of one attachment of a run.
pub struct Row {
    pub id: u32,
    /// Why its bytes were not kept when the run was written.
    pub not_kept: Option<String>,
    /// Whether the bytes are in the store now.
    pub present: bool,
    pub bytes: Option<Vec<u8>>,
}

/// A run's attachments (`infos`, as its record has them) with what the
/// store holds of each (`rows`, by attachment id).
pub fn join(infos: &[Info], mut rows: Vec<Row>) -> Vec<Stored> {
    infos
        .iter()
        .map(|info| {
            let row = rows
                .iter()
                .position(|r| r.id == info.id)
                .map(|at| rows.swap_remove(at));
            let (held, bytes) = match (info.url.is_some(), row) {
                (true, _) => (Held::ByUrl, None),
                (false, None) => (
                    Held::NotKept(
                        "the run was recorded before chorus kept attachment bytes".into(),
                    ),
                    None,
                ),
                (false, Some(row)) if row.present => (Held::Kept, row.bytes),
                (
                    false,
                    Some(Row {
                        not_kept: Some(why),
                        ..
                    }),
                ) => (Held::NotKept(why), None),
                (false, Some(_)) => (Held::Removed, None),
            };
            Stored {
                info: info.clone(),
                held,
                bytes,
            }
        })
        .collect()
}

/// Of a run's attachments, one to write: the link from the run to its
/// content, and the bytes unless they cannot be kept.
pub struct ToKeep<'a> {
    pub attachment: &'a Attachment,
    /// Why the bytes are not kept; `None`: keep them.
    pub not_kept: Option<String>,
}

impl ToKeep<'_> {
    /// The bytes to keep (decoded here, on the writer's thread).
    pub fn bytes(&self) -> Option<Vec<u8>> {
        match &self.attachment.body {
            Body::Base64(data) => base64::engine::general_purpose::STANDARD
                .decode(data.as_bytes())
                .ok(),
            Body::Text(text) => Some(text.as_bytes().to_vec()),
            Body::Url(_) => None,
        }
    }
}

/// What to write of `files` in a store bounded by `max_bytes`: each
/// attachment with bytes, in order, and its bytes while the run's
/// attachments together fit in what the store may keep at all — none when
/// they were `let_go` before they could be written (and why).
pub fn to_keep<'a>(
    files: &'a Attachments,
    max_bytes: u64,
    let_go: Option<&str>,
) -> Vec<ToKeep<'a>> {
    let mut total = 0u64;
    let mut seen: Vec<&str> = Vec::new();
    files
        .iter()
        .filter(|a| !matches!(a.body, Body::Url(_)))
        .map(|attachment| {
            let size = attachment.bytes as u64;
            if let Some(why) = let_go {
                return ToKeep {
                    attachment,
                    not_kept: Some(why.to_owned()),
                };
            }
            let new = !seen.contains(&attachment.sha256.as_str());
            let fits = !new || total.saturating_add(size) <= max_bytes;
            if new && fits {
                total += size;
                seen.push(&attachment.sha256);
            }
            ToKeep {
                attachment,
                not_kept: (!fits).then(|| {
                    format!(
                        "{} is more than the run store may keep ([store] max_bytes = {})",
                        show_bytes(size),
                        show_bytes(max_bytes)
                    )
                }),
            }
        })
        .collect()
}

/// Why a store without a database or file keeps no bytes.
pub const IN_MEMORY: &str = "runs kept in memory keep no attachment bytes";

impl Store {
    /// `run`'s attachments and what the store holds of each, their bytes
    /// too when `with_bytes`. Blocking.
    pub fn attachments(
        &self,
        run: &StoredRun,
        with_bytes: bool,
    ) -> Result<Vec<Stored>, StoreError> {
        if run.attachments.is_empty() {
            return Ok(Vec::new());
        }
        let Some(rows) = self.backend.attachment_rows(&run.run_id, with_bytes)? else {
            let why = IN_MEMORY.to_owned();
            return Ok(join(&run.attachments, Vec::new())
                .into_iter()
                .map(|mut a| {
                    if !matches!(a.held, Held::ByUrl) {
                        a.held = Held::NotKept(why.clone());
                    }
                    a
                })
                .collect());
        };
        Ok(join(&run.attachments, rows))
    }

    /// How many attachments' bytes are kept, and their size.
    #[cfg(test)]
    pub(super) fn attachment_bytes_kept(&self) -> (u64, u64) {
        self.backend.attachment_bytes_kept()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attachment(id: u32, text: &str) -> Attachment {
        Attachment {
            id,
            name: format!("f{id}.txt"),
            kind: Kind::Text,
            mime: "text/plain".into(),
            bytes: text.len(),
            sha256: crate::text::hex(&<sha2::Sha256 as sha2::Digest>::digest(text)),
            shape: Default::default(),
            body: Body::Text(Arc::from(text)),
        }
    }

    #[test]
    fn the_bytes_kept_stop_where_the_store_would_overflow() {
        let files = Attachments::new(vec![
            attachment(1, "aaaa"),
            attachment(2, "aaaa"),
            attachment(3, "bbbbbbb"),
            attachment(4, "cc"),
        ]);
        let kept: Vec<bool> = to_keep(&files, 8, None)
            .iter()
            .map(|k| k.not_kept.is_none())
            .collect();
        // The same content twice counts once; 4 + 7 is over 8; 4 + 2 is not.
        assert_eq!(kept, [true, true, false, true]);
        let why = to_keep(&files, 8, None)[2].not_kept.clone().unwrap();
        assert!(why.contains("[store] max_bytes = 8 bytes"), "{why}");
        // Bytes let go before they were written: none kept, each says why.
        let let_go = to_keep(&files, 8, Some("the backlog was full"));
        assert!(
            let_go
                .iter()
                .all(|k| k.not_kept.as_deref() == Some("the backlog was full"))
        );
    }

    #[test]
    fn each_attachment_says_what_is_held_of_it() {
        let info = |id: u32, url: Option<&str>| Info {
            id,
            name: "x".into(),
            kind: Kind::Image,
            mime: "image/png".into(),
            bytes: 3,
            sha256: "ab".into(),
            shape: Default::default(),
            url: url.map(str::to_owned),
        };
        let infos = [
            info(1, None),
            info(2, None),
            info(3, None),
            info(4, Some("https://x.example/a.png")),
            info(5, None),
        ];
        let row = |id, not_kept: Option<&str>, present| Row {
            id,
            not_kept: not_kept.map(str::to_owned),
            present,
            bytes: present.then(|| vec![1, 2, 3]),
        };
        let got = join(
            &infos,
            vec![
                row(2, Some("too big"), false),
                row(1, None, true),
                row(3, None, false),
            ],
        );
        let held: Vec<&Held> = got.iter().map(|s| &s.held).collect();
        assert_eq!(held[0], &Held::Kept);
        assert_eq!(held[1], &Held::NotKept("too big".into()));
        assert_eq!(held[2], &Held::Removed);
        assert_eq!(held[3], &Held::ByUrl);
        assert!(matches!(held[4], Held::NotKept(_)));
        assert_eq!(
            got[0].attachment().unwrap().url(),
            "data:image/png;base64,AQID"
        );
        assert!(got[2].attachment().is_none());
        assert_eq!(
            got[3].attachment().unwrap().url(),
            "https://x.example/a.png"
        );
    }
}
