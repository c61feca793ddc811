//! Where the run store lives when the config does not say: the platform's
//! data directory, as the XDG convention (and macOS, Windows) define it.

use std::path::{Path, PathBuf};

use super::StoreError;
use crate::config::Loaded;

const FILE: &str = "runs.sqlite3";

/// The store's file for `loaded`: `[store] path` (relative to the config
/// file), else `<data dir>/chorus/runs.sqlite3`.
pub fn path(loaded: &Loaded) -> Result<PathBuf, StoreError> {
    match &loaded.config.store.path {
        Some(path) => Ok(loaded.base_dir.join(path)),
        None => data_dir()
            .map(|dir| dir.join("chorus").join(FILE))
            .ok_or(StoreError::NoPath),
    }
}

/// `$XDG_DATA_HOME` when set to an absolute path (the XDG spec says to
/// ignore a relative one), else the platform's per-user data directory.
fn data_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(dir) = var("XDG_DATA_HOME") {
        return Some(dir);
    }
    if cfg!(windows) {
        return var("LOCALAPPDATA");
    }
    let home = var("HOME")?;
    Some(if cfg!(target_os = "macos") {
        home.join("Library").join("Application Support")
    } else {
        home.join(".local").join("share")
    })
}

/// Creates the store's directory, private to the user, if it is missing.
pub fn create_dir(path: &Path) -> std::io::Result<()> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the store's file, readable by the user only (prompts and answers
/// are private), if it is missing. SQLite gives its -wal and -shm files the
/// same permissions.
pub fn create_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}
