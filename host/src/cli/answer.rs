//! The answer on a terminal as its model writes it: where the strategy asks
//! for its merge with `host.complete-answer` (contract 0.5), `chorus ask`
//! prints the merge's text on stdout while it arrives, and the progress on
//! stderr stops so the two do not interleave. What is not a terminal (a
//! pipe, a file) and `--json` get the answer whole, exactly as the run
//! kept it: what streamed can only be amended, never taken back (see
//! `events::live`).

// A terminal command: its answer on stdout, its progress on stderr.
#![allow(clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::events::live::Live;
use crate::events::{Event, Progress};

/// The answer so far, printed as it comes.
#[derive(Default)]
pub(super) struct Streaming {
    live: Mutex<Live>,
    /// Text has gone out.
    started: AtomicBool,
    /// The last character printed was a newline.
    ends_in_newline: AtomicBool,
}

impl Streaming {
    /// A streaming answer when stdout is a terminal and the output is not
    /// JSON.
    pub(super) fn for_terminal(json: bool) -> Option<Arc<Self>> {
        (!json && std::io::stdout().is_terminal()).then(Arc::default)
    }

    /// Prints the answer's pieces; passes every other event to `inner`
    /// until the first piece, and none after it.
    pub(super) fn watcher(self: &Arc<Self>, inner: Progress) -> Progress {
        let this = self.clone();
        Arc::new(move |event: Event| match event {
            Event::AnswerText { id, attempt, text } => {
                let piece = this
                    .live
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .piece(id, attempt, &text);
                if !this.started.swap(true, Ordering::Relaxed) && std::io::stderr().is_terminal() {
                    // The progress status line, if one is drawn, goes.
                    eprint!("\r\x1b[K");
                }
                this.print(&piece);
            }
            event if !this.started.load(Ordering::Relaxed) => inner(event),
            _ => {}
        })
    }

    fn print(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        // A closed stdout is seen when the answer is printed whole.
        let _ = stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush());
        self.ends_in_newline
            .store(text.ends_with('\n'), Ordering::Relaxed);
    }

    /// Prints what completes the answer once the run has it, and a last
    /// newline; `false` when nothing streamed (the caller prints it whole).
    pub(super) fn finish(&self, answer: &str) -> bool {
        if !self.started.load(Ordering::Relaxed) {
            return false;
        }
        let (rest, _) = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rest(answer);
        self.print(rest.trim_end());
        if !self.ends_in_newline.load(Ordering::Relaxed) {
            self.print("\n");
        }
        true
    }
}
