//! Lines for the person running chorus, on stderr, that nothing can turn
//! into a failure of the server: the address it serves at, a reload, a
//! drain, a plugin being compiled. These show at every log level, so they
//! are not `tracing` events; and stderr is a pipe that may be gone (a log
//! collector restarted, `| head` finished, a terminal closed), where
//! `eprintln!` panics and would take the task that wrote the line with it
//! (a SIGTERM handler, the reload watcher). A line that cannot be written
//! is dropped; whatever the server was doing goes on.
//!
//! The crate forbids `print!`/`eprint!` and their `ln` forms (clippy's
//! `print_stdout`/`print_stderr`, set in `lib.rs`) outside the terminal
//! commands that allow them; everything else says its lines here.

use std::io::Write;

/// Writes one line to stderr, ignoring a stderr that cannot take it.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_fmt(args)
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `notice!("chorus: …", …)`: `eprintln!` that cannot panic.
macro_rules! notice {
    ($($arg:tt)*) => {
        $crate::notice::line(format_args!($($arg)*))
    };
}
pub(crate) use notice;
