use super::*;

fn wasm() -> &'static [u8] {
    crate::plugins::registry::builtin_bytes("passthrough").expect("passthrough is built in")
}

fn digest() -> [u8; 32] {
    Sha256::digest(wasm()).into()
}

fn entries(dir: &Path, ext: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

#[test]
fn a_cached_plugin_is_loaded_only_if_its_digest_matches() {
    let dir = tempfile::tempdir().unwrap();
    let cache = CompileCache::new(Some(dir.path().join("chorus")));
    let engine = Engine::default();
    let (_, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Compiled);
    let (_, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Cached);

    // Truncated: recompiled, and the entry rewritten.
    let code = entries(&dir.path().join("chorus"), "cwasm").pop().unwrap();
    let whole = std::fs::read(&code).unwrap();
    std::fs::write(&code, &whole[..whole.len() / 2]).unwrap();
    let (_, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Compiled);
    assert_eq!(
        std::fs::read(&code).unwrap(),
        whole,
        "the entry was replaced"
    );

    // One byte changed, same length: refused too.
    let mut altered = whole.clone();
    let middle = altered.len() / 2;
    altered[middle] ^= 0xff;
    std::fs::write(&code, &altered).unwrap();
    let (_, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Compiled);

    // No digest at all: refused.
    std::fs::remove_file(code.with_extension("sha256")).unwrap();
    let (_, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Compiled);
    let (_, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Cached);
}

/// A cache in a temporary directory holding one compiled entry: the
/// directory (kept while it lives), the cache's own folder, the cache and
/// its engine.
fn one_entry() -> (tempfile::TempDir, PathBuf, CompileCache, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("chorus");
    let cache = CompileCache::new(Some(cache_dir.clone()));
    let engine = Engine::default();
    cache.load(&engine, "p", wasm(), &digest()).unwrap();
    (dir, cache_dir, cache, engine)
}

#[test]
fn a_check_passed_is_remembered_until_the_entry_changes() {
    let (_dir, cache_dir, _, engine) = one_entry();
    let entry = Entry::new(&cache_dir, &key(&engine, &digest()));

    // Just written: checked every time, nothing remembered.
    assert!(entry.read(&engine).is_some());
    assert!(
        !entry.checked.exists(),
        "a check of a fresh entry is remembered"
    );

    // Settled (here: at once), the check is remembered: the next read does
    // not hash the entry, as a digest that no longer matches shows.
    assert!(entry.read_settled(&engine, Duration::ZERO).is_some());
    assert!(entry.checked.exists());
    let digest_file = entry.digest.clone();
    let written = std::fs::read(&digest_file).unwrap();
    std::fs::write(&digest_file, "0".repeat(64)).unwrap();
    assert!(
        entry.read(&engine).is_some(),
        "a remembered check hashes again"
    );

    // Truncated, the entry's stamp moved: hashed again, and refused.
    let whole = std::fs::read(&entry.code).unwrap();
    std::fs::write(&digest_file, written).unwrap();
    std::fs::write(&entry.code, &whole[..whole.len() - 1]).unwrap();
    assert!(entry.read(&engine).is_none(), "a changed entry was loaded");
    // Replaced whole by a copy (another inode): hashed again, and loaded.
    let copy = cache_dir.join("copy");
    std::fs::write(&copy, &whole).unwrap();
    std::fs::rename(&copy, &entry.code).unwrap();
    std::fs::write(&digest_file, "0".repeat(64)).unwrap();
    assert!(
        entry.read(&engine).is_none(),
        "a replaced entry was not hashed"
    );
}

#[test]
fn pruning_removes_entries_of_other_engines_and_keeps_this_ones() {
    let (_dir, cache_dir, cache, engine) = one_entry();
    for stale in [
        "00ff-0123456789abcdef.cwasm",
        "00ff-0123456789abcdef.sha256",
    ] {
        std::fs::write(cache_dir.join(stale), b"old").unwrap();
    }
    std::fs::write(cache_dir.join("notes.txt"), b"not ours").unwrap();
    cache.prune(&engine);
    let mut left: Vec<String> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.contains(&"notes.txt".to_owned()));
    assert!(!left.iter().any(|f| f.starts_with("00ff-")), "{left:?}");
    let (_, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Cached);

    // An entry is as old as its sidecar, which use marks (the entry itself
    // is never touched): unused for longer than MAX_AGE, it goes whole.
    let entry = Entry::new(&cache_dir, &key(&engine, &digest()));
    assert!(entry.read_settled(&engine, Duration::ZERO).is_some());
    let long_ago = SystemTime::now() - MAX_AGE - Duration::from_secs(3600);
    let set_modified = |path: &Path, when| {
        std::fs::File::options()
            .append(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    };
    set_modified(&entry.code, long_ago);
    cache.prune(&engine);
    assert!(
        entry.code.exists() && entry.checked.exists(),
        "a used entry was pruned"
    );
    set_modified(&entry.digest, long_ago);
    cache.prune(&engine);
    for file in [&entry.code, &entry.digest, &entry.checked] {
        assert!(!file.exists(), "{} was kept", file.display());
    }
}

/// What the build does with the built-ins (host/build.rs), for one of them:
/// code precompiled portably for this target.
fn precompiled_portably(wasm: &[u8]) -> &'static [u8] {
    let config = crate::plugins::engine_config::portable_code_config(env!("CHORUS_BUILD_TARGET"))
        .expect("the build target is one wasmtime knows");
    let build = Engine::new(&config).expect("this machine's architecture is the target's");
    let code = build.precompile_component(wasm).unwrap();
    Box::leak(code.into_boxed_slice())
}

