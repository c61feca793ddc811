//! Builds the strategy plugins (../plugins, a wasm32-wasip2 workspace) and
//! embeds the shipped ones in the binary, so `chorus` runs from any
//! directory with no files beside it.
//!
//! The plugins build in their own target directory (`target/plugins`): a
//! nested cargo on the outer build's directory would wait on its lock.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Plugins compiled into chorus, by the name `builtin = "..."` uses.
const BUILTINS: &[(&str, &str)] = &[
    // selectors
    ("static-panel", "static_panel"),
    ("route", "route"),
    ("cheapest", "cheapest"),
    ("diverse", "diverse"),
    ("self-moa", "self_moa"),
    // prompters
    ("passthrough", "passthrough"),
    ("heavy-planner", "heavy_planner"),
    // synthesizers
    ("synthesize", "synthesize"),
    ("vote", "vote"),
    ("judge", "judge"),
    ("council", "council"),
    ("debate", "debate"),
    ("mixture", "mixture"),
];

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
    for (name, artifact) in BUILTINS {
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

fn build_plugins(plugins: &Path, target_dir: &Path) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--release")
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
        let hint =
            if stderr.contains("wasm32-wasip2") && stderr.contains("target may not be installed") {
                "\n\nThe wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2`."
            } else {
                ""
            };
        panic!(
            "building the plugins in {} failed:\n{stderr}{hint}",
            plugins.display()
        );
    }
}
