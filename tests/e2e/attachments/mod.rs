//! Attachments: images, PDFs (PDF bombs and lying page counts too),
//! audio and text files, by bytes and by URL, and kept in the history.

pub(crate) mod attachment_history;
pub(crate) mod pdf_bombs;
pub(crate) mod pdf_count;
pub(crate) mod pdf_text;
pub(crate) mod pdf_turns;
pub(crate) mod sent;
pub(crate) mod single_attachments;
pub(crate) mod url_attachments;
