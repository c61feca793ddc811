//! The store on a real SQLite file in a temporary directory: written as a
//! run goes, read back whole, listed, pruned, shared, and honest when its
//! queue overflows or its schema is newer than this chorus.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::sqlite::{schema, texts};
use super::*;
use crate::events::Event;
use crate::llm::{ChatRequest, Message, Role, Sampling};
use crate::plugins::{Plan, Request, Seat};
use crate::record::{AnswerKind, CallRecord, RunRecord, RunStatus, Totals};

fn retention() -> Retention {
    Retention {
        max_runs: 1000,
        max_age: None,
        max_bytes: 1 << 30,
    }
}

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open_at(&dir.path().join("data/runs.sqlite3"), retention()).unwrap()
}

/// Where a test's store is: a SQLite file, or a database of its own in the
/// test process's throwaway PostgreSQL.
pub(super) enum Place {
    File(tempfile::TempDir),
    Database(String),
}

impl Place {
    fn file() -> Self {
        Self::File(tempfile::tempdir().unwrap())
    }

    /// `None` when PostgreSQL is not installed (and not required).
    fn database() -> Option<Self> {
        super::pg_cluster::shared().map(|cluster| Self::Database(cluster.database()))
    }

    /// A handle on the store (another one each call, sharing its runs).
    fn open(&self) -> Store {
        match self {
            Place::File(dir) => open(dir),
            Place::Database(url) => {
                Store::open_database(Target::new(url, None).unwrap(), retention()).unwrap()
            }
        }
    }
}

/// Each behaviour, against each backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Place::file()).await
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    if let Some(place) = super::Place::database() {
                        super::$name(place).await
                    }
                }
            )*
        }
    };
}

on_both_backends!(
    a_run_is_on_disk_while_it_goes_and_whole_when_it_ends,
    runs_that_never_end_are_interrupted_and_dropped_ones_cancelled,
    a_failed_run_keeps_its_error_and_a_refused_one_leaves_no_trace,
    ids_resolve_in_full_by_unique_prefix_or_as_last,
    listings_are_newest_first_paged_and_filtered,
    retention_removes_the_oldest_runs_by_count_age_and_size,
    two_handles_on_one_store_see_each_others_runs,
);

#[path = "tests_clients.rs"]
mod clients;

#[path = "tests_tasks.rs"]
mod tasks;

#[path = "tests_responses.rs"]
mod responses;

#[path = "tests_attachments.rs"]
mod attachments;
#[path = "tests_batches.rs"]
pub(super) mod batches;
#[path = "tests_experiments.rs"]
mod experiments;
#[path = "tests_feedback.rs"]
mod feedback;

/// A run of `n` panel calls, as its events and its final record.
pub(super) struct Fixture {
    pub(super) request: Arc<Request>,
    pub(super) plan: Arc<Plan>,
    pub(super) requests: Vec<Arc<ChatRequest>>,
    pub(super) calls: Vec<Arc<CallRecord>>,
    pub(super) record: Arc<RunRecord>,
}

