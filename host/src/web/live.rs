//! Runs in flight, live: Server-Sent Events telling a page that what it
//! shows has changed (`changed`), and when the run is over (`done`); the
//! page's script then fetches itself again. A run made by this process is
//! read again whenever its events move it (the events MCP progress is made
//! from); runs of other processes (`chorus ui` watching a `chorus serve`)
//! are read again every [`POLL`]. Each stream ends when its run does, or
//! after [`LONGEST`]. A stream watches only runs its client may see.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::Viewer;
use crate::client::Client;
use crate::record::{RunStatus, StoredRun};
use crate::store::{Lookup, Query};

/// How often a run is read again when nothing announced a move.
const POLL: Duration = Duration::from_secs(1);
/// A pause after a move, so a burst of events is read once.
const SETTLE: Duration = Duration::from_millis(100);
/// The longest one stream lasts; the browser reconnects after it.
const LONGEST: Duration = Duration::from_secs(30 * 60);
/// Runs the list's stream watches.
const LIST_HEAD: usize = 25;

/// What a page shows of a run, reduced to what changes as it goes.
fn fingerprint(run: &StoredRun) -> String {
    let calls: Vec<String> = run
        .calls
        .iter()
        .map(|c| format!("{}:{}", c.call.id, c.call.status))
        .collect();
    format!(
        "{}|{}|{}|{}",
        run.status.as_str(),
        run.answer.is_some(),
        run.notes.len(),
        calls.join(",")
    )
}

/// What is being watched: a state, and whether it is over.
type Look = Box<
    dyn Fn(Arc<Viewer>) -> futures::future::BoxFuture<'static, Option<(String, bool)>>
        + Send
        + Sync,
>;

fn stream(viewer: Arc<Viewer>, look: Look) -> impl Stream<Item = Result<Event, Infallible>> {
    struct Watching {
        viewer: Arc<Viewer>,
        look: Look,
        moves: watch::Receiver<u64>,
        last: Option<String>,
        over: bool,
        until: Instant,
    }
    let moves = viewer.chorus.moves();
    let state = Watching {
        viewer,
        look,
        moves,
        last: None,
        over: false,
        until: Instant::now() + LONGEST,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if state.over || Instant::now() >= state.until {
                return None;
            }
            if state.last.is_some() {
                tokio::select! {
                    _ = state.moves.changed() => tokio::time::sleep(SETTLE).await,
                    () = tokio::time::sleep(POLL) => {}
                }
                let _ = state.viewer.chorus.store.flush().await;
            }
            let (now, over) = (state.look)(state.viewer.clone()).await?;
            let first = state.last.is_none();
            let changed = state.last.as_ref() != Some(&now);
            state.last = Some(now);
            if over {
                state.over = true;
                return Some((Ok(Event::default().event("done").data("done")), state));
            }
            if changed && !first {
                return Some((Ok(Event::default().event("changed").data("changed")), state));
            }
        }
    })
}

fn sse(stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> Response {
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// `GET /runs/ID/events`: one run.
pub async fn events(
    State(viewer): State<Arc<Viewer>>,
    Extension(client): Extension<Arc<Client>>,
    Path(id): Path<String>,
) -> Response {
    let look: Look = Box::new(move |viewer: Arc<Viewer>| {
        let (id, client) = (id.clone(), client.clone());
        Box::pin(async move {
            match viewer.chorus.find_run_for(&client, &id, false).await {
                Ok(Lookup::Found(run)) => {
                    Some((fingerprint(&run), run.status != RunStatus::Running))
                }
                _ => None,
            }
        })
    });
    sse(stream(viewer, look))
}

/// `GET /events`: the newest runs the client may see, while any of them is
/// in flight.
pub async fn list_events(
    State(viewer): State<Arc<Viewer>>,
    Extension(client): Extension<Arc<Client>>,
) -> Response {
    let look: Look = Box::new(move |viewer: Arc<Viewer>| {
        let client = client.clone();
        Box::pin(async move {
            let query = Query {
                limit: LIST_HEAD,
                ..Query::default()
            };
            let page = viewer.chorus.list_runs_for(&client, query).await.ok()?;
            let state: Vec<String> = page
                .runs
                .iter()
                .map(|r| format!("{}:{}", r.run_id, r.status.as_str()))
                .collect();
            let over = !page.runs.iter().any(|r| r.status == RunStatus::Running);
            Some((state.join(","), over))
        })
    });
    sse(stream(viewer, look))
}
