//! Where the run store lives when the config does not say: the platform's
//! data directory, as the XDG convention (and macOS, Windows) define it.

use std::path::{Path, PathBuf};

use crate::config::Loaded;
use crate::store::StoreError;

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
    if let Some(problem) = blocked(path) {
        return Err(std::io::Error::other(problem));
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// What stands in the way of a file at `path`: a directory on its way that
/// is a file, or the path itself a directory.
pub fn blocked(path: &Path) -> Option<String> {
    if path.is_dir() {
        return Some(format!(
            "{} is a directory: point [store] path at a file in it",
            path.display()
        ));
    }
    let file = path
        .ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.symlink_metadata().is_ok())
        .filter(|a| !a.is_dir())?;
    Some(format!(
        "{} is a file, not a directory: move it away, or set [store] path to a file elsewhere",
        file.display()
    ))
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
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            make_private(path);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// A store file made before chorus kept it private (or copied in with
/// looser permissions) is made readable by its user only, and that is
/// said once: the next open finds it private.
#[cfg(unix)]
fn make_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let suffixes = ["", "-wal", "-shm"];
    for suffix in suffixes {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = Path::new(&name);
        let Ok(metadata) = std::fs::metadata(file) else {
            continue;
        };
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 == 0 {
            continue;
        }
        let private = std::fs::Permissions::from_mode(mode & 0o700);
        match std::fs::set_permissions(file, private) {
            Ok(()) => tracing::warn!(
                "{} could be read by other users (mode {mode:o}): now {:o}, its user's only",
                file.display(),
                mode & 0o700
            ),
            Err(e) => tracing::warn!(
                "{} can be read by other users (mode {mode:o}) and could not be made private ({e}): \
                 chmod 600 it",
                file.display()
            ),
        }
    }
}

#[cfg(not(unix))]
fn make_private(_path: &Path) {}