pub(super) fn fixture(prompt: &str, pipeline: &str, n: u32) -> Fixture {
    let run_id = uuid::Uuid::now_v7().to_string();
    let request = Arc::new(Request {
        run_id: run_id.clone(),
        pipeline: pipeline.into(),
        prompt: prompt.into(),
        options: json!({"agents": 2}),
        attachments: Vec::new(),
        tools: None,
    });
    let plan = Arc::new(Plan {
        panel: (0..n)
            .map(|i| Seat {
                model: format!("m{i}"),
                sampling: Sampling::default(),
            })
            .collect(),
        synthesizers: vec!["synth".into()],
        notes: vec![],
    });
    let requests = (0..n)
        .map(|i| {
            Arc::new(ChatRequest {
                label: "panel".into(),
                model: format!("m{i}"),
                messages: vec![Message {
                    role: Role::User,
                    content: prompt.into(),
                }],
                sampling: Sampling::default(),
                // The second asks for JSON, and its provider was asked.
                response_format: (i == 1).then_some(crate::llm::ResponseFormat::JsonObject),
                attachments: Default::default(),
                placed: Vec::new(),
                tools: None,
            })
        })
        .collect();
    let calls: Vec<Arc<CallRecord>> = (0..n)
        .map(|i| {
            Arc::new(CallRecord {
                id: i,
                stage: "fan-out".into(),
                label: "panel".into(),
                model: format!("m{i}"),
                status: "ok".into(),
                latency_ms: 100 + i,
                attempts: 1,
                // The second waited for a permit; each had its first token.
                queued_ms: (i == 1).then_some(40),
                ttft_ms: Some(50 + i),
                prompt_tokens: Some(10),
                completion_tokens: Some(20),
                reasoning_tokens: Some(5),
                cached_tokens: (i == 1).then_some(8),
                cache_write_tokens: (i == 1).then_some(2),
                cost_usd: Some(0.001),
                // The second's provider reported no usage.
                tokens_estimated: i == 1,
                reply: Some(Arc::new(format!("answer {i} to {prompt}"))),
                format_sent: (i == 1).then(|| "json-object".to_owned()),
                fallback_from: if i == 1 {
                    vec!["m0: HTTP 402: out of credit".to_owned()]
                } else {
                    Vec::new()
                },
                citations: vec![crate::llm::Citation {
                    url: format!("https://source{i}.example/"),
                    title: Some(format!("Source {i}")),
                    cited: Some("answer".to_owned()),
                    start_index: Some(0),
                    end_index: Some(6),
                }],
                ..CallRecord::default()
            })
        })
        .collect();
    let owned: Vec<CallRecord> = calls.iter().map(|c| CallRecord::clone(c)).collect();
    let record = Arc::new(RunRecord {
        experiment: None,
        run_id,
        pipeline: pipeline.into(),
        kind: AnswerKind::Synthesis,
        summary: format!("Synthesis of {n} of {n} answers."),
        answer: format!("The answer to {prompt}"),
        notes: vec!["a note".into()],
        usage: Totals::of(&owned),
        calls: owned,
        elapsed_ms: 1234,
        details: Some(json!({"votes": 3})),
        follow_up_of: None,
        resynthesis_of: None,
        sources: Vec::new(),
        attachments: Vec::new(),
    });
    Fixture {
        request,
        plan,
        requests,
        calls,
        record,
    }
}

impl Fixture {
    fn start(&self, recorder: &Recorder, finished_calls: usize) {
        let watch = recorder.watcher();
        watch(Event::Started(self.request.clone()));
        watch(Event::Planned(self.plan.clone()));
        for (i, request) in self.requests.iter().enumerate() {
            watch(Event::CallStarted {
                id: u32::try_from(i).unwrap(),
                stage: Arc::from("fan-out"),
                request: request.clone(),
            });
        }
        for call in self.calls.iter().take(finished_calls) {
            watch(Event::CallFinished(call.clone()));
        }
    }

    pub(super) fn id(&self) -> &str {
        &self.request.run_id
    }
}

async fn record(store: &Store, fixture: &Fixture) {
    let mut recorder = store.recorder(Links::default(), Duration::from_secs(60));
    fixture.start(&recorder, fixture.calls.len());
    recorder.finish(Ok(&fixture.record)).await.unwrap();
}

fn found(store: &Store, id: &str, with_requests: bool) -> StoredRun {
    match store.find(id, with_requests).unwrap() {
        Lookup::Found(run) => run,
        other => panic!("run {id}: {other:?}"),
    }
}

