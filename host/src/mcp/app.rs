//! The run viewer inside MCP clients (the MCP Apps extension,
//! `io.modelcontextprotocol/ui`): for a client that declares the extension,
//! every tool names the app `ui://chorus/run` in `_meta.ui.resourceUri`, and
//! the app is offered as a resource — one self-contained HTML document (the
//! web viewer's CSS and a small script inline, a CSP that allows no
//! connection) that renders a tool result's `structuredContent` and asks
//! for `resynthesize` through the host's app bridge. A client that does not
//! declare the extension sees neither.

use std::sync::LazyLock;

use rmcp::model::{
    ClientCapabilities, MetaObject, ReadResourceResult, Resource, ResourceContents, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

/// The extension's id, as clients declare it in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The app's address.
pub const URI: &str = "ui://chorus/run";
/// The MIME type the extension gives an app's HTML.
pub const MIME: &str = "text/html;profile=mcp-app";
/// The key older hosts read instead of `_meta.ui.resourceUri`.
const LEGACY_URI_KEY: &str = "ui/resourceUri";

const PAGE: &str = include_str!("app/run.html");
const SCRIPT: &str = include_str!("app/run.js");
const APP_CSS: &str = include_str!("app/run.css");
const VIEWER_CSS: &str = include_str!("../web/assets/viewer.css");

/// The document: the page with the viewer's CSS, the app's own and its
/// script put in place.
static HTML: LazyLock<String> = LazyLock::new(|| {
    PAGE.replace("/*VIEWER_CSS*/", VIEWER_CSS)
        .replace("/*APP_CSS*/", APP_CSS)
        .replace("/*APP_JS*/", SCRIPT)
        .replace("CHORUS_VERSION", env!("CARGO_PKG_VERSION"))
});

/// Whether the client of this request declared the extension (at
/// `initialize`, or in this request's `_meta`).
pub fn wanted(context: &RequestContext<RoleServer>) -> bool {
    declared(context.client_capabilities().as_ref())
}

fn declared(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.extensions.as_ref())
        .is_some_and(|e| e.contains_key(EXTENSION))
}

/// The tools, each naming the app that shows its result.
pub fn mark(tools: Vec<Tool>) -> Vec<Tool> {
    tools
        .into_iter()
        .map(|mut tool| {
            let meta = tool.meta.get_or_insert_with(MetaObject::new);
            meta.insert("ui".into(), json!({"resourceUri": URI}));
            meta.insert(LEGACY_URI_KEY.into(), Value::String(URI.into()));
            tool
        })
        .collect()
}

/// The app as `resources/list` shows it.
pub fn resource() -> Resource {
    Resource::new(URI, "chorus run")
        .with_mime_type(MIME)
        .with_description(
            "The run viewer for MCP Apps hosts: the answer, each model's answer, \
             costs and timings, and re-synthesis.",
        )
}

/// The app's document, with its CSP (no connections, nothing loaded from
/// anywhere: everything is inline).
pub fn read() -> ReadResourceResult {
    let mut meta = MetaObject::new();
    meta.insert(
        "ui".into(),
        json!({
            "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": []},
            "prefersBorder": true
        }),
    );
    let contents = ResourceContents::text(HTML.as_str(), URI)
        .with_mime_type(MIME)
        .with_meta(meta);
    ReadResourceResult::new(vec![contents])
}

/// Why a client that did not declare the extension cannot read the app.
pub fn not_offered() -> McpError {
    McpError::resource_not_found(
        format!("{URI} is offered to clients that declare the {EXTENSION} extension"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_whole_and_loads_nothing() {
        let html = HTML.as_str();
        for placeholder in [
            "/*VIEWER_CSS*/",
            "/*APP_CSS*/",
            "/*APP_JS*/",
            "CHORUS_VERSION",
        ] {
            assert!(!html.contains(placeholder), "{placeholder} left in");
        }
        assert!(html.contains("default-src 'none'"));
        for external in ["src=\"http", "href=\"http", "@import", "url("] {
            assert!(!html.contains(external), "{external}");
        }
        assert!(
            !SCRIPT.contains("innerHTML"),
            "model text must never become HTML"
        );
    }

    #[test]
    fn the_extension_is_recognised_only_when_declared() {
        let mut capabilities = ClientCapabilities::default();
        assert!(!declared(None));
        assert!(!declared(Some(&capabilities)));
        let mut extensions = rmcp::model::ExtensionCapabilities::new();
        extensions.insert(EXTENSION.into(), serde_json::Map::new());
        capabilities.extensions = Some(extensions);
        assert!(declared(Some(&capabilities)));
    }
}
