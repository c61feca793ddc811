//! The local copy of what was pulled from registries, under the plugin
//! cache (`<cache dir>/oci/`): manifests and components by digest
//! (`blobs/sha256/HEX`), checked against their digest every time they are
//! read, and the digest each tag was pinned to (`pins/`), kept until the
//! reference in the configuration changes (or `chorus plugin pull`
//! resolves it again). Directories are created private to the user.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Digest, OciError, Reference};

#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store inside the plugin cache directory `cache_dir`.
    pub fn in_cache(cache_dir: &Path) -> Self {
        Self {
            dir: cache_dir.join("oci"),
        }
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join("blobs").join("sha256").join(digest.hex())
    }

    fn pin_path(&self, reference: &Reference) -> PathBuf {
        let key = Digest::of(reference.to_string().as_bytes());
        self.dir.join("pins").join(key.hex())
    }

    /// The blob `digest`, if it is here: `Ok(None)` when missing, an error
    /// naming both digests when the bytes here are not what the digest
    /// says (a damaged or altered cache; the entry is removed, so a pull
    /// can replace it).
    pub fn read(&self, digest: &Digest, limit: u64) -> Result<Option<Vec<u8>>, OciError> {
        let path = self.blob_path(digest);
        if !path.exists() {
            return Ok(None);
        }
        let bytes = crate::config::read_regular_file(&path, limit)
            .map_err(|e| OciError::Cache(format!("cannot read {}: {e}", path.display())))?;
        let found = Digest::of(&bytes);
        if &found != digest {
            let _ = std::fs::remove_file(&path);
            return Err(OciError::WrongDigest {
                what: format!("the cached copy {}", path.display()),
                expected: digest.clone(),
                found,
            });
        }
        Ok(Some(bytes))
    }

    /// Stores `bytes` (whose digest the caller checked) atomically.
    pub fn write(&self, digest: &Digest, bytes: &[u8]) -> Result<(), OciError> {
        write_atomically(&self.blob_path(digest), bytes)
    }

    /// The digest `reference`'s tag was pinned to, if it was.
    pub fn pin(&self, reference: &Reference) -> Option<Digest> {
        let text = std::fs::read_to_string(self.pin_path(reference)).ok()?;
        let (digest, named) = text.trim_end().split_once(' ')?;
        // The file names the reference too: a hash collision cannot pin
        // another plugin's reference.
        (named == reference.to_string())
            .then(|| Digest::parse(digest).ok())
            .flatten()
    }

    /// Pins `reference`'s tag to `digest`.
    pub fn set_pin(&self, reference: &Reference, digest: &Digest) -> Result<(), OciError> {
        let text = format!("{digest} {reference}\n");
        write_atomically(&self.pin_path(reference), text.as_bytes())
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let failed =
        |e: std::io::Error| OciError::Cache(format!("cannot write {}: {e}", path.display()));
    let dir = path.parent().expect("store paths have a parent");
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(failed)?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
    file.write_all(bytes).map_err(failed)?;
    file.as_file().sync_all().map_err(failed)?;
    file.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_checked_when_read_and_a_damaged_one_is_refused_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::in_cache(dir.path());
        let digest = Digest::of(b"component");
        assert!(store.read(&digest, 100).unwrap().is_none());
        store.write(&digest, b"component").unwrap();
        assert_eq!(store.read(&digest, 100).unwrap().unwrap(), b"component");
        std::fs::write(store.blob_path(&digest), b"altered").unwrap();
        let error = store.read(&digest, 100).unwrap_err().to_string();
        assert!(error.contains(&digest.to_string()), "{error}");
        assert!(
            error.contains(&Digest::of(b"altered").to_string()),
            "{error}"
        );
        assert!(store.read(&digest, 100).unwrap().is_none(), "removed");
    }

    #[test]
    fn a_pin_is_kept_per_reference() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::in_cache(dir.path());
        let a = Reference::parse("oci://127.0.0.1:5000/p:1").unwrap();
        let b = Reference::parse("oci://127.0.0.1:5000/p:2").unwrap();
        let digest = Digest::of(b"m");
        store.set_pin(&a, &digest).unwrap();
        assert_eq!(store.pin(&a), Some(digest));
        assert_eq!(store.pin(&b), None);
    }
}
