//! Notices the client closing its end of our stdout even while nothing is
//! being written: a thread waits in poll(2) on fd 1 for an error or hangup
//! (a pipe whose reader is gone reports POLLERR), then ends the session. On
//! a file or /dev/null nothing is ever reported, and the thread just waits.

use super::Session;

#[cfg(unix)]
pub fn watch_stdout(session: Session) {
    let spawned = std::thread::Builder::new()
        .name("stdout-hangup".into())
        .spawn(move || {
            let mut fd = libc::pollfd {
                fd: libc::STDOUT_FILENO,
                events: 0,
                revents: 0,
            };
            loop {
                // SAFETY: one valid pollfd, for the process's lifetime.
                let ready = unsafe { libc::poll(&mut fd, 1, -1) };
                if ready < 0 {
                    if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return;
                }
                if fd.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                    session.end("the client closed our stdout");
                    return;
                }
                if fd.revents & libc::POLLNVAL != 0 {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch stdout for the client hanging up: {e}");
    }
}

#[cfg(not(unix))]
pub fn watch_stdout(_session: Session) {
    // Elsewhere a closed stdout is noticed at the next write.
}
