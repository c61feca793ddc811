//! Where the configuration comes from, and why that one: `--config FILE`,
//! else `$CHORUS_CONFIG`, else the user's own file (`chorus init` writes
//! it: `$XDG_CONFIG_HOME/chorus/plugins.toml`, else
//! `~/.config/chorus/plugins.toml`) when it exists, else the built-in
//! default. `chorus check` says which, so nobody has to guess.

use std::fmt;
use std::path::PathBuf;

/// Why this configuration was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    UserFile,
    BuiltIn,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = user_config_path().map_or(
            "no user config path (neither $XDG_CONFIG_HOME nor $HOME is set)".to_owned(),
            |p| format!("no {}", p.display()),
        );
        match self {
            Self::Flag => write!(f, "given with --config"),
            Self::Env => write!(f, "named by ${} (no --config)", super::CONFIG_ENV),
            Self::UserFile => write!(
                f,
                "the user's config file (no --config, ${} not set)",
                super::CONFIG_ENV
            ),
            Self::BuiltIn => write!(
                f,
                "the built-in default (no --config, ${} not set, {user}; `chorus init` writes one to edit)",
                super::CONFIG_ENV
            ),
        }
    }
}

/// The user's own config file, read when it exists and nothing else is
/// named: `$XDG_CONFIG_HOME/chorus/plugins.toml`, else
/// `~/.config/chorus/plugins.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("chorus").join("plugins.toml"))
}
