//! The process's stdin and stdout as async streams. tokio's `stdin()` and
//! `stdout()` do every read and write on a blocking thread: each MCP
//! message is a hand-off to another thread and back (in the bench, the
//! blocking pool's sleeps and wake-ups were 5 % of chorus's CPU). Where
//! they are pipes or sockets — as MCP clients spawn servers: pipes from
//! Python's and Rust's SDKs, socket pairs from Node's — they are read and
//! written through the reactor instead: duplicated, made non-blocking and
//! registered. A terminal or a file keeps tokio's blocking streams.
//!
//! Non-blocking is a property of our end of the pipe or socket (its open
//! file description), so it holds for anything else sharing that end too:
//! normally nothing, since a client spawns chorus with fresh pipes and
//! keeps only the other ends. Nothing else in chorus reads stdin or writes
//! stdout (stdout belongs to MCP).

use tokio::io::{AsyncRead, AsyncWrite};

pub type Reader = Box<dyn AsyncRead + Unpin + Send>;
pub type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin and stdout, each direct where it can be, else through tokio's
/// blocking streams. Must be called within the runtime.
pub fn streams() -> (Reader, Writer) {
    (reader(), writer())
}

#[cfg(unix)]
fn reader() -> Reader {
    use std::os::fd::AsFd;
    direct::attempt(std::io::stdin().as_fd(), direct::reader, "reading stdin")
        .unwrap_or_else(|| Box::new(tokio::io::stdin()))
}

#[cfg(unix)]
fn writer() -> Writer {
    use std::os::fd::AsFd;
    direct::attempt(std::io::stdout().as_fd(), direct::writer, "writing stdout")
        .unwrap_or_else(|| Box::new(tokio::io::stdout()))
}

#[cfg(not(unix))]
fn reader() -> Reader {
    Box::new(tokio::io::stdin())
}

#[cfg(not(unix))]
fn writer() -> Writer {
    Box::new(tokio::io::stdout())
}

/// Pipes and sockets through the reactor.
#[cfg(unix)]
pub(super) mod direct {
    use std::io;
    use std::os::fd::{BorrowedFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;

    use tokio::net::unix::pipe;

    use super::{Reader, Writer};

    enum Kind {
        Pipe,
        Socket,
        Other,
    }

    /// `make` of a duplicate of `fd`; `None` (said in the debug log when it
    /// failed) where `fd` is to be left to tokio's blocking streams.
    pub fn attempt<T>(
        fd: BorrowedFd<'_>,
        make: fn(OwnedFd) -> io::Result<Option<T>>,
        what: &str,
    ) -> Option<T> {
        let made = fd.try_clone_to_owned().and_then(make);
        if let Err(e) = &made {
            tracing::debug!("{what} through a blocking thread: {e}");
        }
        made.ok().flatten()
    }

    fn kind(fd: &OwnedFd) -> io::Result<Kind> {
        let file_type = std::fs::File::from(fd.try_clone()?).metadata()?.file_type();
        Ok(if file_type.is_fifo() {
            Kind::Pipe
        } else if file_type.is_socket() {
            Kind::Socket
        } else {
            Kind::Other
        })
    }

    fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
        // Only read or only written here, so the address family does not
        // matter (a socket pair, or a TCP socket from a super-server).
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(stream)
    }

    /// `fd` read through the reactor; `None` when it is neither a pipe nor
    /// a socket.
    pub fn reader(fd: OwnedFd) -> io::Result<Option<Reader>> {
        Ok(match kind(&fd)? {
            Kind::Pipe => Some(Box::new(pipe::Receiver::from_owned_fd(fd)?)),
            Kind::Socket => Some(Box::new(socket(fd)?)),
            Kind::Other => None,
        })
    }

    /// `fd` written through the reactor; `None` when it is neither a pipe
    /// nor a socket.
    pub fn writer(fd: OwnedFd) -> io::Result<Option<Writer>> {
        Ok(match kind(&fd)? {
            Kind::Pipe => Some(Box::new(pipe::Sender::from_owned_fd(fd)?)),
            Kind::Socket => Some(Box::new(socket(fd)?)),
            Kind::Other => None,
        })
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::fd::OwnedFd;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::direct;

    #[tokio::test]
    async fn pipes_and_sockets_are_read_and_written_directly_files_are_not() {
        // A pipe: what is written at one end is read at the other.
        let (rx, tx) = std::io::pipe().unwrap();
        let mut writer = direct::writer(OwnedFd::from(tx)).unwrap().expect("a pipe");
        let mut reader = direct::reader(OwnedFd::from(rx)).unwrap().expect("a pipe");
        writer.write_all(b"{\"jsonrpc\":\"2.0\"}\n").await.unwrap();
        drop(writer);
        let mut got = String::new();
        reader.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "{\"jsonrpc\":\"2.0\"}\n");

        // A socket pair, as Node's child_process gives a child.
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut writer = direct::writer(OwnedFd::from(ours.try_clone().unwrap()))
            .unwrap()
            .expect("a socket");
        let mut reader = direct::reader(OwnedFd::from(ours))
            .unwrap()
            .expect("a socket");
        let mut theirs = tokio::net::UnixStream::from_std({
            theirs.set_nonblocking(true).unwrap();
            theirs
        })
        .unwrap();
        writer.write_all(b"out\n").await.unwrap();
        let mut line = [0u8; 4];
        theirs.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"out\n");
        theirs.write_all(b"in\n").await.unwrap();
        let mut line = [0u8; 3];
        reader.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"in\n");

        // A file (a redirect): left to tokio's blocking streams.
        let file = tempfile::tempfile().unwrap();
        assert!(direct::reader(OwnedFd::from(file)).unwrap().is_none());
    }
}
