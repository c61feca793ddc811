//! Debian's nginx (`nginx-light`) as the load balancer in front of several
//! chorus instances, as docs/scaling.md configures it: round robin, HTTP/1.1
//! to the upstreams, no buffering and long read timeouts (so SSE streams
//! pass through as they are written), a refused connection tried on the
//! next instance. One process (`master_process off`, `daemon off`), its
//! files in a temporary directory, listening on a free port of 127.0.0.1;
//! stopped when dropped. Its access log says which instances each request
//! tried (read by the multi-instance bench, `host/benches/http_load.rs`).
//!
//! `Nginx::start` is `None` when nginx is not installed — unless
//! `CHORUS_REQUIRE_NGINX=1` (set by `.ci/run`), which makes that a failure.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

pub const REQUIRE: &str = "CHORUS_REQUIRE_NGINX";

pub struct Nginx {
    _dir: tempfile::TempDir,
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
}

fn binary() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

impl Nginx {
    /// nginx balancing over `upstreams` (origins such as
    /// `http://127.0.0.1:PORT`), accepting connections.
    pub async fn start(upstreams: &[String]) -> Option<Self> {
        let Some(bin) = binary() else {
            let required = std::env::var(REQUIRE).is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{REQUIRE}=1 but nginx is not installed (apt-get install nginx-light)"
            );
            eprintln!("skipped: nginx is not installed (apt-get install nginx-light)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let servers: String = upstreams
            .iter()
            .map(|u| format!("    server {};\n", u.trim_start_matches("http://")))
            .collect();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nmaster_process off;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
             events {{ worker_connections 4096; }}\nworker_rlimit_nofile 8192;\n\
             http {{\n  log_format tried '$msec $request_time $status $upstream_addr';\n\
             \x20 access_log {d}/access.log tried;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
             \x20 fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
             \x20 upstream chorus {{\n{servers}  }}\n\
             \x20 server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
             \x20     proxy_pass http://chorus;\n      proxy_http_version 1.1;\n\
             \x20     proxy_set_header Connection \"\";\n      proxy_set_header Host $http_host;\n\
             \x20     proxy_buffering off;\n      proxy_request_buffering off;\n\
             \x20     proxy_read_timeout 3600s;\n      proxy_next_upstream error timeout;\n\
             \x20     client_max_body_size 16m;\n    }}\n  }}\n}}\n"
        );
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen on {port}: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(Self {
            _dir: dir,
            child,
            origin: format!("http://127.0.0.1:{port}"),
        })
    }

    /// nginx's process (one: `master_process off`).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The access log: a line a request, `$msec $request_time $status
    /// $upstream_addr` (end time and duration in seconds; the instances the
    /// request tried, in order, comma-separated).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("access.log")).unwrap_or_default()
    }

    /// The MCP endpoint behind it.
    pub fn url(&self) -> String {
        format!("{}/mcp", self.origin)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
