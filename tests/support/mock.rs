//! A mock OpenAI-compatible provider on 127.0.0.1, scripted per model: each
//! request to a model takes the next step of its script (the last step
//! repeats). It records every request body and counts requests in flight —
//! a request stops counting when its connection is dropped (streamed bodies
//! included), which is how tests see cancellation reach the network.
//!
//! Like real providers, it answers a request that asks for `"stream": true`
//! with server-sent events (deltas, usage in the last chunk, `[DONE]`), and
//! can be scripted to send keep-alive comments, reasoning, CRLF, an error
//! chunk mid-stream, plain JSON to a streaming request, redirects, errors
//! that echo the Authorization header, and a model list at `GET /v1/models`.
//!
//! `GET /status` tells a client in another process (the official SDKs in
//! tests/clients) how many requests are in flight and how many were made.

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
    /// A 200 `text/event-stream` made of these events, whatever the
    /// request asked for; lines end in CRLF when `crlf`.
    Sse { events: Vec<Sse>, crlf: bool },
    /// A redirect (`status`, e.g. 307) to `location`.
    Redirect { status: u16, location: String },
    /// An error whose message quotes the request's API key (what followed
    /// `Bearer `), from character `from`, at most `len` characters.
    EchoKey { code: u16, from: usize, len: usize },
    /// A plain-JSON completion whose content is `parts` content parts of
    /// `part_bytes` each (sent as JSON even to a streaming request).
    BigParts { parts: usize, part_bytes: usize },
    /// A well-formed chat completion once the test opens `gate`: holds a
    /// run in flight for exactly as long as the test needs.
    Gated { gate: Gate, text: String },
    /// A chat completion of `text` carrying `annotations` (web search's
    /// `url_citation`s): on the message, or on a delta of a stream.
    Cited { text: String, annotations: Value },
    /// A judge with a fixed preference: of the last user message's
    /// `[Answer A]` and `[Answer B]`, answers `A` or `B` for the one that
    /// contains `prefer` (and not the other), else `TIE`.
    Judge { prefer: String },
    /// A reply that proposes tool calls (`(name, arguments)`, arguments
    /// as written, well-formed or not): `tool_calls` on the message, or,
    /// streamed, each call's name then its arguments in two deltas;
    /// `finish_reason` `tool_calls`.
    ToolCalls { calls: Vec<(String, String)> },
}

/// Opened once by the test; every request waiting on it then answers.
#[derive(Clone, Default)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    async fn opened(&self) {
        let mut open = self.0.subscribe();
        let _ = open.wait_for(|open| *open).await;
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gate(open: {})", *self.0.borrow())
    }
}

/// One piece of a scripted event stream.
#[derive(Clone, Debug)]
pub enum Sse {
    /// `: text` — a keep-alive comment.
    Comment(String),
    /// A chunk with `delta.content`.
    Content(String),
    /// A chunk with `delta.reasoning`.
    Reasoning(String),
    /// A chunk with `finish_reason`.
    Finish(String),
    /// A chunk with `delta.annotations`.
    Annotations(Value),
    /// A chunk with this `usage` object and no choices.
    Usage(Value),
    /// A chunk with an `error` object and `finish_reason: "error"`.
    Error { code: u16, message: String },
    /// Exactly these bytes.
    Raw(String),
    /// Silence for this long.
    Wait(Duration),
    /// Silence until the test opens the gate.
    Gate(Gate),
    /// `data: [DONE]`.
    Done,
    /// Silence forever.
    Hang,
}

impl Step {
    pub fn judge(prefer: &str) -> Self {
        Self::Judge {
            prefer: prefer.to_owned(),
        }
    }

