//! A doorbell between threads that wakes its listener only while it
//! listens. A ring while the listener is busy or resting costs a lock and
//! a flag, never a wake-up: the listener hears it the next time it
//! listens. The store's writer and checkpointer are rung on every run's
//! events; woken for each, they cost a run more in thread switches than
//! the writing itself.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

#[derive(Default)]
pub struct Bell {
    state: Mutex<State>,
    woken: Condvar,
}

#[derive(Default)]
struct State {
    rung: bool,
    listening: bool,
    closed: bool,
}

/// What a listener heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A ring, now or while it was not listening.
    Rung,
    /// Nothing before its deadline.
    Quiet,
    /// The bell is closed: nothing more will ring.
    Closed,
}

impl Bell {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rings: wakes the listener if it listens, else leaves word for it.
    pub fn ring(&self) {
        let mut state = self.state();
        state.rung = true;
        if state.listening {
            state.listening = false;
            self.woken.notify_one();
        }
    }

    /// Closes the bell: its listener, listening or resting, returns at once.
    pub fn close(&self) {
        self.state().closed = true;
        self.woken.notify_all();
    }

    /// Waits for a ring (one since it last heard counts at once), until
    /// `until` if given.
    pub fn listen(&self, until: Option<Instant>) -> Heard {
        let mut state = self.state();
        loop {
            if state.closed {
                return Heard::Closed;
            }
            if state.rung {
                state.rung = false;
                state.listening = false;
                return Heard::Rung;
            }
            state.listening = true;
            state = match until {
                None => self.woken.wait(state).unwrap_or_else(|e| e.into_inner()),
                Some(until) => match until.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => {
                        self.woken
                            .wait_timeout(state, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    _ => {
                        state.listening = false;
                        return Heard::Quiet;
                    }
                },
            };
        }
    }

    /// Sleeps until `until`, deaf to rings (they wait for the next
    /// `listen`). False if the bell was closed meanwhile.
    pub fn rest(&self, until: Instant) -> bool {
        let mut state = self.state();
        state.listening = false;
        loop {
            if state.closed {
                return false;
            }
            match until.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => {
                    state = self
                        .woken
                        .wait_timeout(state, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                _ => return true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_ring_is_heard_whether_it_came_before_or_during_the_wait() {
        let bell = Arc::new(Bell::default());
        bell.ring();
        assert_eq!(bell.listen(None), Heard::Rung);
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(
            bell.listen(Some(soon)),
            Heard::Quiet,
            "one ring is heard once"
        );
        let ringer = {
            let bell = bell.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                bell.ring();
            })
        };
        let later = Instant::now() + Duration::from_secs(30);
        assert_eq!(bell.listen(Some(later)), Heard::Rung);
        assert!(Instant::now() < later);
        ringer.join().unwrap();
    }

    #[test]
    fn a_rest_ignores_rings_but_not_a_close() {
        let bell = Arc::new(Bell::default());
        let started = Instant::now();
        bell.ring();
        assert!(bell.rest(started + Duration::from_millis(40)));
        assert!(started.elapsed() >= Duration::from_millis(40));
        assert_eq!(bell.listen(None), Heard::Rung, "the ring waited for it");
        let closer = {
            let bell = bell.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                bell.close();
            })
        };
        assert!(!bell.rest(Instant::now() + Duration::from_secs(30)));
        assert_eq!(bell.listen(None), Heard::Closed);
        closer.join().unwrap();
    }
}
