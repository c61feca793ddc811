//! The `[telemetry]` keys: where OpenTelemetry traces go (`otlp_endpoint`)
//! and whether prompts and answers go with them (`capture_content`). Read
//! at startup; what is made of them (and of the standard `OTEL_*`
//! variables) is `telemetry`'s.

use serde::Deserialize;
use url::Url;

use super::{Config, Invalid};

/// `[telemetry]`: OpenTelemetry traces of every run, exported over
/// OTLP/HTTP. Off unless an endpoint is given (here or in
/// `OTEL_EXPORTER_OTLP_ENDPOINT`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Telemetry {
    /// The collector's OTLP/HTTP base URL, e.g. `http://localhost:4318`;
    /// spans are sent to its `/v1/traces`. Over `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub otlp_endpoint: Option<String>,
    /// Export prompts and answers too (as span events); off, spans carry
    /// names, numbers and outcomes only.
    pub capture_content: bool,
}

/// `url` as an OTLP/HTTP base URL, or what is wrong with it.
pub fn otlp_url(url: &str) -> Result<Url, String> {
    let example = "such as http://localhost:4318";
    let given = url;
    // Shown in every message below: never its credentials.
    let url = &crate::text::redact_url(url);
    let parsed = Url::parse(given.trim()).map_err(|e| {
        format!("`{url}` is not a URL ({e}): give the collector's address, {example}")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "`{url}` is a {} URL: OTLP/HTTP needs http:// or https://, {example} (gRPC on 4317 is not supported)",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{url}` names no host: {example}"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!(
            "`{url}` has a query or fragment: give the base URL, {example}"
        ));
    }
    Ok(parsed)
}

/// `Err((key, message))` when `[telemetry]` is wrong.
pub(super) fn check(config: &Config) -> Result<(), Invalid> {
    if let Some(url) = &config.telemetry.otlp_endpoint {
        otlp_url(url).map_err(|e| ("telemetry.otlp_endpoint".to_owned(), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::otlp_url;
    use crate::config::Loaded;

    fn parse(telemetry: &str) -> Result<Loaded, crate::config::ConfigError> {
        let text = format!(
            "{}\n[telemetry]\n{telemetry}\n",
            crate::config::tests::MINIMAL
        );
        Loaded::parse(&text, "test.toml", PathBuf::from("."))
    }

    #[test]
    fn the_telemetry_section_is_read_and_checked() {
        let loaded = parse("otlp_endpoint = \"http://c:4318\"\ncapture_content = true").unwrap();
        let telemetry = &loaded.config.telemetry;
        assert_eq!(telemetry.otlp_endpoint.as_deref(), Some("http://c:4318"));
        assert!(telemetry.capture_content);
        assert!(
            !Loaded::parse(crate::config::tests::MINIMAL, "t", PathBuf::from("."))
                .unwrap()
                .config
                .telemetry
                .capture_content
        );
        let error = parse("otlp_endpoint = \"c:4318\"").unwrap_err();
        assert_eq!(error.key, "telemetry.otlp_endpoint");
        assert!(
            error.to_string().contains("http://localhost:4318"),
            "{error}"
        );
        let error = parse("endpoint = \"http://c:4318\"").unwrap_err();
        assert!(error.to_string().contains("endpoint"), "{error}");
    }

    #[test]
    fn an_otlp_endpoint_is_an_http_url_with_a_host() {
        assert!(otlp_url("http://localhost:4318").is_ok());
        assert!(otlp_url("https://otel.example.com/prefix/").is_ok());
        let wrong = [
            ("localhost:4318", "http:// or https://"),
            ("4318", "not a URL"),
            ("grpc://collector:4317", "gRPC on 4317 is not supported"),
            ("http://collector:4318/?x=1", "query"),
            ("", "not a URL"),
        ];
        for (url, says) in wrong {
            let error = otlp_url(url).unwrap_err();
            assert!(error.contains(says), "{url}: {error}");
            assert!(error.contains("http://localhost:4318"), "{error}");
        }
    }
}
