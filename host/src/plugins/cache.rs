//! The on-disk cache of compiled plugins. Compiling is the one expensive
//! step of loading (tenths of a second for a Rust guest, many seconds for a
//! Python one); a cached load is a file map.
//!
//! Entries are keyed by the component's SHA-256 and the engine's
//! compatibility hash (wasmtime version, target, settings), written
//! atomically, and recompiled if unreadable.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// How a component was obtained, for `chorus check` and the logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Compiled,
    Cached,
}

pub struct CompileCache {
    dir: Option<PathBuf>,
}

impl CompileCache {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// `$XDG_CACHE_HOME/chorus`, else `$HOME/.cache/chorus`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|d| !d.is_empty())
                    .map(|h| Path::new(&h).join(".cache"))
            })?;
        Some(base.join("chorus"))
    }

    pub fn load(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<(Component, Source)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, wasm)?, Source::Compiled));
        };
        let path = dir.join(format!("{}.cwasm", key(engine, wasm)));
        if path.exists() {
            // SAFETY: the file is one this function wrote (atomically, keyed
            // by content and engine) into the user's own cache directory.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok((component, Source::Cached)),
                Err(e) => tracing::warn!("ignoring unreadable cache entry {}: {e}", path.display()),
            }
        }
        let component = Component::new(engine, wasm)?;
        if let Err(e) = store(dir, &path, &component) {
            tracing::warn!("cannot write the plugin cache in {}: {e:#}", dir.display());
        }
        Ok((component, Source::Compiled))
    }
}

fn key(engine: &Engine, wasm: &[u8]) -> String {
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine
        .precompile_compatibility_hash()
        .hash(&mut engine_hash);
    let digest = Sha256::digest(wasm);
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{hex}-{:016x}", engine_hash.finish())
}

fn store(dir: &Path, path: &Path, component: &Component) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize()?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, &bytes)?;
    file.persist(path)?;
    Ok(())
}
