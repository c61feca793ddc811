//! The fan-out policy: a batch of calls never waits on one slow model while
//! the others' answers sit ready. Once a quorum has answered, the calls
//! still running get `straggler_grace`, then are cut; and no call before
//! the merge may run into the time the run keeps for it (`merge_reserve`).
//! Cut calls are dropped — their connections close — and reported with
//! the reason.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use crate::config::{Quorum, show_duration};

/// How one batch is gathered.
#[derive(Debug, Clone)]
pub struct Policy {
    pub quorum: Quorum,
    pub grace: Duration,
    /// Where `quorum` and `straggler_grace` are set, for messages:
    /// `fan_out` or `pipelines.NAME.fan_out`.
    pub quorum_key: String,
    pub grace_key: String,
    /// Calls still running then are cut, with this reason.
    pub cut_at: Option<(Instant, String)>,
}

/// How a call of the batch ended.
#[derive(Debug)]
pub enum Ended<T> {
    Done(T),
    Cut(String),
}

/// Runs `calls` at once and gathers them under `policy`; `answered` says
/// which outcomes count toward the quorum. Outcomes in call order.
pub async fn gather<T, F>(
    calls: Vec<F>,
    policy: &Policy,
    answered: impl Fn(&T) -> bool,
) -> Vec<Ended<T>>
where
    F: Future<Output = T>,
{
    let n = calls.len();
    let quorum = policy.quorum.of(n);
    let mut outcomes: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut pending: FuturesUnordered<_> = calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| async move { (i, call.await) })
        .collect();
    let mut answers = 0;
    let mut grace_ends: Option<Instant> = None;
    let cut_at = policy.cut_at.as_ref().map(|(at, _)| *at);
    let mut cut_reason = None;
    while !pending.is_empty() {
        let limit = match (grace_ends, cut_at) {
            (Some(g), Some(c)) => Some(g.min(c)),
            (g, c) => g.or(c),
        };
        let next = match limit {
            None => pending.next().await,
            Some(at) => match tokio::time::timeout_at(at, pending.next()).await {
                Ok(next) => next,
                Err(_) => {
                    let by_grace = grace_ends.is_some_and(|g| cut_at.is_none_or(|c| g <= c));
                    cut_reason = Some(if by_grace {
                        format!(
                            "{answers} of {n} calls had answered (quorum = {}, {}.quorum) and this one \
                             did not finish within straggler_grace = {} ({}.straggler_grace)",
                            policy.quorum,
                            policy.quorum_key,
                            show_duration(policy.grace),
                            policy.grace_key
                        )
                    } else {
                        policy
                            .cut_at
                            .as_ref()
                            .map(|(_, why)| why.clone())
                            .unwrap_or_default()
                    });
                    break;
                }
            },
        };
        let Some((i, outcome)) = next else { break };
        if answered(&outcome) {
            answers += 1;
            if answers >= quorum && grace_ends.is_none() {
                grace_ends = Some(Instant::now() + policy.grace);
            }
        }
        outcomes[i] = Some(outcome);
    }
    // Dropping the rest cancels them: their requests end with them.
    drop(pending);
    outcomes
        .into_iter()
        .map(|o| match o {
            Some(outcome) => Ended::Done(outcome),
            None => Ended::Cut(cut_reason.clone().unwrap_or_default()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(quorum: Quorum, grace_ms: u64) -> Policy {
        Policy {
            quorum,
            grace: Duration::from_millis(grace_ms),
            quorum_key: "fan_out".into(),
            grace_key: "fan_out".into(),
            cut_at: None,
        }
    }

    async fn after(ms: u64, ok: bool) -> bool {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        ok
    }

    #[tokio::test(start_paused = true)]
    async fn once_a_majority_answered_the_rest_get_the_grace_then_are_cut() {
        let started = Instant::now();
        let calls = vec![
            Box::pin(after(100, true)) as std::pin::Pin<Box<dyn Future<Output = bool>>>,
            Box::pin(after(200, true)),
            Box::pin(after(300, true)),
            Box::pin(after(900, true)),
            Box::pin(after(1_000_000, true)),
        ];
        let ended = gather(calls, &policy(Quorum::Majority, 1000), |ok| *ok).await;
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(1300),
            "third answer + grace"
        );
        assert!(matches!(ended[3], Ended::Done(true)), "in within the grace");
        let Ended::Cut(reason) = &ended[4] else {
            panic!("{ended:?}")
        };
        assert!(
            reason.contains("4 of 5 calls had answered (quorum = majority, fan_out.quorum)")
                && reason.contains("straggler_grace = 1s"),
            "{reason}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failures_do_not_count_toward_the_quorum() {
        let started = Instant::now();
        let calls = vec![
            Box::pin(after(10, false)) as std::pin::Pin<Box<dyn Future<Output = bool>>>,
            Box::pin(after(20, false)),
            Box::pin(after(500, true)),
        ];
        let ended = gather(calls, &policy(Quorum::Majority, 0), |ok| *ok).await;
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        assert!(ended.iter().all(|e| matches!(e, Ended::Done(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn all_waits_for_everyone_until_the_cut_time() {
        let mut p = policy(Quorum::All, 0);
        p.cut_at = Some((
            Instant::now() + Duration::from_secs(5),
            "the merge's time".into(),
        ));
        let calls = vec![
            Box::pin(after(10, true)) as std::pin::Pin<Box<dyn Future<Output = bool>>>,
            Box::pin(after(4_000, true)),
            Box::pin(after(60_000, true)),
        ];
        let started = Instant::now();
        let ended = gather(calls, &p, |ok| *ok).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert!(matches!(ended[1], Ended::Done(true)));
        assert!(matches!(&ended[2], Ended::Cut(r) if r == "the merge's time"));
    }
}