async fn a_run_is_on_disk_while_it_goes_and_whole_when_it_ends(place: Place) {
    let store = place.open();
    let run = fixture("Why is the sky blue?", "ask", 3);
    let mut recorder = store.recorder(
        Links {
            experiment: None,
            follow_up_of: Some("earlier".into()),
            resynthesis_of: None,
            client: Some("alice".into()),
            attachments: crate::attach::Attachments::new(vec![crate::attach::Attachment {
                id: 1,
                name: "diagram.png".into(),
                kind: crate::attach::Kind::Image,
                mime: "image/png".into(),
                bytes: 41_000,
                sha256: "ab".repeat(32),
                shape: Default::default(),
                body: crate::attach::Body::Base64(Arc::from("AAAA")),
            }]),
        },
        Duration::from_secs(60),
    );
    run.start(&recorder, 2);
    store.flush().await.unwrap();

    let partial = found(&store, run.id(), true);
    assert_eq!(partial.status, RunStatus::Running);
    assert_eq!(partial.prompt, "Why is the sky blue?");
    assert_eq!(partial.options, json!({"agents": 2}));
    assert_eq!(partial.follow_up_of.as_deref(), Some("earlier"));
    assert_eq!(partial.client.as_deref(), Some("alice"));
    assert_eq!(
        partial.attachments.len(),
        1,
        "names, types, sizes and hashes kept"
    );
    assert_eq!(partial.attachments[0].name, "diagram.png");
    assert_eq!(partial.attachments[0].bytes, 41_000);
    assert_eq!(
        partial.plan.as_ref().unwrap()["synthesizers"],
        json!(["synth"])
    );
    let statuses: Vec<&str> = partial
        .calls
        .iter()
        .map(|c| c.call.status.as_str())
        .collect();
    assert_eq!(statuses, ["ok", "ok", "running"]);
    assert_eq!(
        partial.calls[1].call.reply.as_deref().map(String::as_str),
        Some("answer 1 to Why is the sky blue?")
    );
    let request = partial.calls[2].request.as_ref().unwrap();
    assert_eq!(request["messages"][0]["content"], "Why is the sky blue?");
    assert_eq!(request["messages"][0]["role"], "user");
    assert!(request.get("response_format").is_none(), "{request}");
    let asked = partial.calls[1].request.as_ref().unwrap();
    assert_eq!(asked["response_format"], json!({"type": "json_object"}));
    assert_eq!(
        partial.calls[1].call.format_sent.as_deref(),
        Some("json-object")
    );
    assert_eq!(partial.calls[0].call.format_sent, None);
    assert_eq!(
        partial.calls[1].call.fallback_from,
        ["m0: HTTP 402: out of credit"]
    );
    assert!(partial.calls[0].call.fallback_from.is_empty());
    let cited = &partial.calls[1].call.citations;
    assert_eq!(cited.len(), 1, "each call's web citations are kept");
    assert_eq!(cited[0].url, "https://source1.example/");
    assert_eq!(cited[0].title.as_deref(), Some("Source 1"));
    assert_eq!(cited[0].cited.as_deref(), Some("answer"));
    let rebuilt = crate::record::sources::merged(
        &partial
            .calls
            .iter()
            .map(|c| c.call.clone())
            .collect::<Vec<_>>(),
    );
    let cited_urls: Vec<String> = partial
        .calls
        .iter()
        .flat_map(|c| c.call.citations.iter().map(|c| c.url.clone()))
        .collect();
    assert!(cited_urls.len() >= 2, "{cited_urls:?}");
    let rebuilt: Vec<String> = rebuilt.into_iter().map(|s| s.url).collect();
    assert_eq!(rebuilt, cited_urls, "one source per call here, in order");
    let cache = |i: usize| {
        let call = &partial.calls[i].call;
        (call.cached_tokens, call.cache_write_tokens)
    };
    assert_eq!(cache(1), (Some(8), Some(2)), "the prompt cache's tokens");
    let guessed: Vec<bool> = partial
        .calls
        .iter()
        .map(|c| c.call.tokens_estimated)
        .collect();
    assert_eq!(guessed[..2], [false, true], "estimated tokens stay marked");
    assert!(partial.usage.tokens_estimated, "and so do the run's totals");
    assert_eq!(cache(0), (None, None));
    let timing = |i: usize| {
        let call = &partial.calls[i].call;
        (call.queued_ms, call.ttft_ms)
    };
    assert_eq!(timing(0), (None, Some(50)), "time to first token is kept");
    assert_eq!(timing(1), (Some(40), Some(51)), "and the wait for a permit");
    assert!(
        (partial.usage.cost_usd.unwrap() - 0.002).abs() < 1e-12,
        "so far"
    );

    recorder.finish(Ok(&run.record)).await.unwrap();
    let whole = found(&store, run.id(), false);
    assert_eq!(whole.status, RunStatus::Done);
    assert_eq!(whole.kind, Some(AnswerKind::Synthesis));
    assert_eq!(
        whole.answer.as_deref(),
        Some("The answer to Why is the sky blue?")
    );
    assert_eq!(whole.notes, ["a note"]);
    assert_eq!(whole.details, Some(json!({"votes": 3})));
    assert_eq!(whole.elapsed_ms, Some(1234));
    assert_eq!(whole.usage.completion_tokens, 60);
    assert!(
        whole
            .calls
            .iter()
            .all(|c| c.call.status == "ok" && c.request.is_none())
    );
    let shown = serde_json::to_value(&whole).unwrap();
    assert_eq!(shown["status"], "done");
    assert_eq!(
        shown["calls"][2]["reply"],
        "answer 2 to Why is the sky blue?"
    );
    assert!(shown["started_at"].as_str().unwrap().ends_with('Z'));

    // One call alone, by the run's id and its number.
    match store.call(run.id(), 1, true).unwrap() {
        CallLookup::Found(call) => {
            assert_eq!(
                call.call.reply.as_deref().map(String::as_str),
                Some("answer 1 to Why is the sky blue?")
            );
            assert_eq!(call.request.unwrap()["model"], "m1");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.call(run.id(), 9, false).unwrap(),
        CallLookup::NoSuchCall { calls: 3 }
    ));
    assert!(matches!(
        store.call("no-such-run", 0, false).unwrap(),
        CallLookup::UnknownRun
    ));
}

