//! Tasks in the store (see `store::tasks`), on both backends: written by
//! their owner, read back and cancelled through another handle, forgotten
//! when expired, and read as lost when their owner is gone.

use std::time::Duration;

use super::Place;
use crate::store::{Store, TaskRow, now_ms, owner};

fn row(store: &Store, id: &str) -> TaskRow {
    TaskRow {
        id: id.into(),
        client: "alice".into(),
        owner: store.task_owner(),
        run_id: None,
        status: "working".into(),
        detail: r#"{"taskId":"x"}"#.into(),
        expires_at: now_ms() + 60_000,
    }
}

/// An owner the store takes to be gone: a process that cannot exist on
/// this host, or an instance with no lease.
fn gone_owner(place: &Place) -> String {
    match place {
        Place::File(_) => {
            let (here, _) = owner::this_process().rsplit_once('/').unwrap();
            format!("{here}/999999999")
        }
        Place::Database(_) => "an-instance-that-never-was".into(),
    }
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap()
}

on_both_backends!(
    a_task_is_read_back_and_cancelled_through_another_handle,
    a_working_task_whose_owner_is_gone_reads_lost_and_an_ended_one_does_not,
);

async fn a_task_is_read_back_and_cancelled_through_another_handle(place: Place) {
    let (owner, other) = (place.open(), place.open());
    let mut task = row(&owner, &uuid::Uuid::now_v7().to_string());
    let (o, t) = (owner.clone(), task.clone());
    assert!(!blocking(move || o.put_task(&t)).await.unwrap());
    let (s, id) = (other.clone(), task.id.clone());
    let read = blocking(move || s.task(&id))
        .await
        .unwrap()
        .expect("the task");
    assert_eq!(read.row, task);
    assert!(!read.cancel_requested && !read.lost, "{read:?}");

    // A cancel through the other handle reaches the owner's next write.
    let (s, id) = (other.clone(), task.id.clone());
    blocking(move || s.request_task_cancel(&id)).await.unwrap();
    task.status = "cancelled".into();
    task.run_id = Some("run-1".into());
    let (o, t) = (owner.clone(), task.clone());
    assert!(blocking(move || o.put_task(&t)).await.unwrap());
    let (s, id) = (other.clone(), task.id.clone());
    let read = blocking(move || s.task(&id)).await.unwrap().unwrap();
    assert_eq!(read.row, task);

    // Unknown and expired tasks are none.
    let s = other.clone();
    assert!(
        blocking(move || s.task("no-such-task"))
            .await
            .unwrap()
            .is_none()
    );
    let mut old = row(&owner, &uuid::Uuid::now_v7().to_string());
    old.expires_at = now_ms() - 1;
    let (o, t) = (owner.clone(), old.clone());
    blocking(move || o.put_task(&t)).await.unwrap();
    let (s, id) = (other, old.id);
    assert!(blocking(move || s.task(&id)).await.unwrap().is_none());
}

async fn a_working_task_whose_owner_is_gone_reads_lost_and_an_ended_one_does_not(place: Place) {
    let store = place.open();
    let mut working = row(&store, &uuid::Uuid::now_v7().to_string());
    working.owner = gone_owner(&place);
    let mut ended = working.clone();
    ended.id = uuid::Uuid::now_v7().to_string();
    ended.status = "completed".into();
    let mine = row(&store, &uuid::Uuid::now_v7().to_string());
    for task in [&working, &ended, &mine] {
        let (s, t) = (store.clone(), task.clone());
        blocking(move || s.put_task(&t)).await.unwrap();
    }
    let read = |id: String| {
        let s = store.clone();
        blocking(move || s.task(&id).unwrap().unwrap())
    };
    assert!(read(working.id.clone()).await.lost);
    assert!(!read(ended.id.clone()).await.lost);
    assert!(!read(mine.id.clone()).await.lost, "this process's own task");
}

/// PostgreSQL tells every instance of a cancel at once (`NOTIFY`), not only
/// at the owner's next write.
#[tokio::test]
async fn a_cancel_is_heard_at_once_on_postgres() {
    let Some(place) = Place::database() else {
        return;
    };
    let (owner, other) = (place.open(), place.open());
    let mut heard = owner.task_cancels().expect("PostgreSQL hears cancels");
    // The listener connects in the background; ask until it has heard.
    let id = uuid::Uuid::now_v7().to_string();
    let (o, t) = (owner.clone(), row(&owner, &id));
    blocking(move || o.put_task(&t)).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let (s, key) = (other.clone(), id.clone());
            blocking(move || s.request_task_cancel(&key)).await.unwrap();
            if let Ok(Ok(got)) =
                tokio::time::timeout(Duration::from_millis(500), heard.recv()).await
            {
                return got;
            }
        }
    })
    .await
    .expect("the cancel is heard within 10 s");
    assert_eq!(got, id);
}
