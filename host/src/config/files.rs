//! Reading the files a configuration names (itself, plugin components) as
//! what they must be: regular files of bounded size. A directory, a FIFO
//! or a device (`/dev/zero`) given by mistake fails at once with a message
//! that says so, instead of blocking forever or reading until memory runs out.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

/// The largest configuration file chorus reads.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// The largest plugin component chorus reads (a Python plugin is ~40 MB).
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// Reads `path`, which must be a regular file of at most `limit` bytes.
/// The error says what is wrong (without the path: callers add it).
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    // stat first: it does not block, where opening a FIFO would.
    let metadata = std::fs::metadata(path).map_err(|e| e.to_string())?;
    check_kind(&metadata)?;
    let file = open_nonblocking(path).map_err(|e| e.to_string())?;
    // The path may have been swapped since: check what was opened.
    let metadata = file.metadata().map_err(|e| e.to_string())?;
    check_kind(&metadata)?;
    if metadata.len() > limit {
        return Err(too_large(metadata.len(), limit));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    // A file that grows while we read is still held to the limit.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit));
    }
    Ok(bytes)
}

fn check_kind(metadata: &std::fs::Metadata) -> Result<(), String> {
    let kind = metadata.file_type();
    if kind.is_dir() {
        return Err("it is a directory, not a file".to_owned());
    }
    if !kind.is_file() {
        return Err(
            "it is not a regular file (a FIFO, socket or device); give the path of a file"
                .to_owned(),
        );
    }
    Ok(())
}

fn too_large(size: u64, limit: u64) -> String {
    format!("it is {size} bytes, over the limit of {limit} bytes")
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello").unwrap();
        assert_eq!(read_regular_file(&path, 5).unwrap(), b"hello");
        assert_eq!(
            read_regular_file(&path, 4).unwrap_err(),
            "it is 5 bytes, over the limit of 4 bytes"
        );
    }

    #[test]
    fn directories_devices_and_fifos_fail_at_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_regular_file(dir.path(), 10)
                .unwrap_err()
                .contains("directory")
        );
        assert!(
            read_regular_file(Path::new("/dev/zero"), 10)
                .unwrap_err()
                .contains("not a regular file")
        );
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        assert!(
            read_regular_file(&fifo, 10)
                .unwrap_err()
                .contains("not a regular file")
        );
    }
}
