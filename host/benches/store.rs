//! The run store's numbers (run with `cargo bench --bench store`):
//! - the time to write one run — its events as they happen, then its end,
//!   which is what a run waits for — with a realistic payload (a 300-byte
//!   prompt, five 2 KB panel answers, a synthesis request that carries
//!   them, a 2 KB synthesis);
//! - the store's size per run;
//! - listing, searching and finding runs among 10,000.
//!
//! `CHORUS_BENCH_STORE=DIR` keeps the store in DIR (to time `chorus runs`
//! against it afterwards); otherwise a temporary directory is used.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chorus::events::Event;
use chorus::llm::{ChatRequest, Message, Role, Sampling};
use chorus::plugins::{Plan, Request, Seat};
use chorus::record::{AnswerKind, CallRecord, RunRecord, Totals};
use chorus::store::{Links, Lookup, Query, Retention, Store};

const PANEL: [&str; 5] = ["m1", "m2", "m3", "m4", "m5"];
const RUNS: usize = 10_000;

fn stats(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{label:<46} n={:<5} median {:>7.3} ms  mean {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms",
        samples.len(),
        ms(samples[samples.len() / 2]),
        ms(mean),
        ms(samples[samples.len() * 99 / 100]),
        ms(samples[samples.len() - 1])
    );
}

/// One run's events and record, like a default `ask` run.
struct Run {
    request: Arc<Request>,
    plan: Arc<Plan>,
    requests: Vec<Arc<ChatRequest>>,
    calls: Vec<Arc<CallRecord>>,
    record: Arc<RunRecord>,
}

fn run(i: usize) -> Run {
    let run_id = uuid::Uuid::now_v7().to_string();
    let prompt = format!(
        "Question {i}: compare the trade-offs of B-trees and LSM-trees for a write-heavy \
         workload with occasional range scans, and say which you would choose for a \
         time-series store that keeps 90 days of data. {}",
        "Be concrete. ".repeat(10)
    );
    let answer = |model: &str| {
        format!(
            "{model}: {}",
            "A considered paragraph of an answer. ".repeat(55)
        )
    };
    let user = |content: String| Message {
        role: Role::User,
        content,
    };
    let mut requests: Vec<Arc<ChatRequest>> = PANEL
        .iter()
        .map(|m| {
            Arc::new(ChatRequest {
                label: "panel".into(),
                model: (*m).into(),
                messages: vec![user(prompt.clone())],
                sampling: Sampling::default(),
                response_format: None,
                attachments: Default::default(),
                placed: Vec::new(),
                tools: None,
            })
        })
        .collect();
    let synthesis_prompt = PANEL
        .iter()
        .map(|m| answer(m))
        .collect::<Vec<_>>()
        .join("\n\n");
    requests.push(Arc::new(ChatRequest {
        label: "synthesis".into(),
        model: "synth".into(),
        messages: vec![
            Message {
                role: Role::System,
                content: "Merge the answers into one better answer.".into(),
            },
            user(format!("{prompt}\n\n{synthesis_prompt}")),
        ],
        sampling: Sampling::default(),
        response_format: None,
        attachments: Default::default(),
        placed: Vec::new(),
        tools: None,
    }));
    let calls: Vec<Arc<CallRecord>> = requests
        .iter()
        .enumerate()
        .map(|(id, request)| {
            Arc::new(CallRecord {
                id: id as u32,
                stage: if id < 5 { "fan-out" } else { "synthesize" }.into(),
                label: request.label.clone(),
                model: request.model.clone(),
                status: "ok".into(),
                latency_ms: 1500,
                attempts: 1,
                prompt_tokens: Some(120),
                completion_tokens: Some(450),
                cost_usd: Some(0.004),
                reply: Some(std::sync::Arc::new(answer(&request.model))),
                ..CallRecord::default()
            })
        })
        .collect();
    let owned: Vec<CallRecord> = calls.iter().map(|c| CallRecord::clone(c)).collect();
    let request = Arc::new(Request {
        run_id: run_id.clone(),
        pipeline: if i.is_multiple_of(4) { "heavy" } else { "ask" }.into(),
        prompt,
        options: serde_json::json!({}),
        attachments: Vec::new(),
        tools: None,
    });
    let record = Arc::new(RunRecord {
        experiment: None,
        run_id,
        pipeline: request.pipeline.clone(),
        kind: AnswerKind::Synthesis,
        summary: "Synthesis of 5 of 5 answers.".into(),
        answer: answer("synth"),
        notes: vec![],
        usage: Totals::of(&owned),
        calls: owned,
        elapsed_ms: 4200,
        details: None,
        follow_up_of: None,
        resynthesis_of: None,
        sources: Vec::new(),
        attachments: Vec::new(),
    });
    let plan = Arc::new(Plan {
        panel: PANEL
            .iter()
            .map(|m| Seat {
                model: (*m).into(),
                sampling: Sampling::default(),
            })
            .collect(),
        synthesizers: vec!["synth".into()],
        notes: vec![],
    });
    Run {
        request,
        plan,
        requests,
        calls,
        record,
    }
}

