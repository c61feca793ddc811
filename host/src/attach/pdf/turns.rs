//! Whose turn it is to parse a PDF. Few parses run at once in the server
//! (each takes a core and up to `worker::ADDRESS_SPACE` of memory), so
//! who holds them is a question between tenants: one client's slow PDFs
//! must not make another's wait. A client holds at most one turn at a
//! time — its other parses queue behind it, never ahead of another
//! client's — and the parses of one run share a budget of parse time
//! ([`RUN_TIME`]), so even that one turn is held for a bounded time
//! however many slow PDFs a run brings.
//!
//! Who is asking is set by `app` around each run ([`for_client`]): a
//! task-local rather than a parameter of every run path, since only the
//! composition root knows the client and the pipeline in between never
//! reads it. A parse outside any such scope (the library used on its
//! own) counts as one anonymous client, with a budget of its own.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Parses at once in the server, whoever asks.
const AT_ONCE: usize = 2;

/// The parse time the PDFs of one scope (one run's page counts, or the
/// rest of the run) may take together. Two slow PDFs' worth of
/// extraction (`Bounds::DEFAULT.time`), well past what an honest run's
/// documents need.
pub const RUN_TIME: Duration = Duration::from_secs(30);

/// The client of a parse outside any scope.
const ANONYMOUS: &str = "(no client)";

static TURNS: LazyLock<Turns> = LazyLock::new(|| Turns::new(AT_ONCE));

tokio::task_local! {
    static ASKING: Arc<Asker>;
}

/// Runs `run` as `client`'s, its PDFs' parses sharing one budget of
/// [`RUN_TIME`] and taking their turns as `client`'s.
pub async fn for_client<F: Future>(client: &str, run: F) -> F::Output {
    ASKING.scope(Arc::new(Asker::new(client)), run).await
}

/// A turn for whoever is asking (the scope's client, or the anonymous
/// one): see [`Turns::take`].
pub(super) async fn take() -> Result<Turn, String> {
    let asker = ASKING
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::new(Asker::new(ANONYMOUS)));
    TURNS.take(asker).await
}

/// Who is asking, and how much parse time its scope has left.
#[derive(Debug)]
pub(super) struct Asker {
    client: String,
    left: Mutex<Duration>,
}

impl Asker {
    pub(super) fn new(client: &str) -> Self {
        Self {
            client: client.to_owned(),
            left: Mutex::new(RUN_TIME),
        }
    }

    fn left(&self) -> Duration {
        *self.left.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn spend(&self, time: Duration) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        *left = left.saturating_sub(time);
    }
}

/// The turns of the server: `at_once` in all, one per client.
#[derive(Debug)]
pub(super) struct Turns {
    at_once: Arc<Semaphore>,
    /// A one-permit semaphore for each client with a parse running or
    /// waiting; dropped once no one holds or waits for it, so the map is
    /// as large as the clients parsing at the moment, never more.
    clients: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Turns {
    pub(super) fn new(at_once: usize) -> Self {
        Self {
            at_once: Arc::new(Semaphore::new(at_once)),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// A turn for `asker`, once its client holds no other and one of the
    /// server's is free (both in the order asked); `Err` when its scope's
    /// parse time is spent. The client's own turn is taken first, so its
    /// queued parses wait on it and not among the server's turns, where
    /// they would stand ahead of other clients'.
    pub(super) async fn take(&self, asker: Arc<Asker>) -> Result<Turn, String> {
        let spent = || {
            format!(
                "the run's {} s for reading PDFs is spent",
                RUN_TIME.as_secs()
            )
        };
        if asker.left().is_zero() {
            return Err(spent());
        }
        let own = self.client(&asker.client);
        let closed = |_| "PDF parsing is shut down".to_owned();
        let client = own.acquire_owned().await.map_err(closed)?;
        let server = self.at_once.clone().acquire_owned().await.map_err(closed)?;
        // Another parse of the same scope may have spent it meanwhile.
        if asker.left().is_zero() {
            return Err(spent());
        }
        Ok(Turn {
            asker,
            started: Instant::now(),
            _server: server,
            _client: client,
        })
    }

    fn client(&self, name: &str) -> Arc<Semaphore> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        // A permit holds its semaphore: held by the map alone, no one
        // parses or waits for that client.
        clients.retain(|_, turn| Arc::strong_count(turn) > 1);
        clients
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(1)))
            .clone()
    }
}

