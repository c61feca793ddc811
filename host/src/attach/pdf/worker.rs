//! PDF parsing in a short-lived child process, so that no PDF can cost
//! the server more than a stated bound, whatever its shape. lopdf bounds
//! each stream, not the document: a 31 KB object stream of `[0 0 0 …]`
//! parses into 16 M objects, 1.8 GB. A thread cannot be stopped or held
//! to a memory budget; a process can.
//!
//! The child is the `chorus` binary itself (registered at start with
//! [`use_worker`]), run as `chorus __pdf pages` or `chorus __pdf text
//! --pages N --chars N --stream-bytes N --seconds N`: the PDF's bytes on
//! its stdin, one JSON `Reply` on its stdout, nothing on stderr, no
//! environment. On unix it runs under `RLIMIT_AS` ([`ADDRESS_SPACE`]),
//! `RLIMIT_CPU` ([`CPU_SECONDS`]) and no core file; on every platform it
//! is killed at its wall deadline, and it is reaped before its turn
//! (`pdf::turns`) is given back, even when the caller stops waiting. On other platforms there is no rlimit: the wall time is the
//! only bound there. A child that runs out, crashes or answers garbage is
//! a `Failure` that says why, never a crash of the server.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

use super::{Bounds, Text, extract_bytes, page_count};

/// The address space a child may map, its binary included (unix).
pub const ADDRESS_SPACE: u64 = 256 << 20;

/// The CPU time a child may spend (unix): a backstop to the wall time,
/// which is never longer for text and much shorter for a page count.
pub const CPU_SECONDS: u64 = 15;

/// The most a reply may run to: 100 000 characters of text, escaped, is
/// well under it.
const MAX_REPLY: u64 = 4 << 20;

/// How long a killed child is waited for before its turn is given back
/// anyway (a process stuck in the kernel does not hold it forever).
const REAP_TIME: Duration = Duration::from_secs(5);

static WORKER: OnceLock<Worker> = OnceLock::new();

/// The program a child runs, and the arguments before the job's.
#[derive(Debug, Clone)]
pub(super) struct Worker {
    program: PathBuf,
    args: Vec<OsString>,
}

/// Makes `chorus` (the running binary, `std::env::current_exe()`) the
/// program PDFs are parsed in, as `chorus __pdf …`. Once, at start; a
/// second call changes nothing. A program that never calls it (the
/// library used on its own, the host's unit tests) parses no PDF at all:
/// in-process there is no bound to hold it to (a file's size is none: a
/// few KB can decode, stream by stream, to gigabytes of objects), so its
/// PDFs have no page count and no extracted text, and the reason says so.
pub fn use_worker(chorus: PathBuf) {
    let _ = WORKER.set(Worker {
        program: chorus,
        args: vec!["__pdf".into()],
    });
}

pub(super) fn registered() -> Option<&'static Worker> {
    WORKER.get()
}

/// What a child is asked: the `chorus __pdf` subcommands.
#[derive(Debug, Clone, PartialEq, clap::Subcommand)]
pub enum Job {
    /// The page count, from the page tree's leaves (`page_count`).
    Pages,
    /// The text layer, within bounds (`extract_bytes`).
    Text {
        #[arg(long)]
        pages: u32,
        #[arg(long)]
        chars: usize,
        #[arg(long)]
        stream_bytes: usize,
        #[arg(long)]
        seconds: u64,
    },
}

impl Job {
    pub(super) fn text(bounds: Bounds) -> Self {
        Self::Text {
            pages: bounds.pages,
            chars: bounds.chars,
            stream_bytes: bounds.stream_bytes,
            seconds: bounds.time.as_secs_f64().ceil() as u64,
        }
    }

    fn args(&self) -> Vec<String> {
        match self {
            Self::Pages => vec!["pages".into()],
            Self::Text {
                pages,
                chars,
                stream_bytes,
                seconds,
            } => vec![
                "text".into(),
                format!("--pages={pages}"),
                format!("--chars={chars}"),
                format!("--stream-bytes={stream_bytes}"),
                format!("--seconds={seconds}"),
            ],
        }
    }
}

/// A child's answer, as one JSON value on its stdout.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Reply {
    Pages(Option<u32>),
    Text(Result<Text, String>),
}

