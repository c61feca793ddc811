//! Which files an attachment may be read from. A client driven by a model
//! could be talked into attaching `~/.ssh/id_rsa`, so over stdio a path is
//! read only inside the client's MCP roots or the directories the operator
//! allowed (`[limits] attachment_dirs`, `--allow-dir`), after symlinks are
//! resolved; the CLI reads what its user names; over HTTP no path is read
//! at all (the server's files are not the caller's).

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub enum Access {
    /// The CLI: its user names the file.
    Anywhere,
    /// An MCP client on stdio: inside these directories (resolved).
    Within(Vec<PathBuf>),
    /// An MCP client over HTTP: no path.
    Remote,
}

impl Access {
    /// The directories a stdio client may attach from: its roots (`file:`
    /// URIs) and the configured ones. Those that do not exist are dropped.
    pub fn within<'a>(roots: impl IntoIterator<Item = &'a str>, configured: &[PathBuf]) -> Self {
        let from_roots = roots
            .into_iter()
            .filter_map(|uri| url::Url::parse(uri).ok()?.to_file_path().ok());
        let dirs = from_roots
            .chain(configured.iter().cloned())
            .filter_map(|dir| dir.canonicalize().ok())
            .collect();
        Self::Within(dirs)
    }

    /// The file to read for `path`, resolved, or why it may not be read.
    pub fn resolve(&self, path: &Path) -> Result<PathBuf, String> {
        let shown = path.display();
        match self {
            Self::Remote => Err(format!(
                "`{shown}`: over HTTP chorus reads no paths (its files are not yours): send the bytes as {{\"data\": BASE64, \"mime_type\": …}} or an https `url`"
            )),
            Self::Anywhere => path
                .canonicalize()
                .map_err(|e| format!("cannot read `{shown}`: {e}")),
            Self::Within(dirs) => {
                let candidates: Vec<PathBuf> = if path.is_absolute() {
                    vec![path.to_owned()]
                } else {
                    dirs.iter().map(|dir| dir.join(path)).collect()
                };
                let found = candidates.iter().find_map(|c| c.canonicalize().ok());
                let allowed = |real: &Path| dirs.iter().any(|dir| real.starts_with(dir));
                match found {
                    Some(real) if allowed(&real) => Ok(real),
                    Some(real) => Err(format!(
                        "`{shown}` is outside the directories chorus may read{} ({}); attach files from inside them, or have the operator add the directory to [limits] attachment_dirs",
                        if real.as_path() != path {
                            format!(" (it resolves to `{}`)", real.display())
                        } else {
                            String::new()
                        },
                        self.allowed()
                    )),
                    None if dirs.is_empty() => Err(format!(
                        "`{shown}`: no directory is open to attachments ({}); the client shares none as an MCP root, and [limits] attachment_dirs is empty",
                        self.allowed()
                    )),
                    None => Err(format!(
                        "cannot read `{shown}`: no such file in the directories chorus may read ({})",
                        self.allowed()
                    )),
                }
            }
        }
    }

    /// The directories allowed, for messages.
    pub fn allowed(&self) -> String {
        match self {
            Self::Anywhere => "any".to_owned(),
            Self::Remote => "none over HTTP".to_owned(),
            Self::Within(dirs) if dirs.is_empty() => "none".to_owned(),
            Self::Within(dirs) => {
                let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                format!("allowed: {}", shown.join(", "))
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_read_only_inside_a_root_after_symlinks_resolve() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("in.txt"), "in").unwrap();
        std::fs::write(outside.path().join("secret"), "key").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("link"))
            .unwrap();
        let uri = url::Url::from_directory_path(root.path()).unwrap();
        let access = Access::within([uri.as_str()], &[]);

        let inside = access.resolve(&root.path().join("in.txt")).unwrap();
        assert!(inside.ends_with("in.txt"));
        // Relative paths are looked for in the roots.
        assert_eq!(access.resolve(Path::new("in.txt")).unwrap(), inside);

        let err = access.resolve(&outside.path().join("secret")).unwrap_err();
        assert!(err.contains("outside the directories"), "{err}");
        let real_root = root.path().canonicalize().unwrap();
        assert!(err.contains(&real_root.display().to_string()), "{err}");

        let err = access.resolve(&root.path().join("link")).unwrap_err();
        assert!(err.contains("it resolves to"), "{err}");
    }

    #[test]
    fn no_roots_and_http_refuse_with_the_reason() {
        let err = Access::within([], &[])
            .resolve(Path::new("/etc/passwd"))
            .unwrap_err();
        assert!(err.contains("outside the directories"), "{err}");
        assert!(err.contains("(none)"), "{err}");
        let err = Access::Remote
            .resolve(Path::new("/etc/passwd"))
            .unwrap_err();
        assert!(err.contains("over HTTP chorus reads no paths"), "{err}");
    }
}
