//! The on-disk cache of compiled plugins. Compiling is the one expensive
//! step of loading (tenths of a second for a Rust guest, many seconds for a
//! Python or JavaScript one); a cached load reads, checks and maps a file.
//!
//! A compiled plugin is native code, so nothing is loaded from the cache
//! unchecked: each entry `KEY.cwasm` has a sidecar `KEY.sha256` with the
//! digest of its bytes, written after the entry (both atomically). An entry
//! whose bytes do not match — truncated or corrupted — is recompiled and
//! replaced, with a warning. A check passed is remembered in `KEY.checked`
//! with what the file system says of the entry (inode, size, modified and
//! changed times): the next start hashes it again only if any of those
//! moved, which any write, truncation or replacement does. (Hashing every
//! entry on every start was most of a warm start's CPU; what it alone
//! would catch is corruption below the file system.) The digest guards
//! against accidents, not attacks: whoever can write the entry can write
//! its digest too, so the cache directory must be writable by its owner
//! alone (it is created so). Keys are the component's SHA-256 and the
//! engine's compatibility hash (wasmtime version, target, settings);
//! entries for other engines, and entries unused for `MAX_AGE` (their
//! sidecar's modified time: using an entry never changes the entry itself),
//! are pruned.
//!
//! The built-in plugins are never compiled where the build precompiled
//! them (host/build.rs, the packages): the first start writes that code to
//! the cache as the entry a compile would have made, and every start maps
//! it from there ([`CompileCache::precompiled`]) — shared page cache, where
//! loading it from the binary copied all of it into anonymous executable
//! memory of each process. Only a machine that refuses the code (a CPU
//! without the baseline features) compiles and caches them.

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
/// How often an entry in use is marked so (its sidecar touched).
const MARK_EVERY: Duration = Duration::from_secs(24 * 3600);
/// A check is remembered only for an entry written at least this long
/// before it: file times tick coarsely (milliseconds), so a write in the
/// same tick as the entry's last one would leave its stamp as it was.
/// Once the entry is older than a tick, any later write moves its times.
const SETTLED: Duration = Duration::from_secs(2);
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

    /// Whether the cache holds an entry for the component whose SHA-256 is
    /// `digest`, unchecked: what a start asks of a plugin it leaves to load
    /// when first needed. That load reads and checks the entry (and
    /// compiles again, should it be gone or damaged by then).
    pub fn has(&self, engine: &Engine, digest: &[u8; 32]) -> bool {
        self.dir
            .as_ref()
            .is_some_and(|dir| Entry::new(dir, &key(engine, digest)).code.is_file())
    }

    /// A built-in's component from `code`, the build's precompiled code for
    /// it (the component's SHA-256 is `digest`): mapped from its cache
    /// entry, written from `code` if there is none yet. With no cache (off,
    /// or not writable) it is loaded from `code` in memory. `None` (logged)
    /// where this engine refuses the code: the caller compiles it.
    pub fn precompiled(
        &self,
        engine: &Engine,
        name: &str,
        digest: &[u8; 32],
        code: &'static [u8],
    ) -> Option<Component> {
        let Some(dir) = &self.dir else {
            return from_precompiled(engine, name, code);
        };
        let entry = Entry::new(dir, &key(engine, digest));
        if let Some(component) = entry.read(engine) {
            return Some(component);
        }
        // Once per machine (and engine): whether this engine takes the
        // code at all, before it becomes an entry.
        let in_memory = from_precompiled(engine, name, code)?;
        if let Err(e) = entry.write_code(code) {
            tracing::debug!(
                "cannot write the plugin cache in {} ({e:#}); `{name}` is loaded from the binary",
                dir.display()
            );
            return Some(in_memory);
        }
        entry.read(engine).or(Some(in_memory))
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
        // Decided for every file before any goes: an entry's files are
        // judged by its sidecar, which may be among those removed.
        let mut stale_files = Vec::new();
        for file in files.flatten() {
            let path = file.path();
            let name = file.file_name().to_string_lossy().into_owned();
            let Some((stem, ext)) = name.rsplit_once('.') else {
                continue;
            };
            let age_of = |path: &Path| {
                std::fs::metadata(path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
            };
            let age = age_of(&path).unwrap_or_default();
            let stale = match ext {
                // An entry is as old as its sidecar, which use marks.
                "cwasm" | "sha256" | "checked" => {
                    let used = age_of(&dir.join(format!("{stem}.sha256"))).unwrap_or(age);
                    !stem.ends_with(&engine_suffix) || used > MAX_AGE
                }
                // tempfile's leftovers from an interrupted write
                _ if name.starts_with(".tmp") => age > Duration::from_secs(3600),
                _ => false,
            };
            if stale {
                stale_files.push(path);
            }
        }
        for path in stale_files {
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::debug!("pruned {} from the plugin cache", path.display()),
                Err(e) => tracing::debug!("cannot prune {}: {e}", path.display()),
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

/// One cache entry: the compiled bytes, their digest, and the record of
/// the last check of one against the other.
struct Entry {
    dir: PathBuf,
    code: PathBuf,
    digest: PathBuf,
    checked: PathBuf,
}

impl Entry {
    fn new(dir: &Path, key: &str) -> Self {
        Self {
            dir: dir.to_owned(),
            code: dir.join(format!("{key}.cwasm")),
            digest: dir.join(format!("{key}.sha256")),
            checked: dir.join(format!("{key}.checked")),
        }
    }

    /// The entry's component, if it is there and its bytes are the ones
    /// that were written.
    fn read(&self, engine: &Engine) -> Option<Component> {
        self.read_settled(engine, SETTLED)
    }

    /// `read`, remembering a check of an entry last written `settled` ago.
    fn read_settled(&self, engine: &Engine, settled: Duration) -> Option<Component> {
        let meta = std::fs::metadata(&self.code).ok()?;
        let stamp = stamp(&meta);
        let known = std::fs::read_to_string(&self.checked).is_ok_and(|c| c == stamp);
        if !known {
            let expected = std::fs::read_to_string(&self.digest).unwrap_or_default();
            if file_digest(&self.code).ok()? != expected.trim() {
                tracing::warn!(
                    "the cached compiled plugin {} does not match its digest (truncated, corrupted or altered); recompiling it",
                    self.code.display()
                );
                return None;
            }
            // Not remembered (a read-only cache, an entry just written):
            // checked again next time.
            if last_written(&meta)
                .elapsed()
                .is_ok_and(|age| age >= settled)
            {
                let _ = persist(&self.dir, &self.checked, stamp.as_bytes());
            }
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
                self.mark_used();
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

    /// Touches the sidecar (at most daily), so pruning keeps the entry;
    /// the entry itself is left as it is, so its stamp still holds.
    fn mark_used(&self) {
        let now = SystemTime::now();
        let marked = std::fs::metadata(&self.digest).and_then(|m| m.modified());
        if marked.is_ok_and(|m| now.duration_since(m).unwrap_or_default() < MARK_EVERY) {
            return;
        }
        let _ = std::fs::File::options()
            .append(true)
            .open(&self.digest)
            .and_then(|f| f.set_modified(now));
    }

    fn write(&self, component: &Component) -> anyhow::Result<()> {
        self.write_code(&component.serialize()?)
    }

    /// Writes `code` (a serialized component) as the entry, then its
    /// digest: an entry is never readable before it is whole.
    fn write_code(&self, code: &[u8]) -> anyhow::Result<()> {
        create_private_dir(&self.dir)?;
        persist(&self.dir, &self.code, code)?;
        persist(
            &self.dir,
            &self.digest,
            hex(&Sha256::digest(code)).as_bytes(),
        )?;
        Ok(())
    }
}

/// What the file system says of a file that any change to it changes:
/// where it lies, its size, when it was written and (where the platform
/// has it) when its metadata last changed — a rename over it, a
/// truncation or a write moves one of these.
fn stamp(meta: &std::fs::Metadata) -> String {
    let nanos = |t: std::io::Result<SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos())
    };
    let written = nanos(meta.modified());
    #[cfg(unix)]
    let place = {
        use std::os::unix::fs::MetadataExt;
        let changed = i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec());
        format!("dev {} inode {} changed {changed}", meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let place = format!("created {}", nanos(meta.created()));
    format!("{place} size {} written {written}\n", meta.len())
}

/// The later of a file's modified and (where the platform has it)
/// metadata-changed times.
fn last_written(meta: &std::fs::Metadata) -> SystemTime {
    let modified = meta.modified().unwrap_or_else(|_| SystemTime::now());
    #[cfg(unix)]
    let modified = {
        use std::os::unix::fs::MetadataExt;
        let nanos = u32::try_from(meta.ctime_nsec()).unwrap_or(0);
        let changed = u64::try_from(meta.ctime())
            .ok()
            .map(|secs| SystemTime::UNIX_EPOCH + Duration::new(secs, nanos));
        changed.map_or(modified, |c| c.max(modified))
    };
    modified
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