async fn runs_that_never_end_are_interrupted_and_dropped_ones_cancelled(place: Place) {
    let store = place.open();
    let crashed = fixture("crash", "ask", 2);
    let recorder = store.recorder(Links::default(), Duration::ZERO);
    crashed.start(&recorder, 1);
    // A crash: the recorder is never finished nor dropped.
    std::mem::forget(recorder);
    let cancelled = fixture("cancel", "ask", 2);
    let recorder = store.recorder(Links::default(), Duration::from_secs(60));
    cancelled.start(&recorder, 1);
    drop(recorder);
    store.flush().await.unwrap();

    let run = found(&store, crashed.id(), false);
    assert_eq!(run.status, RunStatus::Interrupted);
    assert_eq!(
        run.calls[0].call.reply.as_deref().map(String::as_str),
        Some("answer 0 to crash")
    );
    assert_eq!(run.calls[1].call.status, "unfinished");
    let run = found(&store, cancelled.id(), false);
    assert_eq!(run.status, RunStatus::Cancelled);
    assert!((run.calls[0].call.cost_usd.unwrap() - 0.001).abs() < 1e-12);
    assert_eq!(
        run.usage.cost_usd, None,
        "a call cut off midway may have been billed: the run's cost is unknown, not $0.001"
    );
}

