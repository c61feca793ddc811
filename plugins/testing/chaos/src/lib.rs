//! Fault injection for chorus's own tests: a selector that misbehaves the way
//! its settings say. Built for the tests, never embedded in the chorus binary.
//!
//! `mode`: "ok" (behave: plan from `panel`/`synthesizers`), "loop" (spin
//! forever), "panic", "alloc" (grow memory without bound), "print" (write
//! `bytes` bytes to stdout and stderr, then behave), "empty" (an empty panel),
//! "sleep" (sleep `seconds`, then behave), "clock" (behave, with what the
//! clocks said in the plan's notes), "chatter" (call host.log and
//! host.progress `count` times each, then behave), "batch" (ask host.complete
//! for `count` requests at once, then behave), "budget" (behave, with
//! host.budget() in the notes), "answer-call" (ask host.complete-answer
//! of the first panel model, a selector trying to write into the answer,
//! then behave).

kit::plugin!(selector, Chaos);

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kit::wit::host;
use kit::wit::types::{JsonSchema, LogLevel, Plan, Request, ResponseFormat, Role};
use serde::Deserialize;

#[derive(Deserialize)]
struct Settings {
    mode: String,
    #[serde(default)]
    panel: Vec<String>,
    #[serde(default)]
    synthesizers: Vec<String>,
    #[serde(default)]
    bytes: usize,
    #[serde(default)]
    seconds: u64,
    #[serde(default)]
    count: u32,
}

struct Chaos;

impl Guest for Chaos {
    fn validate_settings(settings: String) -> Result<(), String> {
        serde_json::from_str::<Settings>(&settings)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn select(_request: Request, settings: String) -> Result<Plan, String> {
        let settings: Settings = serde_json::from_str(&settings).map_err(|e| e.to_string())?;
        let plan = || {
            kit::guest::plan(
                settings.panel.clone(),
                settings.synthesizers.clone(),
                Vec::new(),
            )
        };
        match settings.mode.as_str() {
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "panic" => panic!("chaos plugin panicked on purpose"),
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "print" => {
                let line = [b'x'; 1023];
                for _ in 0..settings.bytes / 1024 {
                    let _ = std::io::stdout().write_all(&line);
                    let _ = std::io::stdout().write_all(b"\n");
                    let _ = std::io::stderr().write_all(&line);
                    let _ = std::io::stderr().write_all(b"\n");
                }
                Ok(plan())
            }
            "sleep" => {
                std::thread::sleep(Duration::from_secs(settings.seconds));
                Ok(plan())
            }
            "clock" => {
                let wall = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                let started = Instant::now();
                let mut plan = plan();
                plan.notes.push(format!(
                    "wall clock: {wall}; a reading later: {:?}",
                    started.elapsed()
                ));
                Ok(plan)
            }
            "chatter" => {
                for i in 0..settings.count {
                    host::log(LogLevel::Warn, &format!("chatter {i}"));
                    host::progress(&format!("chatter {i}"));
                }
                Ok(plan())
            }
            "batch" => {
                let model = settings.panel.first().cloned().unwrap_or_default();
                let request = kit::guest::request(
                    "batch",
                    &model,
                    vec![kit::guest::message(Role::User, "hi")],
                    kit::guest::NO_SAMPLING,
                );
                let requests = vec![request; settings.count as usize];
                let answered = kit::guest::complete(&requests)
                    .iter()
                    .filter(|r| r.is_ok())
                    .count();
                let mut plan = plan();
                plan.notes.push(format!("{answered} of the batch answered"));
                Ok(plan)
            }
            "answer-call" => {
                let model = settings.panel.first().cloned().unwrap_or_default();
                let request = kit::guest::request(
                    "selector's answer call",
                    &model,
                    vec![kit::guest::message(Role::User, "hi")],
                    kit::guest::NO_SAMPLING,
                );
                let said = kit::guest::text_of(&host::complete_answer(&request));
                let mut plan = plan();
                plan.notes
                    .push(format!("the selector's answer call: {said:?}"));
                Ok(plan)
            }
            "bad-format" => {
                let model = settings.panel.first().cloned().unwrap_or_default();
                let mut request = kit::guest::request(
                    "bad format",
                    &model,
                    vec![kit::guest::message(Role::User, "hi")],
                    kit::guest::NO_SAMPLING,
                );
                request.response_format = Some(ResponseFormat::JsonSchema(JsonSchema {
                    name: "my schema".to_owned(),
                    schema: "{\"type\": \"object\"}".to_owned(),
                    strict: true,
                }));
                kit::guest::complete(&[request]);
                Ok(plan())
            }
            "budget" => {
                let budget = host::budget();
                let mut plan = plan();
                plan.notes.push(format!(
                    "budget: {} calls left, cost left {:?}, {} ms left",
                    budget.calls_left, budget.cost_left, budget.time_left_ms
                ));
                Ok(plan)
            }
            "empty" => Ok(kit::guest::plan(
                Vec::new(),
                settings.synthesizers,
                Vec::new(),
            )),
            "ok" => Ok(plan()),
            other => Err(format!("unknown chaos mode `{other}`")),
        }
    }
}
