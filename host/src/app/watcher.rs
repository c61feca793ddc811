//! What starts a reload in `chorus serve`: SIGHUP (on Unix; Windows has no
//! such signal, so there reloads come from watching alone), and (unless
//! `--no-watch`) a change to the configuration file or to a plugin file it
//! names. The *directories* holding them are watched, so an editor's save
//! by rename is seen, and a burst of events (write a temp file, rename it
//! over, touch it) is debounced into one reload. Each reload's outcome is
//! one block on stderr: what changed, or why the change was refused.

use crate::notice::notice;
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::Chorus;
use crate::config::Loaded;

/// How long the files must be quiet before a reload: an editor's save is a
/// burst of a few events within milliseconds.
const QUIET: Duration = Duration::from_millis(250);

/// Why a reload was started, as said in its report.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    #[cfg_attr(not(unix), allow(dead_code))]
    Signal,
    Files,
}

/// Starts reloading `chorus` on SIGHUP and, with `watch_files`, on changes
/// to its files. Runs for the life of the process.
pub fn start(chorus: Arc<Chorus>, watch_files: bool) {
    // One pending reload is enough: it reads the files as they are then.
    let (triggers, mut pending) = mpsc::channel(1);
    listen_for_sighup(triggers.clone());
    let mut files = if watch_files {
        Files::start(triggers)
    } else {
        None
    };
    // Watching starts before `serve` answers anything: a save right after
    // a client connects is seen.
    if let Some(files) = &mut files {
        files.follow(&chorus.runner().loaded);
    }
    let origin = chorus.runner().loaded.origin.clone();
    match (&files, chorus.runner().loaded.path.is_some()) {
        (Some(_), true) => tracing::info!("watching {origin} and its plugin files for changes"),
        (_, false) => tracing::info!("serving the built-in configuration: nothing to watch"),
        (None, true) if cfg!(unix) => {
            tracing::info!("not watching {origin} for changes; SIGHUP reloads it")
        }
        (None, true) => {
            tracing::info!("not watching {origin} for changes; restart chorus to reload it")
        }
    }
    tokio::spawn(async move {
        while let Some(mut trigger) = pending.recv().await {
            if let Trigger::Files = trigger {
                // Wait out the burst; a SIGHUP within it is what it was.
                loop {
                    match tokio::time::timeout(QUIET, pending.recv()).await {
                        Ok(Some(Trigger::Signal)) => trigger = Trigger::Signal,
                        Ok(Some(Trigger::Files)) => {}
                        Ok(None) => return,
                        Err(_quiet) => break,
                    }
                }
            }
            let label = match trigger {
                Trigger::Signal => "SIGHUP: ",
                Trigger::Files => "",
            };
            match chorus.reload().await {
                Ok(done) => notice!("chorus: {label}{done}"),
                Err(refused) => notice!("chorus: {label}{refused}"),
            }
            if let Some(files) = &mut files {
                files.follow(&chorus.runner().loaded);
            }
        }
    });
}

#[cfg(unix)]
fn listen_for_sighup(triggers: mpsc::Sender<Trigger>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(e) => {
            tracing::warn!("cannot listen for SIGHUP ({e}); it will not reload the configuration");
            return;
        }
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let _ = triggers.try_send(Trigger::Signal);
        }
    });
}

#[cfg(not(unix))]
fn listen_for_sighup(_triggers: mpsc::Sender<Trigger>) {}

/// The watched directories, and the files in them whose changes count.
struct Files {
    watcher: RecommendedWatcher,
    wanted: Arc<Mutex<BTreeSet<PathBuf>>>,
    dirs: BTreeSet<PathBuf>,
}