async fn a_failed_run_keeps_its_error_and_a_refused_one_leaves_no_trace(place: Place) {
    let store = place.open();
    let run = fixture("q", "ask", 2);
    let mut recorder = store.recorder(Links::default(), Duration::from_secs(60));
    run.start(&recorder, 2);
    recorder
        .finish(Err("plugin `synthesize` trapped".into()))
        .await
        .unwrap();
    let failed = found(&store, run.id(), false);
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.error.as_deref(), Some("plugin `synthesize` trapped"));
    assert_eq!(failed.calls.len(), 2);

    let mut refused = store.recorder(Links::default(), Duration::from_secs(60));
    refused
        .finish(Err("the prompt is empty".into()))
        .await
        .unwrap();
    assert_eq!(store.list(&Query::default()).unwrap().runs.len(), 1);
}

async fn ids_resolve_in_full_by_unique_prefix_or_as_last(place: Place) {
    let store = place.open();
    let first = fixture("one", "ask", 1);
    let second = fixture("two", "ask", 1);
    record(&store, &first).await;
    record(&store, &second).await;

    assert_eq!(found(&store, first.id(), false).prompt, "one");
    assert_eq!(found(&store, "last", false).prompt, "two");
    // uuid v7 ids share their leading (time) digits: a short prefix is
    // ambiguous, the distinct tail is not.
    let common = first
        .id()
        .chars()
        .zip(second.id().chars())
        .take_while(|(a, b)| a == b)
        .count();
    match store.find(&first.id()[..common], false).unwrap() {
        Lookup::Ambiguous(ids) => assert_eq!(ids.len(), 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(found(&store, &second.id()[..=common], false).prompt, "two");
    assert!(matches!(
        store.find("ffffffff", false).unwrap(),
        Lookup::Unknown
    ));
    assert!(matches!(store.find("", false).unwrap(), Lookup::Unknown));
}

async fn listings_are_newest_first_paged_and_filtered(place: Place) {
    let store = place.open();
    for i in 0..25 {
        let pipeline = if i % 5 == 0 { "heavy" } else { "ask" };
        let prompt = if i == 7 {
            "What does 100% mean?\nSecond line".to_owned()
        } else {
            format!("question {i}")
        };
        record(&store, &fixture(&prompt, pipeline, 1)).await;
    }
    let page = store
        .list(&Query {
            limit: 10,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(page.runs.len(), 10);
    assert_eq!(page.runs[0].prompt, "question 24");
    let next = store
        .list(&Query {
            limit: 10,
            before: page.next,
            ..Query::default()
        })
        .unwrap();
    assert_eq!(next.runs[0].prompt, "question 14");
    let last = store
        .list(&Query {
            limit: 10,
            before: next.next,
            ..Query::default()
        })
        .unwrap();
    assert_eq!((last.runs.len(), last.next), (5, None));

    let heavy = store
        .list(&Query {
            pipeline: Some("heavy".into()),
            ..Query::default()
        })
        .unwrap();
    assert_eq!(heavy.runs.len(), 5);
    let text = |t: &str| {
        store
            .list(&Query {
                text: Some(t.into()),
                ..Query::default()
            })
            .unwrap()
            .runs
    };
    let percent = text("100%");
    assert_eq!(percent.len(), 1);
    assert_eq!(percent[0].prompt, "What does 100% mean? …");
    assert_eq!(
        text("THE ANSWER TO question 3").len(),
        1,
        "answers match too"
    );
    assert_eq!(text("_").len(), 0, "`_` is not a wildcard");
    let future = store
        .list(&Query {
            since: Some(now_ms() + 60_000),
            ..Query::default()
        })
        .unwrap();
    assert!(future.runs.is_empty());
    let summary = &heavy.runs[0];
    assert_eq!(summary.kind, Some(AnswerKind::Synthesis));
    assert_eq!(summary.cost_usd, Some(0.001));
}

async fn retention_removes_the_oldest_runs_by_count_age_and_size(place: Place) {
    let store = place.open();
    let mut runs = Vec::new();
    for i in 0..6 {
        let run = fixture(&format!("q{i}"), "ask", 2);
        record(&store, &run).await;
        runs.push(run);
    }
    // A run still in progress is never removed.
    let live = fixture("live", "ask", 1);
    let recorder = store.recorder(Links::default(), Duration::from_secs(3 * 3600));
    live.start(&recorder, 0);
    store.flush().await.unwrap();

    let pruned = store
        .prune(&Retention {
            max_runs: 4,
            ..retention()
        })
        .unwrap();
    assert_eq!((pruned.removed, pruned.kept), (3, 4));
    assert!(matches!(
        store.find(runs[2].id(), false).unwrap(),
        Lookup::Unknown
    ));
    assert!(matches!(
        store.find(runs[3].id(), false).unwrap(),
        Lookup::Found(_)
    ));

    let size = pruned.kept_bytes / 3;
    let pruned = store
        .prune(&Retention {
            max_bytes: size * 2 + size / 2,
            ..retention()
        })
        .unwrap();
    assert_eq!(pruned.removed, 1, "{pruned:?}");
    assert!(pruned.removed_bytes > 0);

    let aged = store
        .prune_at(
            &Retention {
                max_age: Some(Duration::from_secs(3600)),
                ..retention()
            },
            now_ms() + 7_200_000,
        )
        .unwrap();
    assert_eq!(
        aged.removed, 2,
        "every finished run is two hours old by then"
    );
    let left = store.list(&Query::default()).unwrap().runs;
    assert_eq!(left.len(), 1, "the live run is kept");
    assert_eq!(left[0].prompt, "live");
    drop(recorder);
}

async fn two_handles_on_one_store_see_each_others_runs(place: Place) {
    let (a, b) = (place.open(), place.open());
    let (one, two) = (fixture("from a", "ask", 2), fixture("from b", "ask", 2));
    let (ra, rb) = tokio::join!(record(&a, &one), record(&b, &two));
    let _ = (ra, rb);
    assert_eq!(found(&a, two.id(), false).prompt, "from b");
    assert_eq!(found(&b, one.id(), false).prompt, "from a");
    assert_eq!(a.list(&Query::default()).unwrap().runs.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_queue_drops_events_but_never_the_end_of_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    let store = Store::open_with_queue(&path, retention(), 4).unwrap();
    // Another process holds the write lock: the writer waits, the queue fills.
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let run = fixture("busy", "ask", 20);
    let mut recorder = store.recorder(Links::default(), Duration::from_secs(60));
    run.start(&recorder, 20);
    let release = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(300));
        blocker.execute_batch("COMMIT").unwrap();
    });
    recorder.finish(Ok(&run.record)).await.unwrap();
    release.await.unwrap();

    let kept = found(&store, run.id(), true);
    assert_eq!(kept.status, RunStatus::Done);
    assert_eq!(kept.calls.len(), 20, "the end filled in every call");
    assert!(kept.calls.iter().all(|c| c.call.reply.is_some()));
    assert!(
        kept.calls.iter().any(|c| c.request.is_none()),
        "some requests were dropped with their events"
    );
    let conn = schema::open_reader(&path).unwrap();
    let lost: i64 = conn
        .query_row("SELECT lost_events FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(lost > 0);
}

#[test]
fn a_store_from_a_newer_chorus_is_refused_and_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    drop(open(&dir));
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let error = Store::open_at(&path, retention())
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("schema version 99"), "{error}");
    assert!(
        error.contains(&format!("this chorus knows ({})", schema::version())),
        "{error}"
    );

    let garbage = dir.path().join("garbage.sqlite3");
    std::fs::write(&garbage, b"not a database at all, not at all").unwrap();
    let error = Store::open_at(&garbage, retention())
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("garbage.sqlite3"), "{error}");
}

