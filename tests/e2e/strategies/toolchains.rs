//! The plugin toolchains the tests build with, pinned in
//! plugins/examples/toolchains: componentize-py (PyPI) in a virtualenv and
//! componentize-js (npm) in a node_modules, both under the target directory.
//! `.ci/run` installs them first; a test installs them on first use if they
//! are missing, once per test process. `COMPONENTIZE_PY` and
//! `COMPONENTIZE_JS` point at installed ones instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// One install at a time: tests run in parallel.
static INSTALLING: Mutex<()> = Mutex::new(());

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn pins() -> PathBuf {
    root().join("plugins/examples/toolchains")
}

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

pub fn run(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start it: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// componentize-py 0.25.1.
pub fn componentize_py() -> PathBuf {
    if let Some(path) = std::env::var_os("COMPONENTIZE_PY") {
        return path.into();
    }
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let venv = tmp().join("componentize-py");
    let bin = venv.join("bin").join("componentize-py");
    // A virtualenv that was moved (its scripts name their old interpreter)
    // does not run: make it anew.
    let works = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        let _ = std::fs::remove_dir_all(&venv);
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
        run(
            Command::new(venv.join("bin").join("pip"))
                .args(["install", "--quiet", "-r"])
                .arg(pins().join("requirements.txt")),
            "pip install componentize-py (set COMPONENTIZE_PY to an installed one)",
        );
    }
    bin
}

/// The node_modules folder holding componentize-js 0.23.0.
pub fn componentize_js_modules() -> PathBuf {
    if let Some(path) = std::env::var_os("COMPONENTIZE_JS") {
        // .../node_modules/.bin/componentize-js
        let bin = PathBuf::from(path);
        return bin.parent().and_then(Path::parent).unwrap().to_owned();
    }
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmp().join("componentize-js");
    let modules = dir.join("node_modules");
    if !modules.join(".bin").join("componentize-js").exists() {
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(pins().join(file), dir.join(file)).unwrap();
        }
        // `npm install` with the lock file installs its pinned versions.
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&dir),
            "npm install componentize-js (set COMPONENTIZE_JS to an installed one)",
        );
    }
    modules
}

pub fn componentize_js() -> PathBuf {
    componentize_js_modules()
        .join(".bin")
        .join("componentize-js")
}

/// Whether `out` is newer than every input.
pub fn fresh(out: &Path, inputs: &[PathBuf]) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    modified(out).is_some_and(|built| {
        inputs
            .iter()
            .all(|input| modified(input).is_some_and(|m| m <= built))
    })
}