/// Why a child gave no answer.
#[derive(Debug)]
// Elsewhere than unix, no exit tells these three apart from a crash.
#[cfg_attr(not(unix), allow(dead_code))]
pub(super) enum Failure {
    /// No worker registered: nothing is parsed in-process.
    NoWorker,
    Base64(String),
    Spawn(std::io::Error),
    /// Killed at the wall deadline.
    TooLong,
    /// Aborted (an allocation refused under `RLIMIT_AS`, or a crash).
    Memory,
    /// Past `RLIMIT_CPU`.
    Cpu,
    /// Killed by someone else (the hard CPU limit, the OOM killer).
    Killed,
    Crashed(ExitStatus),
    Garbage,
    /// The caller stopped waiting.
    Stopped,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mb = ADDRESS_SPACE >> 20;
        match self {
            Self::NoWorker => write!(
                f,
                "it could not be read: this program parses no PDF, having no parser process to bound it in (attach::pdf::use_worker)"
            ),
            Self::Base64(e) => write!(f, "its bytes are not valid base64 ({e})"),
            Self::Spawn(e) => write!(
                f,
                "it could not be read: the PDF parser process did not start ({e})"
            ),
            Self::TooLong => write!(f, "reading it took longer than the time allowed"),
            Self::Memory => write!(
                f,
                "it could not be read: parsing it needs more than {mb} MB of memory (or crashed the parser)"
            ),
            Self::Cpu => write!(
                f,
                "it could not be read: parsing it needs more than {CPU_SECONDS} s of CPU"
            ),
            Self::Killed => write!(
                f,
                "it could not be read: the parser was killed (it needs more than {mb} MB of memory or {CPU_SECONDS} s of CPU)"
            ),
            Self::Crashed(status) => write!(
                f,
                "it could not be read: the PDF parser failed on it ({status})"
            ),
            Self::Garbage => write!(
                f,
                "it could not be read: the PDF parser gave no readable answer"
            ),
            Self::Stopped => write!(f, "text extraction was stopped"),
        }
    }
}

/// The child's side (`chorus __pdf …`): the PDF from stdin, the reply on
/// stdout. It logs nothing: what goes wrong is the parent's to say.
pub fn serve(job: Job) -> ExitCode {
    let mut bytes = Vec::new();
    if std::io::stdin().lock().read_to_end(&mut bytes).is_err() {
        return ExitCode::FAILURE;
    }
    let reply = match job {
        Job::Pages => Reply::Pages(page_count(&bytes)),
        Job::Text {
            pages,
            chars,
            stream_bytes,
            seconds,
        } => {
            let bounds = Bounds {
                pages,
                chars,
                stream_bytes,
                time: Duration::from_secs(seconds),
            };
            let deadline = std::time::Instant::now() + bounds.time;
            Reply::Text(extract_bytes(&bytes, bounds, deadline))
        }
    };
    drop(bytes);
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer(&mut out, &reply).map(|()| out.flush()) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// `job` on the PDF whose bytes are `base64`, in a child of `worker`,
/// given up on at `deadline`. The child is seen to its end by a task of
/// its own, which holds `turn` (whatever gives a turn back when dropped):
/// a caller that stops waiting (its run cancelled) gets the child killed,
/// and the turn comes back only once the child is gone — never a parse
/// left running outside the count.
pub(super) async fn in_child(
    worker: Option<&Worker>,
    turn: impl Send + 'static,
    base64: Arc<str>,
    job: Job,
    deadline: Instant,
) -> Result<Reply, Failure> {
    let worker = worker.cloned().ok_or(Failure::NoWorker)?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _turn = turn;
        let mut tx = tx;
        let result = async {
            let bytes = tokio::task::spawn_blocking(move || {
                base64::engine::general_purpose::STANDARD
                    .decode(base64.as_bytes())
                    .map_err(|e| Failure::Base64(e.to_string()))
            })
            .await
            .map_err(|_| Failure::Stopped)??;
            run(&worker, &job, &bytes, deadline, tx.closed()).await
        }
        .await;
        let _ = tx.send(result);
    });
    rx.await.unwrap_or(Err(Failure::Stopped))
}