#[cfg(unix)]
#[test]
fn the_store_is_private_to_its_user() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let path = store.path().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
}

#[tokio::test]
async fn in_memory_runs_are_bounded_and_readable_the_same_way() {
    let limits = crate::config::Limits {
        max_runs_kept: 2,
        ..Default::default()
    };
    let store = Store::in_memory(&limits, "[store] enabled = false");
    assert!(store.describe().contains("enabled = false"));
    let runs: Vec<Fixture> = (0..3)
        .map(|i| fixture(&format!("q{i}"), "ask", 2))
        .collect();
    for run in &runs {
        record(&store, run).await;
    }
    assert!(matches!(
        store.find(runs[0].id(), false).unwrap(),
        Lookup::Unknown
    ));
    let kept = found(&store, runs[2].id(), false);
    assert_eq!(kept.answer.as_deref(), Some("The answer to q2"));
    assert_eq!(
        kept.calls[1].call.reply.as_deref().map(String::as_str),
        Some("answer 1 to q2")
    );
    assert_eq!(kept.plan.as_ref().unwrap()["panel"][1]["model"], "m1");
    let listed = store.list(&Query::default()).unwrap().runs;
    assert_eq!(listed[0].prompt, "q2");
    assert!(matches!(
        store.prune(&retention()),
        Err(StoreError::Disabled)
    ));
}