impl Files {
    /// `None` (said in the log) where the platform's watcher is unavailable.
    fn start(triggers: mpsc::Sender<Trigger>) -> Option<Self> {
        let wanted: Arc<Mutex<BTreeSet<PathBuf>>> = Arc::default();
        let seen = wanted.clone();
        let handler = move |event: notify::Result<Event>| match event {
            Ok(event) if changes_content(&event.kind) => {
                let wanted = seen.lock().unwrap_or_else(|e| e.into_inner());
                if event.paths.iter().any(|p| is_wanted(&wanted, p)) {
                    // Full means a reload is pending: it will see this too.
                    let _ = triggers.try_send(Trigger::Files);
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("watching the configuration files: {e}"),
        };
        match notify::recommended_watcher(handler) {
            Ok(watcher) => Some(Self {
                watcher,
                wanted,
                dirs: BTreeSet::new(),
            }),
            Err(e) => {
                tracing::warn!(
                    "cannot watch the configuration files ({e}); send SIGHUP to reload them"
                );
                None
            }
        }
    }

    /// Watches the files `loaded` consists of: itself and its plugins'.
    fn follow(&mut self, loaded: &Loaded) {
        let files = files_of(loaded);
        let dirs: BTreeSet<PathBuf> = files
            .iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf))
            .collect();
        for gone in self.dirs.difference(&dirs) {
            let _ = self.watcher.unwatch(gone);
        }
        for dir in dirs.difference(&self.dirs) {
            if let Err(e) = self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                tracing::warn!(
                    "cannot watch {} ({e}); changes there are not seen: send SIGHUP to reload",
                    dir.display()
                );
            }
        }
        self.dirs = dirs;
        *self.wanted.lock().unwrap_or_else(|e| e.into_inner()) = files;
    }
}

/// Whether an event can mean new content: not a read (inotify reports
/// every open, chorus's own reads included, and a close after reading).
fn changes_content(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(notify::event::AccessKind::Close(notify::event::AccessMode::Write)) => {
            true
        }
        EventKind::Access(_) => false,
        EventKind::Modify(notify::event::ModifyKind::Metadata(
            notify::event::MetadataKind::AccessTime,
        )) => false,
        _ => true,
    }
}

/// The configuration file and the plugin files it names, as absolute paths.
fn files_of(loaded: &Loaded) -> BTreeSet<PathBuf> {
    let Some(config) = &loaded.path else {
        return BTreeSet::new();
    };
    let plugins = loaded
        .config
        .plugins
        .values()
        .filter_map(|p| p.path.as_ref())
        .map(|p| normal(&loaded.base_dir.join(p)));
    std::iter::once(normal(config)).chain(plugins).collect()
}

/// Whether `path` is one of the `wanted` files. Most events in a watched
/// directory are about other files — a run store kept beside the config
/// is written on every run — so names are compared first, which allocates
/// nothing; only a path with a wanted name is made absolute to compare.
fn is_wanted(wanted: &BTreeSet<PathBuf>, path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    wanted.iter().any(|w| w.file_name() == Some(name)) && wanted.contains(&normal(path))
}

/// `path` made absolute, without `.` components, so that a watched file
/// and an event's path compare equal however the config wrote it.
fn normal(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    absolute
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_wanted_files_count_however_their_path_is_written() {
        let dir = std::env::current_dir().unwrap();
        let wanted: BTreeSet<PathBuf> = [
            normal(Path::new("plugins.toml")),
            normal(Path::new("p/x.wasm")),
        ]
        .into();
        assert!(is_wanted(&wanted, &dir.join("plugins.toml")));
        assert!(is_wanted(&wanted, Path::new("./plugins.toml")));
        assert!(is_wanted(&wanted, &dir.join("p/./x.wasm")));
        // A sibling, a same-named file elsewhere, and a directory event.
        assert!(!is_wanted(&wanted, &dir.join("runs.sqlite3-wal")));
        assert!(!is_wanted(&wanted, &dir.join("q/plugins.toml")));
        assert!(!is_wanted(&wanted, Path::new("/")));
    }

    #[test]
    fn reading_a_file_is_not_a_change_writing_renaming_or_touching_it_is() {
        use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RenameMode};
        let read = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
        ];
        assert!(!read.iter().any(changes_content));
        let written = [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Create(CreateKind::File),
            EventKind::Remove(notify::event::RemoveKind::File),
        ];
        assert!(written.iter().all(changes_content));
    }

    #[test]
    fn the_files_of_a_config_are_itself_and_its_plugin_files() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("plugins.toml");
        let text = crate::config::BUILTIN_TOML.replace(
            "[plugins.route]\nbuiltin = \"route\"",
            "[plugins.route]\npath = \"./wasm/../wasm/s.wasm\"",
        );
        std::fs::write(&config, text).unwrap();
        let mut loaded = Loaded::from_file(&config).unwrap();
        let files = files_of(&loaded);
        assert!(files.contains(&normal(&config)), "{files:?}");
        assert!(
            files.contains(&dir.path().join("wasm/../wasm/s.wasm")),
            "{files:?}"
        );
        assert_eq!(files.len(), 2);
        loaded.path = None;
        assert!(files_of(&loaded).is_empty());
    }
}
