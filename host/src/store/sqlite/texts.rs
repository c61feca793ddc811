//! Long texts — a call's request or reply past [`LONG`] bytes — kept in
//! their own table and written in place, page by page, through SQLite's
//! incremental blob I/O. Bound as an ordinary parameter, an 8 MB answer
//! would be copied twice inside SQLite (the bound value and the row built
//! from it) on the writer thread while the run goes on; written this way it
//! costs a page at a time. Rows of `calls` point at their long texts
//! (`request_text`, `reply_text`), so updating a call never rewrites them,
//! and triggers remove a text with the call that points at it.

use std::io::Write as _;

use rusqlite::blob::ZeroBlob;
use rusqlite::types::ValueRef;
use rusqlite::{MAIN_DB, Row, Transaction};

/// Texts this long or longer go to the `texts` table.
pub const LONG: usize = 64 * 1024;

/// Version 2 of the schema: the `texts` table and the columns and
/// triggers that tie it to `calls`.
pub const MIGRATION: &str = r#"
CREATE TABLE texts (
    id    INTEGER PRIMARY KEY,
    body  BLOB NOT NULL                       -- UTF-8
);
ALTER TABLE calls ADD COLUMN request_text INTEGER;  -- texts.id, when the request is long
ALTER TABLE calls ADD COLUMN reply_text   INTEGER;  -- texts.id, when the reply is long
CREATE TRIGGER calls_texts_deleted AFTER DELETE ON calls BEGIN
    DELETE FROM texts WHERE id IN (old.request_text, old.reply_text);
END;
CREATE TRIGGER calls_reply_text_replaced AFTER UPDATE OF reply_text ON calls
    WHEN old.reply_text IS NOT new.reply_text BEGIN
    DELETE FROM texts WHERE id = old.reply_text;
END;
"#;

/// Where a text goes: inline in its column, or (long) in `texts`.
pub enum Placed<'a> {
    Inline(Option<&'a str>),
    Long(i64),
}

impl Placed<'_> {
    /// The value for the text's own column.
    pub fn inline(&self) -> Option<&str> {
        match self {
            Placed::Inline(text) => *text,
            Placed::Long(_) => None,
        }
    }

    /// The value for its `*_text` column.
    pub fn long(&self) -> Option<i64> {
        match self {
            Placed::Inline(_) => None,
            Placed::Long(id) => Some(*id),
        }
    }
}

/// Keeps `text` inline when short; otherwise writes it to `texts` and
/// returns its id. A long text whose call row then goes unwritten is
/// removed with [`discard`].
pub fn place<'a>(tx: &Transaction<'_>, text: Option<&'a str>) -> rusqlite::Result<Placed<'a>> {
    let Some(long) = text.filter(|t| t.len() >= LONG) else {
        return Ok(Placed::Inline(text));
    };
    tx.prepare_cached("INSERT INTO texts (body) VALUES (?1)")?
        .execute([ZeroBlob(long.len() as u64)])?;
    let id = tx.last_insert_rowid();
    let mut blob = tx.blob_open(MAIN_DB, c"texts", c"body", id, false)?;
    blob.write_all(long.as_bytes())
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    blob.close()?;
    Ok(Placed::Long(id))
}

/// Removes a long text that no call points at.
pub fn discard(tx: &Transaction<'_>, placed: &Placed<'_>) -> rusqlite::Result<()> {
    if let Placed::Long(id) = placed {
        tx.prepare_cached("DELETE FROM texts WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(())
}

/// The SQL for a call's text: its column, else its long text.
pub fn select(column: &str) -> String {
    format!("COALESCE({column}, (SELECT body FROM texts WHERE texts.id = calls.{column}_text))")
}

/// The SQL for the bytes of a call's text, wherever it is kept.
pub fn bytes(column: &str) -> String {
    format!(
        "COALESCE(octet_length({column}), \
         (SELECT octet_length(body) FROM texts WHERE texts.id = calls.{column}_text), 0)"
    )
}

/// Reads a text selected with [`select`]: inline text, or a long text's
/// UTF-8 bytes.
pub fn read(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<String>> {
    match row.get_ref(index)? {
        ValueRef::Null => Ok(None),
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            String::from_utf8(bytes.to_vec()).map(Some).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    index,
                    rusqlite::types::Type::Blob,
                    e.into(),
                )
            })
        }
        other => Err(rusqlite::Error::InvalidColumnType(
            index,
            "a text".to_owned(),
            other.data_type(),
        )),
    }
}
