//! A mock OpenAI-compatible provider on 127.0.0.1, scripted per model: each
//! request to a model takes the next step of its script (the last step
//! repeats). It records every request body and counts requests in flight —
//! a request stops counting when its connection is dropped, which is how
//! tests see cancellation reach the network. `GET /status` tells a client
//! in another process (the official SDKs in tests/clients) the same.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

/// What the mock does with one request.
#[derive(Clone, Debug)]
pub enum Step {
    /// A well-formed chat completion after `delay`.
    Answer { delay: Duration, text: String },
    /// An HTTP status with an OpenAI-style error body.
    Status {
        code: u16,
        message: String,
        retry_after: Option<String>,
    },
    /// A 200 whose body is `body`, verbatim.
    Raw { body: String },
    /// Never answers.
    Hang,
    /// Headers at once, then a body that trickles `chunks` bytes, one
    /// every `every`: a slow drip.
    Drip { every: Duration, chunks: usize },
    /// Headers and half a body, then silence: a response that never ends.
    Stall,
    /// Headers and half a body, then the connection is dropped.
    Reset,
    /// A well-formed completion whose content is `bytes` long.
    Big { bytes: usize },
    /// Answers with the last user message, prefixed: shows which request a
    /// result came from.
    Echo { prefix: String, delay: Duration },
}

impl Step {
    pub fn answer(text: &str) -> Self {
        Self::Answer {
            delay: Duration::ZERO,
            text: text.to_owned(),
        }
    }
    pub fn answer_after(ms: u64, text: &str) -> Self {
        Self::Answer {
            delay: Duration::from_millis(ms),
            text: text.to_owned(),
        }
    }
    pub fn status(code: u16, message: &str) -> Self {
        Self::Status {
            code,
            message: message.to_owned(),
            retry_after: None,
        }
    }
    pub fn rate_limited(retry_after: &str) -> Self {
        Self::Status {
            code: 429,
            message: "Rate limit exceeded: slow down".into(),
            retry_after: Some(retry_after.into()),
        }
    }
}

#[derive(Default)]
struct Shared {
    scripts: Mutex<HashMap<String, VecDeque<Step>>>,
    requests: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// A request the mock received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub model: String,
    pub body: Value,
    pub authorization: Option<String>,
}

impl Recorded {
    /// Every message's content, joined.
    pub fn text(&self) -> String {
        self.body["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter_map(|m| m["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }
}

pub struct Mock {
    /// The base URL to configure: `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Mock {
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/status", get(status))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the mock on 127.0.0.1");
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the mock serves");
        });
        Self {
            base_url,
            shared,
            server,
        }
    }

    /// Sets what `model` does, request by request; the last step repeats.
    pub fn script(&self, model: &str, steps: impl IntoIterator<Item = Step>) -> &Self {
        let steps: VecDeque<Step> = steps.into_iter().collect();
        assert!(!steps.is_empty(), "a script needs at least one step");
        self.shared
            .scripts
            .lock()
            .unwrap()
            .insert(model.to_owned(), steps);
        self
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn requests_for(&self, model: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.model == model)
            .collect()
    }

    /// `GET` it for `{"in_flight": n, "requests": n}`.
    pub fn status_url(&self) -> String {
        format!("{}/status", self.base_url.trim_end_matches("/v1"))
    }

    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until `check` holds; false if it never did.
    pub async fn wait_until(&self, limit: Duration, check: impl Fn(&Self) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if check(self) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        check(self)
    }
}

/// Counts a request as in flight until its handler is dropped, whether it
/// finished or the client hung up.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn status(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    axum::Json(json!({
        "in_flight": shared.in_flight.load(Ordering::SeqCst),
        "requests": shared.requests.lock().unwrap().len(),
    }))
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: String) -> Response {
    let _guard = InFlight::enter(&shared);
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    shared.requests.lock().unwrap().push(Recorded {
        model: model.clone(),
        body: body.clone(),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    });
    let step = {
        let mut scripts = shared.scripts.lock().unwrap();
        match scripts.get_mut(&model) {
            Some(steps) if steps.len() > 1 => steps.pop_front().unwrap(),
            Some(steps) => steps[0].clone(),
            None => Step::status(404, &format!("No endpoints found for {model}.")),
        }
    };
    match step {
        Step::Answer { delay, text } => {
            tokio::time::sleep(delay).await;
            json_response(StatusCode::OK, &completion(&model, &text))
        }
        Step::Status {
            code,
            message,
            retry_after,
        } => {
            let mut response = json_response(
                StatusCode::from_u16(code).unwrap(),
                &json!({"error": {"message": message, "code": code}}),
            );
            if let Some(after) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", after.parse().unwrap());
            }
            response
        }
        Step::Raw { body } => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap(),
        Step::Hang => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Step::Drip { every, chunks } => {
            let stream = futures::stream::unfold(0, move |sent| async move {
                if sent == chunks {
                    return None;
                }
                tokio::time::sleep(every).await;
                Some((
                    Ok::<_, std::io::Error>(bytes::Bytes::from_static(b" ")),
                    sent + 1,
                ))
            });
            streaming(Body::from_stream(stream))
        }
        Step::Stall | Step::Reset => {
            let reset = matches!(step, Step::Reset);
            let half = futures::stream::once(async {
                Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"{\"choices\": ["))
            });
            let end = futures::stream::once(async move {
                if reset {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "mock reset",
                    ))
                } else {
                    std::future::pending().await
                }
            });
            streaming(Body::from_stream(futures::StreamExt::chain(half, end)))
        }
        Step::Big { bytes } => {
            json_response(StatusCode::OK, &completion(&model, &"x".repeat(bytes)))
        }
        Step::Echo { prefix, delay } => {
            tokio::time::sleep(delay).await;
            let last = body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default();
            json_response(
                StatusCode::OK,
                &completion(&model, &format!("{prefix}{last}")),
            )
        }
    }
}

fn completion(model: &str, text: &str) -> Value {
    json!({
        "id": "mock-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 34, "cost": 0.0005}
    })
}

fn streaming(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(value.to_string()))
        .unwrap()
}