#[tokio::test]
async fn long_requests_and_replies_are_kept_whole_counted_and_removed_with_their_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    // Past texts::LONG: kept in the `texts` table, written in place.
    let prompt = "é".repeat(texts::LONG);
    let long = fixture(&prompt, "ask", 2);
    record(&store, &long).await;
    let short = fixture("short", "ask", 2);
    record(&store, &short).await;

    let run = found(&store, long.id(), true);
    assert_eq!(
        run.calls[1].call.reply.as_deref().map(String::as_str),
        Some(format!("answer 1 to {prompt}").as_str())
    );
    let request = run.calls[0].request.as_ref().unwrap();
    assert_eq!(request["messages"][0]["content"], prompt.as_str());

    let path = store.path().unwrap().to_owned();
    let conn = schema::open(&path).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT COUNT(*) FROM texts"),
        4,
        "2 requests, 2 replies"
    );
    let bytes = |id: &str| -> i64 {
        conn.query_row("SELECT bytes FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .unwrap()
    };
    assert!(
        bytes(long.id()) > 4 * prompt.len() as i64,
        "a run's size counts its long texts"
    );

    // The end of a run writes unfinished calls again: no text is orphaned.
    let mut recorder = store.recorder(Links::default(), Duration::from_secs(60));
    long.start(&recorder, 0);
    recorder.finish(Ok(&long.record)).await.unwrap();
    assert_eq!(
        count("SELECT COUNT(*) FROM texts"),
        4,
        "nothing written twice"
    );

    let pruned = store
        .prune(&Retention {
            max_runs: 1,
            ..retention()
        })
        .unwrap();
    assert_eq!(pruned.removed, 1);
    assert_eq!(
        count("SELECT COUNT(*) FROM texts"),
        0,
        "removed with the run"
    );
    assert_eq!(found(&store, short.id(), false).calls.len(), 2);
}

#[tokio::test]
async fn a_version_1_store_is_migrated_and_its_runs_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.sqlite3");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(schema::V1).unwrap();
    conn.execute_batch(
        "PRAGMA user_version = 1;
         INSERT INTO runs (seq, id, pipeline, status, started_at, deadline_at, prompt, options)
         VALUES (1, 'old-run', 'ask', 'done', 0, 0, 'q', '{}');
         INSERT INTO calls (run_seq, id, stage, label, model, status, reply)
         VALUES (1, 0, 'fan-out', 'panel', 'm', 'ok', 'an old answer');",
    )
    .unwrap();
    drop(conn);

    let store = Store::open_at(&path, retention()).unwrap();
    let run = found(&store, "old-run", true);
    assert_eq!(
        run.calls[0].call.reply.as_deref().map(String::as_str),
        Some("an old answer")
    );
    let long = fixture(&"x".repeat(texts::LONG), "ask", 1);
    record(&store, &long).await;
    assert_eq!(found(&store, long.id(), true).calls.len(), 1);
}
