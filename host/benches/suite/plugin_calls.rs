//! Instantiate + call, per shipped strategy plugin, in the bench process:
//! the default plugins.toml's plugins loaded (from the compile cache after
//! the first time), each called on a fresh sandboxed instance as a run
//! calls it — selectors with the question, prompters with a plan of five
//! seats, synthesizers with five answers. Model calls a plugin makes
//! through `host.complete` are answered at once by `Canned`, so the figures
//! are the plugin's own cost plus the host's plugin layer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chorus::config::Loaded;
use chorus::llm::{ChatRequest, Completion, Llm, ModelInfo, Reply, Usage};
use chorus::plugins::{Budget, HostServices, Kind, Plan, Registry, Request, Seat};
use futures::future::BoxFuture;
use serde_json::json;

/// One plugin's timings, sorted; or why it could not be measured.
pub struct Timed {
    pub plugin: String,
    pub kind: Kind,
    pub samples: Result<Vec<Duration>, String>,
}

/// What every model answers: as long as a typical short answer.
const ANSWER: &str = "The answer is 42. A sentence or two of reasoning follows, as models \
                      give, for the synthesizer to merge with the others.";

fn answered(id: u32, label: String, model: String) -> Completion {
    Completion {
        id: Some(id),
        label,
        model: model.clone(),
        latency_ms: 1,
        attempts: 1,
        queued_ms: None,
        ttft_ms: None,
        outcome: Ok(Reply {
            content: Arc::new(ANSWER.to_owned()),
            served_by: model,
            finish_reason: Some("stop".into()),
            usage: Some(Usage {
                prompt_tokens: 40,
                completion_tokens: 30,
                cost: Some(0.0005),
                ..Usage::default()
            }),
            format_sent: Default::default(),
            citations: Vec::new(),
            tool_calls: Vec::new(),
        }),
    }
}

struct Canned {
    models: Vec<ModelInfo>,
}

impl HostServices for Canned {
    fn complete(
        &self,
        _plugin: &str,
        requests: Vec<ChatRequest>,
    ) -> BoxFuture<'_, Vec<Completion>> {
        let completions = requests
            .into_iter()
            .zip(100..)
            .map(|(request, id)| answered(id, request.label, request.model))
            .collect();
        Box::pin(std::future::ready(completions))
    }

    fn progress(&self, _plugin: &str, _message: String) {}

    fn models(&self) -> Vec<ModelInfo> {
        self.models.clone()
    }

    fn budget(&self) -> Budget {
        Budget {
            calls_left: 64,
            cost_left: None,
            time_left: Duration::from_secs(600),
        }
    }
}

/// Loads the default configuration's plugins with `cache_dir` as the
/// compile cache and times `calls` calls of each.
pub async fn measure(cache_dir: &std::path::Path, calls: usize) -> Vec<Timed> {
    let text = include_str!("../../../plugins.toml").replace(
        "[cache]\nenabled = true",
        &format!("[cache]\nenabled = true\ndir = \"{}\"", cache_dir.display()),
    );
    let loaded = Loaded::parse(&text, "plugins.toml", ".".into()).expect("the default config");
    let registry = Registry::load(&loaded).expect("the default plugins load");
    let llm = Llm::new(&loaded).expect("the default providers");
    let host: Arc<dyn HostServices> = Arc::new(Canned {
        models: llm.catalog(),
    });
    let panel: Vec<String> = llm.models().keys().take(5).cloned().collect();
    let request = Request {
        run_id: "0192f0c0-0000-7000-8000-000000000000".into(),
        pipeline: "ask".into(),
        prompt: "Which is better for a small team, a monorepo or many repositories?".into(),
        options: json!({}),
        attachments: Vec::new(),
        tools: None,
    };
    let plan = Plan {
        panel: panel
            .iter()
            .map(|model| Seat {
                model: model.clone(),
                sampling: Default::default(),
            })
            .collect(),
        synthesizers: panel[..2].to_vec(),
        notes: vec![],
    };
    let completions: Vec<Completion> = panel
        .iter()
        .zip(0..)
        .map(|(model, id)| answered(id, "panel".into(), model.clone()))
        .collect();

    let mut timed = Vec::new();
    for plugin in registry.iter() {
        let mut samples = Vec::with_capacity(calls);
        let mut error = None;
        for _ in 0..calls {
            let started = Instant::now();
            let outcome = match plugin.kind {
                Kind::Selector => plugin.select(host.clone(), &request).await.map(drop),
                Kind::Prompter => plugin.prompt(host.clone(), &request, &plan).await.map(drop),
                Kind::Synthesizer => plugin
                    .synthesize(host.clone(), &request, &plan, &completions)
                    .await
                    .map(drop),
            };
            samples.push(started.elapsed());
            if let Err(e) = outcome {
                error = Some(e.to_string());
                break;
            }
        }
        samples.sort();
        timed.push(Timed {
            plugin: plugin.name.clone(),
            kind: plugin.kind,
            samples: error.map_or(Ok(samples), Err),
        });
    }
    timed
}
