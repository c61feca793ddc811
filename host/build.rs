//! Builds the strategy plugins (../plugins, a wasm32-wasip2 workspace) and
//! embeds the shipped ones — every folder under plugins/builtin, by its
//! folder name — in the binary, so `chorus` runs from any directory with no
//! files beside it. The test fixtures under plugins/testing are built too,
//! for the test suite, but never embedded.
//!
//! The plugins build in their own target directory (`target/plugins`): a
//! nested cargo on the outer build's directory would wait on its lock.
//!
//! With the feature `precompiled-builtins`, each built-in is also
//! precompiled for the target, with the engine settings chorus runs them
//! under (src/plugins/engine_config.rs, included here) and only baseline CPU
//! features, and embedded beside its component: a first start deserializes
//! it in milliseconds instead of compiling for seconds. Where the build's
//! wasmtime cannot compile for the target (a cross build to another
//! architecture), the built-ins are embedded uncompiled, with a warning, and
//! compiled on first start as without the feature.

#[cfg(feature = "precompiled-builtins")]
#[path = "src/plugins/engine_config.rs"]
#[allow(dead_code)]
mod engine_config;

use sha2::Digest as _;
use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("host/ lives in the workspace root");
    let plugins = root.join("plugins");
    for watched in ["plugins", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    println!("cargo:rerun-if-changed=src/plugins/engine_config.rs");

    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_relative() { root.join(d) } else { d })
        .unwrap_or_else(|| root.join("target"))
        .join("plugins");

    build_plugins(&plugins, &target_dir);

    let wasm_dir = target_dir.join(TARGET).join("release");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let builtins: Vec<(String, PathBuf)> = builtins(&plugins.join("builtin"))
        .into_iter()
        .map(|(name, artifact)| {
            let path = wasm_dir.join(format!("{artifact}.wasm"));
            assert!(
                path.exists(),
                "the plugin build did not produce {}",
                path.display()
            );
            (name, path)
        })
        .collect();
    let precompiled = precompile(&builtins, &out);

    let mut source = String::from(
        "/// Plugins compiled into this binary, each with its code precompiled for this target when the build could.\n",
    );
    source.push_str("pub const BUILTINS: &[Builtin] = &[\n");
    for ((name, path), code) in builtins.iter().zip(&precompiled) {
        // Digested here, not at every start: reading the component to hash
        // it would bring all of it into the process's memory (and cost a
        // hash of every built-in on each start), where it is needed only
        // when the compile cache misses.
        let wasm = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let digest = sha2::Sha256::digest(&wasm);
        let kind = kind_of(name, &wasm);
        let code = match code {
            Some(code) => format!("Some(include_bytes!({:?}))", code.display().to_string()),
            None => "None".to_owned(),
        };
        writeln!(
            source,
            "    Builtin {{ name: {name:?}, kind: crate::plugins::Kind::{kind}, component: include_bytes!({:?}), digest: {:?}, precompiled: {code} }},",
            path.display().to_string(),
            <[u8; 32]>::from(digest)
        )
        .unwrap();
    }
    source.push_str("];\n");
    std::fs::write(out.join("builtins.rs"), source).expect("write builtins.rs");
    // The test suite loads the fault-injection plugins from here.
    println!("cargo:rustc-env=CHORUS_PLUGIN_DIR={}", wasm_dir.display());
    // What the built-ins were (or would be) precompiled for, for the tests.
    println!(
        "cargo:rustc-env=CHORUS_BUILD_TARGET={}",
        env::var("TARGET").expect("cargo sets TARGET")
    );
}