/// Writes `run` as a real one is written; returns how long its end waited.
async fn write(store: &Store, run: &Run) -> Duration {
    let mut recorder = store.recorder(Links::default(), Duration::from_secs(600));
    let watch = recorder.watcher();
    watch(Event::Started(run.request.clone()));
    watch(Event::Planned(run.plan.clone()));
    for (id, request) in run.requests.iter().enumerate().take(5) {
        watch(Event::CallStarted {
            id: id as u32,
            stage: Arc::from("fan-out"),
            request: request.clone(),
        });
    }
    for call in &run.calls[..5] {
        watch(Event::CallFinished(call.clone()));
    }
    watch(Event::CallStarted {
        id: 5,
        stage: Arc::from("synthesize"),
        request: run.requests[5].clone(),
    });
    watch(Event::CallFinished(run.calls[5].clone()));
    let started = Instant::now();
    recorder.finish(Ok(&run.record)).await.unwrap();
    started.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let kept = std::env::var_os("CHORUS_BENCH_STORE").map(PathBuf::from);
    let temporary = tempfile::tempdir().unwrap();
    let dir = kept.clone().unwrap_or_else(|| temporary.path().to_owned());
    let path = dir.join("runs.sqlite3");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let retention = Retention {
        max_runs: 1_000_000,
        max_age: None,
        max_bytes: u64::MAX / 2,
    };
    runtime.block_on(async {
        let store = Store::open_at(&path, retention.clone()).unwrap();
        let runs: Vec<Run> = (0..RUNS).map(run).collect();

        // One run at a time: what each run costs, and what its end waits.
        let mut whole = Vec::new();
        let mut ends = Vec::new();
        for run in &runs[..1000] {
            let started = Instant::now();
            ends.push(write(&store, run).await);
            whole.push(started.elapsed());
        }
        stats("write one run (events + end, sequential)", whole);
        stats("  of which the end a run waits for", ends);

        // Many at once, as a busy server writes them.
        let started = Instant::now();
        let mut rest = runs[1000..].iter();
        loop {
            let batch: Vec<&Run> = rest.by_ref().take(32).collect();
            if batch.is_empty() {
                break;
            }
            futures::future::join_all(batch.into_iter().map(|run| write(&store, run))).await;
        }
        let elapsed = started.elapsed();
        println!(
            "{:<46} {} runs in {:.2} s: {:.0} runs/s",
            "write runs 32 at a time",
            RUNS - 1000,
            elapsed.as_secs_f64(),
            (RUNS - 1000) as f64 / elapsed.as_secs_f64()
        );
        store.flush().await.unwrap();
        drop(store);

        // Size: the file once the WAL is folded in.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        drop(conn);
        let size = std::fs::metadata(&path).unwrap().len();
        println!(
            "{:<46} {:.1} MiB for {RUNS} runs: {:.1} KiB per run",
            "store size",
            size as f64 / 1048576.0,
            size as f64 / 1024.0 / RUNS as f64
        );

        // Reading among 10,000 runs.
        let store = Store::open_at(&path, retention).unwrap();
        let time = |label: &str, query: Query| {
            let samples: Vec<Duration> = (0..50)
                .map(|_| {
                    let started = Instant::now();
                    let page = store.list(&query).unwrap();
                    assert!(!page.runs.is_empty());
                    started.elapsed()
                })
                .collect();
            stats(label, samples);
        };
        time("list the newest 20", Query::default());
        time(
            "list 20 of one pipeline",
            Query {
                pipeline: Some("heavy".into()),
                ..Query::default()
            },
        );
        time(
            "search prompts and answers (--text)",
            Query {
                text: Some("question 17:".into()),
                ..Query::default()
            },
        );
        let target = runs[RUNS / 2].request.run_id.clone();
        let samples: Vec<Duration> = (0..50)
            .map(|_| {
                let started = Instant::now();
                let found = store.find(&target[..30], false).unwrap();
                assert!(matches!(found, Lookup::Found(_)));
                started.elapsed()
            })
            .collect();
        stats("find a run by prefix, with its calls", samples);
    });
    if let Some(dir) = kept {
        println!("store kept in {}", dir.display());
    }
}