/// Runs one child to its end: its reply, or why there is none. Past
/// `deadline`, or once `abandoned` resolves, it is killed and reaped.
async fn run(
    worker: &Worker,
    job: &Job,
    bytes: &[u8],
    deadline: Instant,
    abandoned: impl Future<Output = ()>,
) -> Result<Reply, Failure> {
    let mut command = tokio::process::Command::new(&worker.program);
    command
        .args(&worker.args)
        .args(job.args())
        // It needs nothing from the environment, and gets no secrets.
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    #[cfg(unix)]
    limits::apply(&mut command);
    let mut child = command.spawn().map_err(Failure::Spawn)?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Failure::Spawn(std::io::Error::other("no pipes")));
    };
    let talk = async {
        // A child that dies before reading everything breaks the pipe: its
        // exit status says why, not the write.
        let write = async move {
            let _ = stdin.write_all(bytes).await;
        };
        let read = async move {
            let mut out = Vec::new();
            stdout
                .take(MAX_REPLY + 1)
                .read_to_end(&mut out)
                .await
                .map(|_| out)
        };
        let ((), out) = tokio::join!(write, read);
        (out, child.wait().await)
    };
    let ended = tokio::select! {
        ended = talk => Some(ended),
        () = tokio::time::sleep_until(deadline) => None,
        () = abandoned => None,
    };
    match ended {
        Some((out, Ok(status))) => judge(status, out),
        Some((_, Err(e))) => Err(Failure::Spawn(e)),
        None => {
            let _ = child.start_kill();
            if tokio::time::timeout(REAP_TIME, child.wait()).await.is_err() {
                tracing::warn!(
                    pid = child.id(),
                    "a PDF parser process, killed, has not ended"
                );
            }
            Err(if Instant::now() >= deadline {
                Failure::TooLong
            } else {
                Failure::Stopped
            })
        }
    }
}

/// What a child's exit and output come to.
fn judge(status: ExitStatus, out: std::io::Result<Vec<u8>>) -> Result<Reply, Failure> {
    // Over the bound, the pipe was closed on it: whatever its exit says
    // (a broken pipe), it answered too much.
    let too_much = out.as_ref().is_ok_and(|out| out.len() as u64 > MAX_REPLY);
    if status.success() || too_much {
        return out
            .ok()
            .filter(|_| !too_much)
            .and_then(|out| serde_json::from_slice(&out).ok())
            .ok_or(Failure::Garbage);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        match status.signal() {
            // Rust aborts when an allocation is refused (and on a stack
            // overflow, which a deep enough nesting of arrays is too).
            Some(libc::SIGABRT | libc::SIGSEGV | libc::SIGBUS) => return Err(Failure::Memory),
            Some(libc::SIGXCPU) => return Err(Failure::Cpu),
            Some(libc::SIGKILL) => return Err(Failure::Killed),
            _ => {}
        }
    }
    Err(Failure::Crashed(status))
}

#[cfg(unix)]
mod limits {
    use super::{ADDRESS_SPACE, CPU_SECONDS};

    /// Sets the child's limits between fork and exec: its address space,
    /// its CPU time (SIGXCPU at the soft limit, SIGKILL a second later),
    /// and no core file when it aborts. Never raised above what the
    /// server itself may have.
    pub fn apply(command: &mut tokio::process::Command) {
        // SAFETY: the closure runs in the forked child before exec; it
        // allocates nothing and calls only getrlimit and setrlimit, which
        // are async-signal-safe system calls.
        unsafe {
            command.pre_exec(|| {
                let lower = |resource, soft: u64, hard: u64| {
                    let mut now = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    if libc::getrlimit(resource, &mut now) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let max = now.rlim_max;
                    let limit = libc::rlimit {
                        rlim_cur: (soft as libc::rlim_t).min(max),
                        rlim_max: (hard as libc::rlim_t).min(max),
                    };
                    if libc::setrlimit(resource, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                };
                lower(libc::RLIMIT_AS, ADDRESS_SPACE, ADDRESS_SPACE)?;
                lower(libc::RLIMIT_CPU, CPU_SECONDS, CPU_SECONDS + 1)?;
                lower(libc::RLIMIT_CORE, 0, 0)
            });
        }
    }
}

#[cfg(all(test, unix))]
mod tests;
