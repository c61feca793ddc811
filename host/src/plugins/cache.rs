//! The on-disk cache of compiled plugins. Compiling is the one expensive
//! step of loading (tenths of a second for a Rust guest, many seconds for a
//! Python or JavaScript one); a cached load reads, checks and maps a file.
//!
//! A compiled plugin is native code, so nothing is loaded from the cache
//! unchecked: each entry `KEY.cwasm` has a sidecar `KEY.sha256` with the
//! digest of its bytes, written after the entry (both atomically). An entry
//! whose bytes do not match — truncated or corrupted — is recompiled and
//! replaced, with a warning. The digest guards against accidents, not
//! attacks: whoever can write the entry can write its digest too, so the
//! cache directory must be writable by its owner alone (it is created so). Keys are the component's SHA-256
//! and the engine's compatibility hash (wasmtime version, target, settings);
//! entries for other engines, and entries unused for `MAX_AGE`, are pruned.
//!
//! The built-in plugins do not need the cache where the build precompiled
//! them (host/build.rs): [`from_precompiled`] loads that code, and only a
//! machine that refuses it (a CPU without the baseline features) compiles
//! and caches them.

use crate::notice::notice;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::text::hex;

/// Entries not used for this long are removed.
const MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
/// Components at least this large take seconds to compile: say so.
const ANNOUNCE_BYTES: usize = 1 << 20;

/// How a component was obtained, for `chorus check` and the logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Compiled,
    Cached,
    /// Built in, precompiled by the build.
    Precompiled,
}

#[derive(Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
}

impl CompileCache {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// The platform's cache directory for chorus: `$XDG_CACHE_HOME/chorus`
    /// or `~/.cache/chorus` on Linux, `~/Library/Caches/chorus` on macOS,
    /// `%LOCALAPPDATA%\chorus` on Windows.
    pub fn default_dir() -> Option<PathBuf> {
        dirs::cache_dir().map(|d| d.join("chorus"))
    }

    /// The compiled component for `wasm` (whose SHA-256 is `digest`: the
    /// caller has it already): from the cache if a verified entry is there,
    /// else compiled (announced on stderr when it takes a while) and stored.
    #[cfg(test)]
    pub fn load(
        &self,
        engine: &Engine,
        name: &str,
        wasm: &[u8],
        digest: &[u8; 32],
    ) -> wasmtime::Result<(Component, Source)> {
        match self.cached(engine, digest) {
            Some(component) => Ok((component, Source::Cached)),
            None => self.compile(engine, name, wasm, digest),
        }
    }

    /// The verified cache entry for the component whose SHA-256 is
    /// `digest`, if there is one: milliseconds, where compiling takes
    /// tenths of a second to many seconds.
    pub fn cached(&self, engine: &Engine, digest: &[u8; 32]) -> Option<Component> {
        let dir = self.dir.as_ref()?;
        Entry::new(dir, &key(engine, digest)).read(engine)
    }

    /// Compiles `wasm` (announced on stderr when it takes a while) and
    /// stores it in the cache, if there is one.
    pub fn compile(
        &self,
        engine: &Engine,
        name: &str,
        wasm: &[u8],
        digest: &[u8; 32],
    ) -> wasmtime::Result<(Component, Source)> {
        let Some(dir) = &self.dir else {
            return Ok((
                compile(engine, name, wasm, "caching is off")?,
                Source::Compiled,
            ));
        };
        let entry = Entry::new(dir, &key(engine, digest));
        let component = compile(engine, name, wasm, "first load; cached afterwards")?;
        if let Err(e) = entry.write(&component) {
            // A read-only or sandboxed home: the plugin still runs, compiled
            // again on the next start.
            tracing::info!(
                "cannot write the plugin cache in {} ({e:#}); `{name}` is kept in memory only",
                dir.display()
            );
            return Ok((component, Source::Compiled));
        }
        // Used from the entry just written, as every later start uses it: the
        // code and the memory images are then mapped from the file (shared
        // page cache) instead of held in anonymous memory, and no memfd is
        // made for the images — whose sealing the kernel can refuse while
        // the freshly written pages are still referenced.
        let component = entry.read(engine).unwrap_or(component);
        Ok((component, Source::Compiled))
    }

    /// Removes entries for other engines, entries unused for `MAX_AGE`, and
    /// leftovers of interrupted writes. Errors are logged, never fatal.
    pub fn prune(&self, engine: &Engine) {
        let Some(dir) = &self.dir else { return };
        let Ok(files) = std::fs::read_dir(dir) else {
            return;
        };
        let engine_suffix = engine_key(engine);
        let now = SystemTime::now();
        for file in files.flatten() {
            let path = file.path();
            let name = file.file_name().to_string_lossy().into_owned();
            let Some((stem, ext)) = name.rsplit_once('.') else {
                continue;
            };
            let age = file
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            let stale = match ext {
                "cwasm" | "sha256" => !stem.ends_with(&engine_suffix) || age > MAX_AGE,
                // tempfile's leftovers from an interrupted write
                _ if name.starts_with(".tmp") => age > Duration::from_secs(3600),
                _ => false,
            };
            if stale {
                match std::fs::remove_file(&path) {
                    Ok(()) => tracing::debug!("pruned {} from the plugin cache", path.display()),
                    Err(e) => tracing::debug!("cannot prune {}: {e}", path.display()),
                }
            }
        }
    }
}

