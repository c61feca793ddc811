//! The limits instances share on one database (`postgres/limits.rs`), on a
//! real PostgreSQL: two stores are two instances.

use std::time::Duration;

use crate::llm::limits::Kind;
use crate::store::pg_cluster::shared;
use crate::store::{Retention, Store, Target};

fn open(url: &str) -> Store {
    let retention = Retention {
        max_runs: 1000,
        max_age: None,
        max_bytes: 1 << 30,
    };
    Store::open_database(Target::new(url, None).unwrap(), retention).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrency_slots_are_counted_across_instances_and_freed_with_a_lost_lease() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let (a, b) = (open(&url), open(&url));
    let (sa, sb) = (a.shared_limits().unwrap(), b.shared_limits().unwrap());
    let one = sa.take("p", Kind::Concurrency, 1, 0, 2).await.unwrap();
    assert_eq!(one.granted, 1);
    assert_eq!(
        sb.take("p", Kind::Concurrency, 1, 0, 2)
            .await
            .unwrap()
            .granted,
        1
    );
    // Two of two held: nobody gets a third, whoever asks.
    assert_eq!(
        sa.take("p", Kind::Concurrency, 1, 0, 2)
            .await
            .unwrap()
            .granted,
        0
    );
    let b_hold = sb.take("p", Kind::Concurrency, 1, 0, 2).await.unwrap();
    assert_eq!(b_hold.granted, 0);
    // Another scope is another limit.
    assert_eq!(
        sb.take("q", Kind::Concurrency, 1, 0, 2)
            .await
            .unwrap()
            .granted,
        1
    );
    // A gives its slot back: B gets it.
    sa.adjust(&one.hold, -1).await.unwrap();
    let two = sb.take("p", Kind::Concurrency, 1, 0, 2).await.unwrap();
    assert_eq!(two.granted, 1);
    // B's lease lapses (it was killed): its two slots are free for A.
    let db = url.rsplit('/').next().unwrap();
    cluster.psql(
        db,
        &format!(
            "UPDATE instances SET heartbeat_at = 0 WHERE id IN (SELECT instance FROM limit_holds WHERE id = '{}')",
            two.hold
        ),
    );
    assert_eq!(
        sa.take("p", Kind::Concurrency, 2, 0, 2)
            .await
            .unwrap()
            .granted,
        2
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_per_minute_are_taken_in_batches_and_given_back() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let (a, b) = (open(&url), open(&url));
    let (sa, sb) = (a.shared_limits().unwrap(), b.shared_limits().unwrap());
    // A takes 1 and a batch of 2 more: all 3 of the minute.
    let batch = sa.take("p", Kind::Requests, 1, 2, 3).await.unwrap();
    assert_eq!(batch.granted, 3);
    let refused = sb.take("p", Kind::Requests, 1, 0, 3).await.unwrap();
    assert_eq!(refused.granted, 0);
    // It says when the minute of A's batch ends (a minute and its life).
    assert!(
        refused.retry_in > Duration::from_secs(55) && refused.retry_in <= Duration::from_secs(61),
        "{:?}",
        refused.retry_in
    );
    // A used one; the two it gives back are B's to take.
    sa.adjust(&batch.hold, -2).await.unwrap();
    assert_eq!(
        sb.take("p", Kind::Requests, 2, 5, 3).await.unwrap().granted,
        2
    );
    assert_eq!(
        sb.take("p", Kind::Requests, 1, 0, 3).await.unwrap().granted,
        0
    );
    // Tokens are another count: a worst case of 900 of 1000, settled at 100.
    let tokens = sa.take("p", Kind::Tokens, 900, 0, 1000).await.unwrap();
    assert_eq!(tokens.granted, 900);
    assert_eq!(
        sb.take("p", Kind::Tokens, 800, 0, 1000)
            .await
            .unwrap()
            .granted,
        0
    );
    sa.adjust(&tokens.hold, -800).await.unwrap();
    assert_eq!(
        sb.take("p", Kind::Tokens, 800, 0, 1000)
            .await
            .unwrap()
            .granted,
        800
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backoff_set_by_one_instance_is_read_by_the_other() {
    let Some(cluster) = shared() else { return };
    let url = cluster.database();
    let (a, b) = (open(&url), open(&url));
    let (sa, sb) = (a.shared_limits().unwrap(), b.shared_limits().unwrap());
    assert_eq!(sb.backoff("p").await.unwrap(), Duration::ZERO);
    sa.back_off("p", Duration::from_secs(2)).await.unwrap();
    // A shorter one does not shorten it.
    sb.back_off("p", Duration::from_millis(10)).await.unwrap();
    let left = sb.backoff("p").await.unwrap();
    assert!(
        left > Duration::from_millis(1500) && left <= Duration::from_secs(2),
        "{left:?}"
    );
    let taken = sb.take("p", Kind::Concurrency, 1, 0, 2).await.unwrap();
    assert!(
        taken.backoff > Duration::from_millis(1500),
        "{:?}",
        taken.backoff
    );
    assert_eq!(sb.backoff("other").await.unwrap(), Duration::ZERO);
}
