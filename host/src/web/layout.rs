//! The page around every view, the headers every response carries, and
//! the embedded assets (one stylesheet, one small script: no inline
//! script, nothing fetched from elsewhere).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

const CSS: &str = include_str!("assets/viewer.css");
const JS: &str = include_str!("assets/viewer.js");

/// What the browser may do with our pages: load only our own assets, run
/// no inline script, never be framed, post forms only to us.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Every response of the viewer gets these.
pub async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// A whole page: `title`, and `body` inside the common frame.
pub fn page(title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · chorus" }
                link rel="stylesheet" href="/assets/viewer.css";
                script src="/assets/viewer.js" defer {}
            }
            body {
                header class="top" {
                    a class="brand" href="/" { "chorus" }
                    span class="muted" { "runs" }
                }
                main { (body) }
            }
        }
    };
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// A form posted without the session's CSRF token: refused, and the
/// user told how to get a fresh one.
pub fn stale_form() -> Response {
    tracing::info!("the run viewer refused a POST without its CSRF token");
    problem(
        StatusCode::FORBIDDEN,
        "Refused",
        "This form is out of date or came from elsewhere: reload the run's page and try again.",
    )
}

/// A page that says what went wrong and what to do.
pub fn problem(status: StatusCode, title: &str, message: &str) -> Response {
    let mut response = page(
        title,
        html! {
            h1 { (title) }
            p role="alert" { (message) }
            p { a href="/" { "All runs" } }
        },
    );
    *response.status_mut() = status;
    response
}

pub async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "viewer.css" => (CSS, "text/css; charset=utf-8"),
        "viewer.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return problem(StatusCode::NOT_FOUND, "Not found", "There is no such file."),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// Dollars as the CLI writes them.
pub fn dollars(usd: f64) -> String {
    if usd > 0.0 && usd < 0.0001 {
        "<$0.0001".to_owned()
    } else {
        format!("${usd:.4}")
    }
}

/// A duration in ms, readably.
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.2} s", ms as f64 / 1000.0)
    }
}

/// Unix ms as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}