/// The built-in plugin `name` from the code the build precompiled for it,
/// or `None` (logged) where this engine refuses that code — another CPU
/// lacking a baseline feature, or settings that drifted from the build's.
pub fn from_precompiled(engine: &Engine, name: &str, code: &'static [u8]) -> Option<Component> {
    // SAFETY: the code was made by `Engine::precompile_component` of this
    // same wasmtime, by the build of this binary, and is embedded in it: it
    // is as trustworthy as the binary's own code. Deserializing checks that
    // it suits this engine's settings and this CPU, and fails otherwise.
    match unsafe { Component::deserialize(engine, code) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::info!(
                "the precompiled built-in plugin `{name}` does not suit this machine ({e:#}); compiling it"
            );
            None
        }
    }
}

/// Builds `component`'s copy-on-write memory images now, at load, rather
/// than at its first instantiation in a run. Where an image is not mapped
/// from a file (a plugin compiled with caching off, a precompiled built-in),
/// Linux builds it in a sealed memfd, and sealing can fail for a moment
/// (EBUSY while the kernel still holds references to the pages just
/// written): so it is retried here, briefly. If it still fails the plugin
/// loads anyway, and its first instantiation tries again.
pub fn prepare_images(component: &Component, name: &str) {
    const ATTEMPTS: u32 = 4;
    for attempt in 1..=ATTEMPTS {
        match component.initialize_copy_on_write_image() {
            Ok(()) => return,
            Err(e) if attempt < ATTEMPTS => {
                tracing::debug!(
                    "preparing the memory image of `{name}` (attempt {attempt}): {e:#}"
                );
                std::thread::sleep(Duration::from_millis(5 << attempt));
            }
            Err(e) => tracing::warn!(
                "cannot prepare the memory image of plugin `{name}` ({e:#}); its first run will try again"
            ),
        }
    }
}

fn compile(engine: &Engine, name: &str, wasm: &[u8], why: &str) -> wasmtime::Result<Component> {
    let announce = wasm.len() >= ANNOUNCE_BYTES;
    if announce {
        // Not through tracing: at the default log level this must still show.
        notice!(
            "chorus: compiling plugin `{name}` ({:.1} MB; {why})…",
            wasm.len() as f64 / 1e6
        );
    }
    let started = std::time::Instant::now();
    let component = Component::new(engine, wasm)?;
    if announce {
        notice!(
            "chorus: compiled plugin `{name}` in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(component)
}

fn engine_key(engine: &Engine) -> String {
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hash);
    format!("-{:016x}", hash.finish())
}

fn key(engine: &Engine, digest: &[u8; 32]) -> String {
    format!("{}{}", hex(&digest[..16]), engine_key(engine))
}

/// One cache entry: the compiled bytes and their digest.
struct Entry {
    dir: PathBuf,
    code: PathBuf,
    digest: PathBuf,
}

impl Entry {
    fn new(dir: &Path, key: &str) -> Self {
        Self {
            dir: dir.to_owned(),
            code: dir.join(format!("{key}.cwasm")),
            digest: dir.join(format!("{key}.sha256")),
        }
    }

    /// The entry's component, if it is there and its bytes are the ones
    /// that were written.
    fn read(&self, engine: &Engine) -> Option<Component> {
        let expected = std::fs::read_to_string(&self.digest).unwrap_or_default();
        if file_digest(&self.code).ok()? != expected.trim() {
            tracing::warn!(
                "the cached compiled plugin {} does not match its digest (truncated, corrupted or altered); recompiling it",
                self.code.display()
            );
            return None;
        }
        // Mapped, not read: the code is used from the page cache where it
        // lies (shared by every chorus on the machine) instead of copied
        // into a buffer and again into executable memory — for a Python
        // plugin, tens of MB and milliseconds on every start.
        //
        // SAFETY: the file is, digest for digest, the one this cache wrote
        // from `Component::serialize` for this engine (the key names the
        // engine); deserialize checks the engine compatibility again.
        // Entries are only ever replaced whole (written aside, renamed into
        // place) or removed, never changed in place, so the file mapped is
        // a complete entry and stays as mapped.
        match unsafe { Component::deserialize_file(engine, &self.code) } {
            Ok(component) => {
                // Mark it used, so pruning keeps it.
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&self.code)
                    .and_then(|f| f.set_modified(SystemTime::now()));
                Some(component)
            }
            Err(e) => {
                tracing::warn!(
                    "ignoring unreadable cache entry {}: {e}",
                    self.code.display()
                );
                None
            }
        }
    }

    fn write(&self, component: &Component) -> anyhow::Result<()> {
        create_private_dir(&self.dir)?;
        let bytes = component.serialize()?;
        persist(&self.dir, &self.code, &bytes)?;
        persist(
            &self.dir,
            &self.digest,
            hex(&Sha256::digest(&bytes)).as_bytes(),
        )?;
        Ok(())
    }
}

/// The hex SHA-256 of the file at `path`, read a block at a time.
fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

fn persist(dir: &Path, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.as_file().sync_all()?;
    file.persist(path)?;
    Ok(())
}

/// The cache holds native code: only its owner may write there.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests;