/// A turn to parse: given back when dropped, its time then charged to its
/// scope's budget. Held until the child is gone (`worker::in_child`).
#[derive(Debug)]
pub(super) struct Turn {
    asker: Arc<Asker>,
    started: Instant,
    _server: OwnedSemaphorePermit,
    _client: OwnedSemaphorePermit,
}

impl Turn {
    /// `want`, or less when the scope has less parse time left.
    pub(super) fn time(&self, want: Duration) -> Duration {
        want.min(self.asker.left())
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Before the permits go (fields drop after this), so the client's
        // next parse sees the budget as this one left it.
        self.asker.spend(self.started.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    fn asker(client: &str) -> Arc<Asker> {
        Arc::new(Asker::new(client))
    }

    /// Issue 51: one client's two runs of slow PDFs took both of the
    /// server's turns, and another client's small PDF waited for them.
    #[tokio::test]
    async fn one_client_holds_one_turn_and_another_client_is_not_kept_waiting() {
        let turns = Turns::new(2);
        let first = turns.take(asker("alice")).await.unwrap();
        // Alice's second run waits for her own turn...
        let mut second = Box::pin(turns.take(asker("alice")));
        assert!((&mut second).now_or_never().is_none());
        // ...leaving the server's other turn to Bob at once.
        let bob = turns.take(asker("bob")).now_or_never();
        assert!(bob.is_some(), "bob waited on alice's parses");
        // Carol, a third client, waits for one of the two running...
        let mut carol = Box::pin(turns.take(asker("carol")));
        assert!((&mut carol).now_or_never().is_none());
        // ...and gets it before Alice's queued second, who still waits on
        // her own first parse.
        drop(bob);
        assert!((&mut carol).now_or_never().is_some());
        assert!((&mut second).now_or_never().is_none());
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(10), second).await;
        assert!(second.unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_scope_spends_its_parse_time_and_then_gets_no_turn() {
        let turns = Turns::new(2);
        let alice = asker("alice");
        let turn = turns.take(alice.clone()).await.unwrap();
        assert_eq!(turn.time(Duration::from_secs(15)), Duration::from_secs(15));
        alice.spend(RUN_TIME - Duration::from_secs(4));
        assert_eq!(turn.time(Duration::from_secs(15)), Duration::from_secs(4));
        drop(turn);
        alice.spend(Duration::from_secs(4));
        let why = turns.take(alice).await.unwrap_err();
        assert_eq!(why, "the run's 30 s for reading PDFs is spent");
        // Another run of the same client has its own.
        assert!(turns.take(asker("alice")).await.is_ok());
    }

    #[tokio::test]
    async fn a_client_no_longer_parsing_is_forgotten() {
        let turns = Turns::new(2);
        let held = turns.take(asker("alice")).await.unwrap();
        drop(turns.take(asker("bob")).await.unwrap());
        // Bob's entry goes at the next take; Alice's, held, stays.
        let _carol = turns.take(asker("carol")).await.unwrap();
        let clients = turns.clients.lock().unwrap();
        let mut names: Vec<&str> = clients.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["alice", "carol"]);
        drop(held);
    }

    #[tokio::test]
    async fn a_scope_names_the_client_and_outside_one_the_parse_is_anonymous() {
        let who = || ASKING.try_with(|a| a.client.clone()).ok();
        assert_eq!(who(), None);
        assert_eq!(
            for_client("alice", async { who() }).await.as_deref(),
            Some("alice")
        );
    }
}