    pub fn answer(text: &str) -> Self {
        Self::Answer {
            delay: Duration::ZERO,
            text: text.to_owned(),
        }
    }
    pub fn tool_call(name: &str, arguments: &str) -> Self {
        Self::ToolCalls {
            calls: vec![(name.to_owned(), arguments.to_owned())],
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
    /// A stream of `text` in a few deltas, then usage and `[DONE]`.
    pub fn stream(text: &str) -> Self {
        let mut events: Vec<Sse> = pieces(text).into_iter().map(Sse::Content).collect();
        events.extend(finish_events());
        Self::Sse {
            events,
            crlf: false,
        }
    }
    /// A stream of `first`, then nothing until the test opens `gate`, then
    /// `rest`, usage and `[DONE]`: a model held mid-answer.
    pub fn stream_gated(first: &str, gate: &Gate, rest: &str) -> Self {
        let mut events = vec![
            Sse::Content(first.into()),
            Sse::Gate(gate.clone()),
            Sse::Content(rest.into()),
        ];
        events.extend(finish_events());
        Self::Sse {
            events,
            crlf: false,
        }
    }
    /// Keep-alive comments every `every` for `for_`, then `text`.
    pub fn keep_alive_then(every: Duration, for_: Duration, text: &str) -> Self {
        let mut events = vec![];
        let mut waited = Duration::ZERO;
        while waited < for_ {
            events.push(Sse::Comment("OPENROUTER PROCESSING".into()));
            events.push(Sse::Wait(every));
            waited += every;
        }
        events.extend(pieces(text).into_iter().map(Sse::Content));
        events.extend(finish_events());
        Self::Sse {
            events,
            crlf: false,
        }
    }
}

/// `text` in up to four deltas.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(4).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// How a stream ends: finish reason, usage with cost, `[DONE]`.
pub fn finish_events() -> Vec<Sse> {
    vec![
        Sse::Finish("stop".into()),
        Sse::Usage(json!({"prompt_tokens": 12, "completion_tokens": 34, "cost": 0.0005})),
        Sse::Done,
    ]
}

#[derive(Default)]
struct Shared {
    scripts: Mutex<HashMap<String, VecDeque<Step>>>,
    requests: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// What `GET /v1/models` returns; 404 when unset.
    catalog: Mutex<Option<Value>>,
    catalog_requests: AtomicUsize,
    /// When set, requests without `Bearer <key>` get a 401.
    required_key: Mutex<Option<String>>,
    /// TCP connections accepted: how many a client opened.
    connections: AtomicUsize,
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
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the mock on 127.0.0.1");
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let counted = shared.clone();
        let listener = axum::serve::ListenerExt::tap_io(listener, move |_| {
            counted.connections.fetch_add(1, Ordering::SeqCst);
        });
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

    /// Serves `GET /v1/models` with `{"data": models}`.
    pub fn catalog(&self, models: Value) -> &Self {
        *self.shared.catalog.lock().unwrap() = Some(json!({ "data": models }));
        self
    }

    pub fn catalog_requests(&self) -> usize {
        self.shared.catalog_requests.load(Ordering::SeqCst)
    }

    /// Refuses requests that do not carry `Bearer key` (a 401).
    pub fn require_key(&self, key: &str) -> &Self {
        *self.shared.required_key.lock().unwrap() = Some(key.to_owned());
        self
    }

    /// TCP connections accepted so far (a client that reuses its pooled
    /// connections opens no more).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
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

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    shared.catalog_requests.fetch_add(1, Ordering::SeqCst);
    match shared.catalog.lock().unwrap().clone() {
        Some(list) => json_response(StatusCode::OK, &list),
        None => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": {"message": "no model list here", "code": 404}}),
        ),
    }
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: String) -> Response {
    let guard = InFlight::enter(&shared);
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    let stream = body["stream"] == true;
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    shared.requests.lock().unwrap().push(Recorded {
        model: model.clone(),
        body: body.clone(),
        authorization: authorization.clone(),
    });
    let required = shared.required_key.lock().unwrap().clone();
    if let Some(key) = required
        && authorization.as_deref() != Some(format!("Bearer {key}").as_str())
    {
        return json_response(
            StatusCode::UNAUTHORIZED,
            &json!({"error": {"message": "No auth credentials found", "code": 401}}),
        );
    }
    let step = {
        let mut scripts = shared.scripts.lock().unwrap();
        match scripts.get_mut(&model) {
            Some(steps) if steps.len() > 1 => steps.pop_front().unwrap(),
            Some(steps) => steps[0].clone(),
            None => Step::status(404, &format!("No endpoints found for {model}.")),
        }
    };
    match step {
        Step::Gated { gate, text } => {
            gate.opened().await;
            answer(guard, stream, &model, &text)
        }
        Step::Answer { delay, text } => {
            tokio::time::sleep(delay).await;
            answer(guard, stream, &model, &text)
        }
        Step::ToolCalls { calls } => {
            let id = |i: usize| format!("call_{model}_{i}");
            if stream {
                let mut events = Vec::new();
                for (i, (name, arguments)) in calls.iter().enumerate() {
                    let (head, tail) = arguments.split_at(arguments.len() / 2);
                    events.push(Sse::Raw(format!("data: {}\n\n", delta(&model, json!({"tool_calls": [
                        {"index": i, "id": id(i), "type": "function", "function": {"name": name, "arguments": head}}
                    ]}), None))));
                    events.push(Sse::Raw(format!(
                        "data: {}\n\n",
                        delta(
                            &model,
                            json!({"tool_calls": [
                                {"index": i, "function": {"arguments": tail}}
                            ]}),
                            None
                        )
                    )));
                }
                events.push(Sse::Finish("tool_calls".to_owned()));
                events.push(Sse::Done);
                sse(guard, &model, events, false)
            } else {
                drop(guard);
                let calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| json!({"id": id(i), "type": "function", "function": {"name": name, "arguments": arguments}}))
                    .collect();
                let mut body = completion(&model, "");
                body["choices"][0]["message"] =
                    json!({"role": "assistant", "content": null, "tool_calls": calls});
                body["choices"][0]["finish_reason"] = json!("tool_calls");
                json_response(StatusCode::OK, &body)
            }
        }
        Step::Cited { text, annotations } => {
            if stream {
                let mut events: Vec<Sse> = pieces(&text).into_iter().map(Sse::Content).collect();
                events.push(Sse::Annotations(annotations));
                events.extend(finish_events());
                sse(guard, &model, events, false)
            } else {
                drop(guard);
                let mut body = completion(&model, &text);
                body["choices"][0]["message"]["annotations"] = annotations;
                json_response(StatusCode::OK, &body)
            }
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
        Step::Big { bytes } => answer(guard, stream, &model, &"x".repeat(bytes)),
        Step::Echo { prefix, delay } => {
            tokio::time::sleep(delay).await;
            let last = body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default();
            answer(guard, stream, &model, &format!("{prefix}{last}"))
        }
        Step::Judge { prefer } => {
            let last = body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default();
            let section = |label: &str| {
                last.split(&format!("[Answer {label}]"))
                    .nth(1)
                    .and_then(|rest| rest.split(&format!("[End of answer {label}]")).next())
                    .unwrap_or_default()
                    .to_owned()
            };
            let (a, b) = (section("A"), section("B"));
            let pick = match (a.contains(&prefer), b.contains(&prefer)) {
                (true, false) => "A",
                (false, true) => "B",
                _ => "TIE",
            };
            answer(
                guard,
                stream,
                &model,
                &format!("{pick}\nIt is the one I prefer."),
            )
        }
        Step::Sse { events, crlf } => sse(guard, &model, events, crlf),
        Step::Redirect { status, location } => Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("location", location)
            .body(Body::empty())
            .unwrap(),
        Step::EchoKey { code, from, len } => {
            let key = authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("Bearer "))
                .unwrap_or_default();
            let echoed: String = key.chars().skip(from).take(len).collect();
            json_response(
                StatusCode::from_u16(code).unwrap(),
                &json!({"error": {"message": format!("Invalid credentials: {echoed}…"), "code": code}}),
            )
        }
        Step::BigParts { parts, part_bytes } => {
            let part = json!({"type": "text", "text": "y".repeat(part_bytes)}).to_string();
            let mut text = String::with_capacity(parts * (part.len() + 1) + 300);
            text.push_str(r#"{"id":"mock-big","model":""#);
            text.push_str(&model);
            text.push_str(r#"","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":["#);
            for i in 0..parts {
                if i > 0 {
                    text.push(',');
                }
                text.push_str(&part);
            }
            text.push_str(r#"]}}],"usage":{"prompt_tokens":12,"completion_tokens":34}}"#);
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .body(Body::from(text))
                .unwrap()
        }
    }
}

/// A completion as the request asked for it: streamed or whole.
fn answer(guard: InFlight, stream: bool, model: &str, text: &str) -> Response {
    if stream {
        let mut events: Vec<Sse> = if text.len() > 64 * 1024 {
            let chars: Vec<char> = text.chars().collect();
            chars
                .chunks(16 * 1024)
                .map(|c| Sse::Content(c.iter().collect()))
                .collect()
        } else {
            pieces(text).into_iter().map(Sse::Content).collect()
        };
        events.extend(finish_events());
        sse(guard, model, events, false)
    } else {
        drop(guard);
        json_response(StatusCode::OK, &completion(model, text))
    }
}

/// A `text/event-stream` of `events`; the in-flight guard lives as long as
/// the body, so a client that hangs up is seen.
fn sse(guard: InFlight, model: &str, events: Vec<Sse>, crlf: bool) -> Response {
    let model = model.to_owned();
    let end = if crlf { "\r\n" } else { "\n" };
    let stream = futures::stream::unfold(
        (VecDeque::from(events), guard),
        move |(mut events, guard)| {
            let model = model.clone();
            async move {
                loop {
                    let event = events.pop_front()?;
                    let chunk = |value: Value| format!("data: {value}{end}{end}");
                    let text = match event {
                        Sse::Wait(d) => {
                            tokio::time::sleep(d).await;
                            continue;
                        }
                        Sse::Hang => {
                            std::future::pending::<()>().await;
                            unreachable!()
                        }
                        Sse::Gate(gate) => {
                            gate.opened().await;
                            continue;
                        }
                        Sse::Comment(c) => format!(": {c}{end}{end}"),
                        Sse::Content(c) => chunk(delta(&model, json!({"content": c}), None)),
                        Sse::Reasoning(r) => chunk(delta(&model, json!({"reasoning": r}), None)),
                        Sse::Annotations(a) => {
                            chunk(delta(&model, json!({"annotations": a}), None))
                        }
                        Sse::Finish(reason) => chunk(delta(&model, json!({}), Some(&reason))),
                        Sse::Usage(usage) => chunk(json!({
                            "id": "mock-1", "object": "chat.completion.chunk", "model": model,
                            "choices": [], "usage": usage
                        })),
                        Sse::Error { code, message } => chunk(json!({
                            "id": "mock-1", "object": "chat.completion.chunk", "model": model,
                            "error": {"code": code, "message": message},
                            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]
                        })),
                        Sse::Raw(raw) => raw,
                        Sse::Done => format!("data: [DONE]{end}{end}"),
                    };
                    return Some((
                        Ok::<_, std::io::Error>(bytes::Bytes::from(text)),
                        (events, guard),
                    ));
                }
            }
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn delta(model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "mock-1",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
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
