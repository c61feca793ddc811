//! Builds the strategy plugins (../plugins, a wasm32-wasip2 workspace) and
//! embeds the shipped ones — every folder under plugins/builtin, by its
//! folder name — in the binary, so `chorus` runs from any directory with no
//! files beside it. The test fixtures under plugins/testing are built too,
//! for the test suite, but never embedded.
//!
//! The plugins build in their own target directory (`target/plugins`): a
//! nested cargo on the outer build's directory would wait on its lock.

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

    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_relative() { root.join(d) } else { d })
        .unwrap_or_else(|| root.join("target"))
        .join("plugins");

    build_plugins(&plugins, &target_dir);

    let wasm_dir = target_dir.join(TARGET).join("release");
    let mut source =
        String::from("/// Plugins compiled into this binary: (name, component bytes).\n");
    source.push_str("pub const BUILTINS: &[(&str, &[u8])] = &[\n");
    for (name, artifact) in builtins(&plugins.join("builtin")) {
        let path = wasm_dir.join(format!("{artifact}.wasm"));
        assert!(
            path.exists(),
            "the plugin build did not produce {}",
            path.display()
        );
        writeln!(
            source,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    source.push_str("];\n");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("builtins.rs"), source).expect("write builtins.rs");
    // The test suite loads the fault-injection plugins from here.
    println!("cargo:rustc-env=CHORUS_PLUGIN_DIR={}", wasm_dir.display());
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
