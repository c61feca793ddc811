//! A throwaway PostgreSQL for tests: Debian's server binaries (the
//! `postgresql` package), `initdb` into a temporary directory, started on a
//! free port of 127.0.0.1 with its socket in that directory, stopped when
//! dropped. PostgreSQL refuses to run as root, so as root the cluster is
//! made and run as the `postgres` user the package creates.
//!
//! `Cluster::start` is `None` when the binaries are missing — unless
//! `CHORUS_REQUIRE_POSTGRES=1` (set by `.ci/run`), which makes that a
//! failure. Included by the library's tests and by the e2e suite.

#![allow(dead_code)]
// A skipped test says why on stderr, where the test runner shows it.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub const REQUIRE: &str = "CHORUS_REQUIRE_POSTGRES";

pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    /// `postgres` when this process is root; `None`: the current user.
    user: Option<&'static str>,
}

/// The directory of `initdb`, `pg_ctl` and `psql`: the newest of Debian's
/// `/usr/lib/postgresql/N/bin`, else `pg_config --bindir`.
fn binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return Some(bin);
    }
    let output = Command::new("pg_config").arg("--bindir").output().ok()?;
    let bin = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    bin.join("initdb").is_file().then_some(bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

impl Cluster {
    /// A new cluster, started; `None` (said on stderr) when PostgreSQL is
    /// not installed and `CHORUS_REQUIRE_POSTGRES` is not set.
    pub fn start() -> Option<Self> {
        let Some(bin) = binaries() else {
            let required = std::env::var(REQUIRE).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{REQUIRE}=1 but PostgreSQL's server binaries are not installed \
                 (Debian: apt-get install postgresql)"
            );
            eprintln!(
                "skipped: PostgreSQL's server binaries are not installed \
                 (Debian: apt-get install postgresql; set {REQUIRE}=1 to fail instead)"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("chorus-pg-")
            .tempdir()
            .expect("a temporary directory");
        let user = is_root().then_some("postgres");
        if let Some(user) = user {
            let chowned = Command::new("chown")
                .args(["-R", &format!("{user}:"), &dir.path().display().to_string()])
                .status()
                .expect("chown runs");
            assert!(chowned.success(), "chown {user} {}", dir.path().display());
        }
        let cluster = Self {
            dir,
            bin,
            port: free_port(),
            user,
        };
        let data = cluster.data();
        let init = cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        assert!(init.status.success(), "initdb: {}", text(&init));
        cluster.start_again();
        Some(cluster)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// Runs one of the binaries, as the cluster's user.
    fn run(&self, tool: &str, args: &[&str]) -> Output {
        let program = self.bin.join(tool);
        let mut command = match self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        command
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
    }

    /// Starts the server (again, after `stop`), waiting until it accepts.
    pub fn start_again(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        let started = self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log,
                "-w",
                "start",
            ],
        );
        assert!(
            started.status.success(),
            "pg_ctl start: {}\n{}",
            text(&started),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stops the server at once (as a crash would: no goodbye to clients).
    pub fn stop(&self) {
        let stopped = self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
        assert!(stopped.status.success(), "pg_ctl stop: {}", text(&stopped));
    }

    /// The URL of database `db`, as the superuser (no password: trust).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs `sql` in database `db` with psql; its output, unaligned.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                db,
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .expect("psql runs");
        assert!(output.status.success(), "psql {sql}: {}", text(&output));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// A new empty database; its URL.
    pub fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "chorus_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "stop"]);
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// One cluster for the whole test process (each test takes its own
/// database in it), stopped when the process exits.
pub fn shared() -> Option<&'static Cluster> {
    static SHARED: std::sync::OnceLock<Option<Cluster>> = std::sync::OnceLock::new();
    SHARED
        .get_or_init(|| {
            let cluster = Cluster::start()?;
            extern "C" fn stop_at_exit() {
                if let Some(Some(cluster)) = SHARED.get() {
                    let _ = cluster.run(
                        "pg_ctl",
                        &["-D", &cluster.data(), "-m", "immediate", "stop"],
                    );
                    let _ = std::fs::remove_dir_all(cluster.dir());
                }
            }
            // SAFETY: registers a plain function to run at exit.
            unsafe { libc_atexit(stop_at_exit) };
            Some(cluster)
        })
        .as_ref()
}

unsafe extern "C" {
    #[link_name = "atexit"]
    fn libc_atexit(callback: extern "C" fn()) -> std::os::raw::c_int;
}
