//! `chorus init [PATH]`: writes the fully commented default configuration
//! (the built-in plugins.toml) to edit — by default to the user's config
//! file, which chorus then reads whenever no --config or $CHORUS_CONFIG
//! names another. Never overwrites a file without --force.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{BUILTIN_TOML, user_config_path};

#[derive(clap::Args)]
pub struct Args {
    /// Where to write it. Default: $XDG_CONFIG_HOME/chorus/plugins.toml
    /// (else ~/.config/chorus/plugins.toml), read by chorus when neither
    /// --config nor $CHORUS_CONFIG is given.
    path: Option<PathBuf>,
    /// Replace a file that is already there.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> ExitCode {
    let default = user_config_path();
    let Some(path) = args.path.clone().or_else(|| default.clone()) else {
        eprintln!(
            "chorus: neither $XDG_CONFIG_HOME nor $HOME is set, so there is no default place for the config: give a PATH"
        );
        return ExitCode::from(2);
    };
    if path.exists() && !args.force {
        eprintln!(
            "chorus: {} already exists; chorus init does not overwrite it (--force does)",
            path.display()
        );
        return ExitCode::from(2);
    }
    if let Err(e) = write(&path) {
        eprintln!("chorus: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    let read_when = if Some(&path) == default.as_ref() {
        "chorus reads it whenever neither --config nor $CHORUS_CONFIG names another file".to_owned()
    } else {
        format!(
            "use it with --config {0} or CHORUS_CONFIG={0}",
            path.display()
        )
    };
    println!(
        "wrote {}: the default configuration, every setting commented. {read_when}; `chorus check` validates it.",
        path.display()
    );
    ExitCode::SUCCESS
}

/// Writes through a temporary file beside `path`, so a crash never leaves
/// half a config where chorus would read it.
fn write(path: &std::path::Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut file = tempfile::NamedTempFile::new_in(&dir)?;
    std::io::Write::write_all(&mut file, BUILTIN_TOML.as_bytes())?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