/// Which strategy world the built-in `name` implements, by the one
/// `chorus:strategy/{selector,prompter,synthesizer}@` export name its
/// component carries: known without reading the component at start, so a
/// built-in loaded on first use is held to its roles from the start. (A
/// host test checks this against the component's parsed exports.)
fn kind_of(name: &str, wasm: &[u8]) -> &'static str {
    let worlds = [
        ("selector", "Selector"),
        ("prompter", "Prompter"),
        ("synthesizer", "Synthesizer"),
    ];
    let found: Vec<&'static str> = worlds
        .iter()
        .filter(|(world, _)| {
            let export = format!("chorus:strategy/{world}@");
            wasm.windows(export.len()).any(|w| w == export.as_bytes())
        })
        .map(|(_, kind)| *kind)
        .collect();
    match found[..] {
        [kind] => kind,
        _ => panic!(
            "the built-in plugin `{name}` must export exactly one strategy world, found {found:?}"
        ),
    }
}

/// Without the feature, nothing is precompiled.
#[cfg(not(feature = "precompiled-builtins"))]
fn precompile(builtins: &[(String, PathBuf)], _out: &Path) -> Vec<Option<PathBuf>> {
    vec![None; builtins.len()]
}

/// Precompiles each built-in component for the build's target into `out`;
/// `None` for all of them where this build cannot (with a warning), or for
/// one that fails (which loading will then report, as for any plugin).
#[cfg(feature = "precompiled-builtins")]
fn precompile(builtins: &[(String, PathBuf)], out: &Path) -> Vec<Option<PathBuf>> {
    let triple = env::var("TARGET").expect("cargo sets TARGET");
    let engine = match engine_config::portable_code_config(&triple)
        .and_then(|config| wasmtime::Engine::new(&config))
    {
        Ok(engine) => engine,
        Err(e) => {
            println!(
                "cargo:warning=the built-in plugins are not precompiled for {triple} ({e}); chorus compiles them on its first start instead"
            );
            return vec![None; builtins.len()];
        }
    };
    std::thread::scope(|scope| {
        let jobs: Vec<_> = builtins
            .iter()
            .map(|(name, path)| {
                let engine = &engine;
                scope.spawn(move || {
                    let wasm = std::fs::read(path)
                        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                    match engine.precompile_component(&wasm) {
                        Ok(code) => {
                            let file = out.join(format!("{name}.cwasm"));
                            std::fs::write(&file, code)
                                .unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
                            Some(file)
                        }
                        Err(e) => {
                            println!("cargo:warning=cannot precompile the built-in plugin `{name}`: {e:#}");
                            None
                        }
                    }
                })
            })
            .collect();
        jobs.into_iter()
            .map(|job| job.join().expect("a precompile thread panicked"))
            .collect()
    })
}

/// The built-in plugins: (folder name, artifact name), sorted by name.
fn builtins(dir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let entry = entry.expect("list plugins/builtin");
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let package = text
            .lines()
            .find_map(|line| {
                let value = line
                    .trim()
                    .strip_prefix("name")?
                    .trim_start()
                    .strip_prefix('=')?;
                Some(value.trim().trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| panic!("{} names no package", manifest.display()));
        let name = entry.file_name().to_string_lossy().into_owned();
        assert_eq!(
            name,
            package,
            "{}: a built-in plugin's package is named after its folder",
            manifest.display()
        );
        found.push((name, package.replace('-', "_")));
    }
    found.sort();
    found
}

fn build_plugins(plugins: &Path, target_dir: &Path) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--release")
        // The plugins' dependencies are pinned by plugins/Cargo.lock.
        .arg("--locked")
        .arg("--target")
        .arg(TARGET)
        .arg("--manifest-path")
        .arg(plugins.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    // The outer build's settings are for the host, not for wasm guests.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
        "__CARGO_DEFAULT_LIB_METADATA",
    ] {
        command.env_remove(var);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the plugins: {e}"));
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("wasm32-wasip2")
            && stderr.contains("target may not be installed")
        {
            "\n\nThe wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2`."
        } else if stderr.contains("--locked") {
            "\n\nplugins/Cargo.lock is out of date: run `cargo update --workspace --manifest-path plugins/Cargo.toml` and commit it."
        } else {
            ""
        };
        panic!(
            "building the plugins in {} failed:\n{stderr}{hint}",
            plugins.display()
        );
    }
}