#[test]
fn code_precompiled_as_the_build_does_loads_in_the_running_engine_and_other_code_does_not() {
    let (engine, _) =
        crate::plugins::engine::engine(crate::plugins::engine::Sizing::for_runs(2, 64));
    assert!(from_precompiled(&engine, "passthrough", precompiled_portably(wasm())).is_some());

    // Compiled without fuel metering: refused, not run unmetered.
    let unmetered = Engine::new(&wasmtime::Config::new()).unwrap();
    let code = Box::leak(
        unmetered
            .precompile_component(wasm())
            .unwrap()
            .into_boxed_slice(),
    );
    assert!(from_precompiled(&engine, "passthrough", code).is_none());
    // Not code at all.
    assert!(from_precompiled(&engine, "passthrough", b"\0asm not code").is_none());
}

#[cfg(target_os = "linux")]
#[test]
fn a_precompiled_built_in_is_written_to_the_cache_once_and_mapped_from_it() {
    let (engine, _) =
        crate::plugins::engine::engine(crate::plugins::engine::Sizing::for_runs(2, 64));
    let code = precompiled_portably(wasm());
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("chorus");
    let cache = CompileCache::new(Some(cache_dir.clone()));
    for _ in 0..2 {
        let component = cache.precompiled(&engine, "p", &digest(), code).unwrap();
        let entry = entries(&cache_dir, "cwasm").pop().unwrap();
        assert_eq!(
            std::fs::read(&entry).unwrap(),
            code,
            "the build's code, as it is"
        );
        let image = component.image_range().start as usize;
        assert!(
            mappings_of(&entry).iter().any(|m| m.contains(&image)),
            "the code at {image:#x} is not mapped from {}",
            entry.display()
        );
    }
    assert_eq!(entries(&cache_dir, "cwasm").len(), 1);

    // No cache: from the binary's bytes, as before.
    assert!(
        CompileCache::new(None)
            .precompiled(&engine, "p", &digest(), code)
            .is_some()
    );
    // Code this engine refuses: none, and no entry made of it.
    let other = tempfile::tempdir().unwrap();
    let refusing = CompileCache::new(Some(other.path().to_owned()));
    assert!(
        refusing
            .precompiled(&engine, "p", &digest(), b"\0asm not code")
            .is_none()
    );
    assert_eq!(std::fs::read_dir(other.path()).unwrap().count(), 0);
}

#[cfg(feature = "precompiled-builtins")]
#[test]
fn every_built_in_is_precompiled_and_loads_without_compiling() {
    let (engine, _) =
        crate::plugins::engine::engine(crate::plugins::engine::Sizing::for_runs(2, 64));
    for name in crate::plugins::builtin_names() {
        let code = crate::plugins::registry::builtin_precompiled(name)
            .unwrap_or_else(|| panic!("`{name}` was not precompiled"));
        assert!(
            from_precompiled(&engine, name, code).is_some(),
            "`{name}` loads"
        );
    }
}

/// The address ranges at which `path` is mapped into this process.
#[cfg(target_os = "linux")]
fn mappings_of(path: &Path) -> Vec<std::ops::Range<usize>> {
    let path = path.canonicalize().unwrap();
    let path = path.to_str().unwrap();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|line| line.ends_with(path))
        .filter_map(|line| {
            let (start, end) = line.split_whitespace().next()?.split_once('-')?;
            Some(usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?)
        })
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn a_freshly_compiled_plugin_runs_from_its_cache_entry_not_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("chorus");
    let cache = CompileCache::new(Some(cache_dir.clone()));
    let engine = Engine::default();
    let (component, source) = cache.load(&engine, "p", wasm(), &digest()).unwrap();
    assert_eq!(source, Source::Compiled);
    let code = entries(&cache_dir, "cwasm").pop().unwrap();
    let image = component.image_range().start as usize;
    assert!(
        mappings_of(&code).iter().any(|m| m.contains(&image)),
        "the compiled code at {image:#x} is not mapped from {}",
        code.display()
    );
    prepare_images(&component, "p");

    // With nowhere to write, it runs from memory, as before.
    let (component, source) = CompileCache::new(None)
        .load(&engine, "p", wasm(), &digest())
        .unwrap();
    assert_eq!(source, Source::Compiled);
    prepare_images(&component, "p");
}
