//! The queue from runs to a store's writer: a bounded channel of events,
//! and — for a writer on a thread of its own (SQLite's) — a bell that
//! wakes it once per batch instead of once per event.
//!
//! A run sends a dozen events and then its end, and only the end is
//! waited for. Waking a thread costs two context switches, more than
//! writing the event; so an event that nothing waits for rings the bell
//! only when the writer is idle, and the writer then lingers a moment
//! ([`LINGER`]) for the rest of the batch. A message someone waits for
//! (a run's end, a flush, a shutdown) rings at once and ends the linger:
//! it is written as soon as it would have been, with the events before it
//! in the same transaction.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{self, error::SendError, error::TrySendError};

use super::event::Msg;

/// Longest an event nothing waits for stays queued before it is written
/// (the writer's batching window; a crash loses at most this much more
/// than the calls in flight).
pub const LINGER: Duration = Duration::from_millis(5);

/// The sending side; clones share the channel and the bell.
#[derive(Clone)]
pub struct Queue {
    sender: mpsc::Sender<Msg>,
    bell: Option<Arc<Bell>>,
    /// Rings the bell when the last clone is gone, so the writer finds the
    /// channel closed (dropped after `sender`).
    _open: Option<Arc<Open>>,
}

impl Queue {
    /// A queue whose receiver is woken by the channel itself (an async
    /// writer: a task's wake-up is cheap).
    pub fn plain(sender: mpsc::Sender<Msg>) -> Self {
        Self {
            sender,
            bell: None,
            _open: None,
        }
    }

    /// A queue for a writer thread that waits on `bell`.
    pub fn belled(sender: mpsc::Sender<Msg>, bell: Arc<Bell>) -> Self {
        Self {
            sender,
            _open: Some(Arc::new(Open(bell.clone()))),
            bell: Some(bell),
        }
    }

    /// Queues `msg` if there is room (else hands it back, as the channel
    /// does, for a caller that will wait for room).
    #[allow(clippy::result_large_err)]
    pub fn try_send(&self, msg: Msg) -> Result<(), TrySendError<Msg>> {
        let urgent = msg.is_awaited();
        self.sender.try_send(msg)?;
        self.ring(urgent);
        Ok(())
    }

    /// Queues `msg`, waiting for room.
    pub async fn send(&self, msg: Msg) -> Result<(), SendError<Msg>> {
        let urgent = msg.is_awaited();
        self.sender.send(msg).await?;
        self.ring(urgent);
        Ok(())
    }

    fn ring(&self, urgent: bool) {
        if let Some(bell) = &self.bell {
            bell.ring(urgent);
        }
    }
}

struct Open(Arc<Bell>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.ring(true);
    }
}

const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const URGENT: u8 = 2;

/// What wakes a writer thread: something queued (rung once until the
/// writer drains), or something urgent.
pub struct Bell {
    state: AtomicU8,
    writer: OnceLock<std::thread::Thread>,
}

impl Bell {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: AtomicU8::new(IDLE),
            writer: OnceLock::new(),
        })
    }

    /// The thread to wake: set once it is spawned (a ring before that is
    /// kept in the state, which the writer reads before it sleeps).
    pub fn answered_by(&self, writer: std::thread::Thread) {
        let _ = self.writer.set(writer);
        self.wake();
    }

    fn ring(&self, urgent: bool) {
        let rang = if urgent {
            self.state.swap(URGENT, Ordering::AcqRel) != URGENT
        } else {
            self.state
                .compare_exchange(IDLE, QUEUED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        };
        if rang {
            self.wake();
        }
    }

    fn wake(&self) {
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }

    /// For the writer that stopped draining with more still queued: its
    /// next wait returns at once.
    pub fn ring_again(&self) {
        self.state.store(URGENT, Ordering::Release);
    }

    /// For the writer: returns when there is something to drain — at once
    /// for something urgent, after at most `linger` for the rest. Whatever
    /// is queued after it returns rings again.
    pub fn wait(&self, linger: Duration) {
        while self.state.load(Ordering::Acquire) == IDLE {
            std::thread::park();
        }
        let deadline = Instant::now() + linger;
        while self.state.load(Ordering::Acquire) == QUEUED {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::park_timeout(left);
        }
        self.state.store(IDLE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_msg() -> Msg {
        Msg::Plan {
            run_id: "r".into(),
            plan: Arc::new(crate::plugins::Plan {
                panel: Vec::new(),
                synthesizers: Vec::new(),
                notes: Vec::new(),
            }),
        }
    }

    /// A writer thread that drains whenever the bell says, and reports the
    /// size of each batch it drained.
    fn writer(
        mut receiver: mpsc::Receiver<Msg>,
        bell: Arc<Bell>,
    ) -> std::thread::JoinHandle<Vec<usize>> {
        std::thread::spawn(move || {
            let mut batches = Vec::new();
            loop {
                bell.wait(Duration::from_secs(30));
                let mut batch = 0;
                loop {
                    match receiver.try_recv() {
                        Ok(_) => batch += 1,
                        Err(mpsc::error::TryRecvError::Empty) => break,
                        Err(mpsc::error::TryRecvError::Disconnected) => {
                            batches.push(batch);
                            return batches;
                        }
                    }
                }
                batches.push(batch);
            }
        })
    }

    #[test]
    fn quiet_events_wait_for_the_next_urgent_one_and_go_in_one_batch() {
        let (sender, receiver) = mpsc::channel(64);
        let bell = Bell::new();
        let queue = Queue::belled(sender, bell.clone());
        let handle = writer(receiver, bell.clone());
        bell.answered_by(handle.thread().clone());
        for _ in 0..10 {
            queue.try_send(plan_msg()).unwrap();
        }
        // The linger is 30 s here: only the flush ends it.
        let (ack, _) = tokio::sync::oneshot::channel();
        let started = Instant::now();
        queue.try_send(Msg::Flush(ack)).unwrap();
        drop(queue);
        let batches = handle.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(batches.iter().sum::<usize>(), 11, "{batches:?}");
        assert_eq!(batches[0], 11, "one batch: {batches:?}");
    }

    #[test]
    fn a_quiet_event_alone_is_written_after_the_linger() {
        let (sender, mut receiver) = mpsc::channel(64);
        let bell = Bell::new();
        let queue = Queue::belled(sender, bell.clone());
        bell.answered_by(std::thread::current());
        queue.try_send(plan_msg()).unwrap();
        let started = Instant::now();
        bell.wait(Duration::from_millis(50));
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(receiver.try_recv().is_ok());
        // Drained: the next quiet event rings again.
        queue.try_send(plan_msg()).unwrap();
        bell.wait(Duration::ZERO);
        assert!(receiver.try_recv().is_ok());
    }
}
