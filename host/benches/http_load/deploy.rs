//! What the bench's clients call: one `chorus serve --http` reached
//! directly, or N instances behind Debian's nginx (tests/support/nginx.rs,
//! configured as docs/scaling.md says), on one SQLite file or one throwaway
//! PostgreSQL (tests/support/postgres.rs); and the processes whose CPU and
//! memory the bench reads.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::nginx::Nginx;
use crate::postgres::Cluster;
use crate::{PANEL_MS, SYNTH_MS, TOKEN, mock::Mock, mock::Step};

/// Where the runs are kept.
#[derive(Clone, Copy, PartialEq)]
pub enum Store {
    Sqlite,
    Postgres,
}

pub struct Instance {
    pub child: Child,
    pub pid: u32,
    /// `127.0.0.1:PORT`, as nginx names it in its access log.
    pub addr: String,
}

/// Fields drop in order: the instances stop before the database does.
pub struct Deployment {
    pub instances: Vec<Instance>,
    pub nginx: Option<Nginx>,
    pub cluster: Option<Cluster>,
    /// The database's name in `cluster`.
    pub database: Option<String>,
    /// The MCP endpoint the clients call.
    pub url: String,
    _mock: Mock,
    _dir: tempfile::TempDir,
}

fn config(base_url: &str, dir: &Path, max_concurrency: usize, store: &str) -> String {
    format!(
        r#"
[cache]
dir = "{dir}"
[store]
{store}
[providers.mock]
base_url = "{base_url}"
max_concurrency = {max_concurrency}
[models.m1]
context_window = 100000
[models.m2]
context_window = 100000
[models.m3]
context_window = 100000
[models.synth]
context_window = 100000
[plugins.panel]
builtin = "static-panel"
settings = {{ panel = ["m1", "m2", "m3"], synthesizers = ["synth"] }}
[plugins.passthrough]
builtin = "passthrough"
[plugins.synthesize]
builtin = "synthesize"
[pipelines.ask]
description = "bench"
selector = "panel"
prompter = "passthrough"
synthesizer = "synthesize"
"#,
        dir = dir.display()
    )
}

/// `chorus serve --http 127.0.0.1:0 --config FILE`, once it listens.
async fn instance(file: &Path) -> (Instance, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_chorus"))
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(file)
        .env("CHORUS_TOKEN", TOKEN)
        .env("CHORUS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    let url = loop {
        let Some(line) = stderr.next_line().await.unwrap() else {
            panic!("chorus exited before listening:\n{said}");
        };
        said.push_str(&line);
        said.push('\n');
        if let Some(url) = line.split("serving MCP at ").nth(1) {
            break url.trim().replace("0.0.0.0", "127.0.0.1");
        }
    };
    // Keep reading stderr so chorus never blocks on a full pipe, and pass
    // on what it says (warnings and worse: CHORUS_LOG=warn).
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            eprintln!("chorus {pid}: {line}");
        }
    });
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    (Instance { child, pid, addr }, url)
}

impl Deployment {
    /// The slow mock, the store, `instances` chorus processes and, when
    /// `balanced`, nginx in front of them. Says what to install and exits
    /// when PostgreSQL or nginx is missing.
    pub async fn start(
        instances: usize,
        store: Store,
        balanced: bool,
        max_concurrency: usize,
    ) -> Self {
        let mock = Mock::start().await;
        for model in ["m1", "m2", "m3"] {
            mock.script(model, [Step::answer_after(PANEL_MS, "an answer")]);
        }
        mock.script("synth", [Step::answer_after(SYNTH_MS, "the synthesis")]);
        let dir = tempfile::tempdir().unwrap();
        let (cluster, database, section) = match store {
            Store::Sqlite => {
                let file = dir.path().join("runs.sqlite3");
                (None, None, format!("path = \"{}\"", file.display()))
            }
            Store::Postgres => {
                let Some(cluster) = tokio::task::block_in_place(Cluster::start) else {
                    missing("PostgreSQL's server binaries", "postgresql");
                };
                let url = tokio::task::block_in_place(|| cluster.database());
                let name = url.rsplit('/').next().unwrap().to_owned();
                (Some(cluster), Some(name), format!("url = \"{url}\""))
            }
        };
        let file = dir.path().join("bench.toml");
        let toml = config(&mock.base_url, dir.path(), max_concurrency, &section);
        std::fs::write(&file, toml).unwrap();
        // One first, so that it makes the tables (the others would wait on
        // its migration lock anyway), then the rest together.
        let (first, direct) = instance(&file).await;
        let rest = futures::future::join_all((1..instances).map(|_| instance(&file))).await;
        let instances: Vec<Instance> = std::iter::once(first)
            .chain(rest.into_iter().map(|(i, _)| i))
            .collect();
        let (nginx, url) = if balanced {
            let upstreams: Vec<String> = instances
                .iter()
                .map(|i| format!("http://{}", i.addr))
                .collect();
            let Some(nginx) = Nginx::start(&upstreams).await else {
                missing("nginx", "nginx-light");
            };
            let url = nginx.url();
            (Some(nginx), url)
        } else {
            (None, direct)
        };
        Self {
            instances,
            nginx,
            cluster,
            database,
            url,
            _mock: mock,
            _dir: dir,
        }
    }

    /// The live chorus processes.
    pub fn pids(&self) -> Vec<u32> {
        self.instances.iter().map(|i| i.pid).collect()
    }

    /// The postmaster's process id, from its `postmaster.pid`.
    pub fn postmaster(&self) -> Option<u32> {
        let cluster = self.cluster.as_ref()?;
        let file = cluster.dir().join("data").join("postmaster.pid");
        std::fs::read_to_string(file)
            .ok()?
            .lines()
            .next()?
            .parse()
            .ok()
    }

    /// `sql`'s output in the bench's database (unaligned, `|` between
    /// columns).
    pub fn psql(&self, sql: &str) -> String {
        let (cluster, db) = (self.cluster.as_ref().unwrap(), self.database.as_ref());
        tokio::task::block_in_place(|| cluster.psql(db.unwrap(), sql))
    }
}

fn missing(what: &str, package: &str) -> ! {
    eprintln!(
        "this measure needs {what}, which is not installed: on Debian or Ubuntu, \
         apt-get install {package} (or run without CHORUS_BENCH_INSTANCES and \
         CHORUS_BENCH_STORE=postgres for one process on SQLite)"
    );
    std::process::exit(2);
}
