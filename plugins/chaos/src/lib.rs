//! Fault injection for chorus's own tests: a selector that misbehaves the way
//! its settings say. Not embedded in the chorus binary.
//!
//! `mode`: "ok" (behave: plan from `panel`/`synthesizers`), "loop" (spin
//! forever), "panic", "alloc" (grow memory without bound), "print" (write
//! `bytes` bytes to stdout and stderr, then behave), "empty" (an empty panel).

wit_bindgen::generate!({ world: "selector-plugin", path: "../../wit" });

use std::io::Write;

use chorus::strategy::types::{Plan, Request, Sampling, Seat};
use exports::chorus::strategy::selector::Guest;
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
}

struct Chaos;

impl Guest for Chaos {
    fn select(_request: Request, settings: String) -> Result<Plan, String> {
        let settings: Settings = serde_json::from_str(&settings).map_err(|e| e.to_string())?;
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
                Ok(plan(settings.panel, settings.synthesizers))
            }
            "empty" => Ok(plan(Vec::new(), settings.synthesizers)),
            "ok" => Ok(plan(settings.panel, settings.synthesizers)),
            other => Err(format!("unknown chaos mode `{other}`")),
        }
    }
}

fn plan(panel: Vec<String>, synthesizers: Vec<String>) -> Plan {
    let sampling = Sampling {
        temperature: None,
        top_p: None,
        max_tokens: None,
        seed: None,
    };
    Plan {
        panel: panel
            .into_iter()
            .map(|model| Seat { model, sampling })
            .collect(),
        synthesizers,
        notes: Vec::new(),
    }
}

export!(Chaos);
