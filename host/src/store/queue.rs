//! The queue from runs to a store's writer. A run's events (its start,
//! its plan, each call) are queued without waiting and without waking a
//! writer that has just written: it lingers (`LINGER`) and takes them in
//! its next batch. A message someone waits for — a run's end, a flush,
//! the shutdown — rings it at once. A run of the default `ask` sends
//! fifteen messages; woken for each, the writer spent more of the run in
//! thread switches and commits than in writing, and now it is woken once.
//! The queue is bounded: an event that does not fit is refused (its run
//! counts it); a message waited for waits for room.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{self, error::TryRecvError, error::TrySendError};

use super::bell::{Bell, Heard};
use super::event::Msg;

/// How long a writer that has just written waits for a message someone
/// waits on before it writes the events queued meanwhile: the most a
/// run's event trails it on disk while others are being written.
pub const LINGER: Duration = Duration::from_millis(10);

/// The sending side; clones share the queue.
#[derive(Clone)]
pub struct Queue {
    sender: mpsc::Sender<Msg>,
    bell: Arc<Bell>,
}

/// The writer's side.
pub struct Inbox {
    receiver: mpsc::Receiver<Msg>,
    bell: Arc<Bell>,
    linger: Duration,
    lingering: bool,
}

/// A queue holding at most `capacity` messages.
pub fn channel(capacity: usize) -> (Queue, Inbox) {
    lingering(capacity, LINGER)
}

fn lingering(capacity: usize, linger: Duration) -> (Queue, Inbox) {
    let (sender, receiver) = mpsc::channel(capacity);
    let bell = Arc::new(Bell::default());
    let inbox = Inbox {
        receiver,
        bell: bell.clone(),
        linger,
        lingering: false,
    };
    (Queue { sender, bell }, inbox)
}

/// The writer has stopped.
#[derive(Debug)]
pub struct Stopped;

/// Why an event was not queued.
#[derive(Debug, PartialEq, Eq)]
pub enum NotQueued {
    Full,
    Stopped,
}

impl Queue {
    /// Queues an event nobody waits for, unless the queue is full or its
    /// writer has stopped.
    pub fn post(&self, msg: Msg) -> Result<(), NotQueued> {
        self.sender.try_send(msg).map_err(|e| match e {
            TrySendError::Full(_) => NotQueued::Full,
            TrySendError::Closed(_) => NotQueued::Stopped,
        })
    }

    /// Queues a message someone waits for and rings the writer. It is
    /// handed over at once when there is room, so a caller that stops
    /// waiting for room later (a cancelled call) cannot lose it.
    pub async fn deliver(&self, msg: Msg) -> Result<(), Stopped> {
        match self.sender.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(msg)) => self.sender.send(msg).await.map_err(|_| Stopped)?,
            Err(TrySendError::Closed(_)) => return Err(Stopped),
        }
        self.bell.ring();
        Ok(())
    }

    /// `deliver` for a thread outside the runtime (a store being dropped).
    /// `wait`: wait for room, else give up when the queue is full.
    pub fn deliver_blocking(&self, msg: Msg, wait: bool) {
        let sent = if wait {
            self.sender.blocking_send(msg).is_ok()
        } else {
            self.sender.try_send(msg).is_ok()
        };
        if sent {
            self.bell.ring();
        }
    }
}

impl Inbox {
    /// For a writer thread: the next batch, at most `most` messages, or
    /// `None` once every `Queue` is gone and everything sent was taken.
    /// Idle, the writer wakes for the first message; after a batch it
    /// lingers, woken only by a ring or when `LINGER` has passed.
    pub fn next_batch(&mut self, most: usize) -> Option<Vec<Msg>> {
        let first = loop {
            if !self.lingering {
                break self.receiver.blocking_recv()?;
            }
            let heard = self.bell.listen(Some(Instant::now() + self.linger));
            match self.receiver.try_recv() {
                Ok(msg) => break msg,
                Err(TryRecvError::Disconnected) => return None,
                // A ring whose message an earlier batch took: linger on.
                Err(TryRecvError::Empty) => self.lingering = heard == Heard::Rung,
            }
        };
        let mut batch = vec![first];
        while batch.len() < most {
            match self.receiver.try_recv() {
                Ok(msg) => batch.push(msg),
                Err(_) => break,
            }
        }
        self.lingering = true;
        Some(batch)
    }

    /// For an async writer, woken by every message: its receiver.
    pub fn into_receiver(self) -> mpsc::Receiver<Msg> {
        self.receiver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flush() -> (Msg, tokio::sync::oneshot::Receiver<Result<(), String>>) {
        let (ack, acked) = tokio::sync::oneshot::channel();
        (Msg::Flush(ack), acked)
    }

    #[tokio::test]
    async fn events_wait_for_the_next_batch_and_a_delivery_is_taken_at_once() {
        // A minute's linger: were the writer woken by events, they would
        // come in batches of their own.
        let (queue, mut inbox) = lingering(8, Duration::from_secs(60));
        let writer = std::thread::spawn(move || {
            let mut batches = Vec::new();
            while let Some(batch) = inbox.next_batch(64) {
                batches.push(batch.len());
                for msg in batch {
                    match msg {
                        Msg::Flush(ack) => drop(ack.send(Ok(()))),
                        Msg::Shutdown => return batches,
                        _ => {}
                    }
                }
            }
            batches
        });
        // The first message wakes an idle writer.
        let (msg, acked) = flush();
        queue.deliver(msg).await.unwrap();
        acked.await.unwrap().unwrap();
        // Lingering now: three events wait for the flush that follows.
        for _ in 0..3 {
            let (msg, _) = flush();
            queue.post(msg).unwrap();
        }
        let (msg, acked) = flush();
        queue.deliver(msg).await.unwrap();
        acked.await.unwrap().unwrap();
        queue.deliver(Msg::Shutdown).await.unwrap();
        assert_eq!(writer.join().unwrap(), [1, 4, 1]);
    }

    #[test]
    fn a_full_queue_refuses_an_event_and_a_stopped_writer_too() {
        let (queue, inbox) = channel(1);
        queue.post(Msg::Shutdown).unwrap();
        assert_eq!(queue.post(Msg::Shutdown), Err(NotQueued::Full));
        drop(inbox);
        assert_eq!(queue.post(Msg::Shutdown), Err(NotQueued::Stopped));
    }
}
