//! Where traces go, decided once at startup: `[telemetry] otlp_endpoint`,
//! else the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces URL
//! itself) or `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, `/v1/traces`
//! added); `OTEL_SERVICE_NAME` names the service (default `chorus`), and
//! `OTEL_SDK_DISABLED=true` turns it all off. Headers for a collector that
//! wants them (`OTEL_EXPORTER_OTLP_HEADERS`) are read by the exporter.

use url::Url;

use crate::config::{Telemetry, otlp_url};

pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
pub const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";
pub const DISABLED_ENV: &str = "OTEL_SDK_DISABLED";
const ENDPOINT_KEY: &str = "telemetry.otlp_endpoint";
const TRACES_PATH: &str = "v1/traces";

/// How traces are exported, when they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The URL spans are POSTed to (`…/v1/traces`).
    pub traces_url: Url,
    /// Where it came from: the config key or the variable.
    pub from: &'static str,
    pub service_name: String,
    pub capture_content: bool,
}

impl Settings {
    /// The settings `config` and the environment (`env`) make; `None`
    /// when no endpoint is given or the SDK is disabled. `Err((key,
    /// message))` names what is wrong.
    pub fn resolve(
        config: &Telemetry,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, (String, String)> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if env(DISABLED_ENV).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let bad = |key: &str, e: String| (key.to_owned(), e);
        let (traces_url, from) = if let Some(base) = &config.otlp_endpoint {
            (
                traces_url(otlp_url(base).map_err(|e| bad(ENDPOINT_KEY, e))?),
                ENDPOINT_KEY,
            )
        } else if let Some(url) = env(TRACES_ENDPOINT_ENV) {
            // The signal's own variable is the whole URL (the OTLP spec).
            (
                otlp_url(&url).map_err(|e| bad(TRACES_ENDPOINT_ENV, e))?,
                TRACES_ENDPOINT_ENV,
            )
        } else if let Some(base) = env(ENDPOINT_ENV) {
            (
                traces_url(otlp_url(&base).map_err(|e| bad(ENDPOINT_ENV, e))?),
                ENDPOINT_ENV,
            )
        } else {
            return Ok(None);
        };
        Ok(Some(Self {
            traces_url,
            from,
            service_name: env(SERVICE_NAME_ENV).unwrap_or_else(|| "chorus".to_owned()),
            capture_content: config.capture_content,
        }))
    }

    /// One line for `chorus check`.
    pub fn describe(&self) -> String {
        format!(
            "OpenTelemetry traces to {} (from {}), service `{}`, {}",
            crate::text::redact_url(self.traces_url.as_str()),
            self.from,
            self.service_name,
            if self.capture_content {
                "prompts and answers included (capture_content)"
            } else {
                "no prompts or answers"
            }
        )
    }
}

/// The traces URL of an OTLP/HTTP base URL: `/v1/traces` under its path,
/// unless it ends so already.
fn traces_url(mut base: Url) -> Url {
    let path = base.path().trim_end_matches('/').to_owned();
    if !path.ends_with(&format!("/{TRACES_PATH}")) {
        base.set_path(&format!("{path}/{TRACES_PATH}"));
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        config: &Telemetry,
        vars: &[(&str, &str)],
    ) -> Result<Option<Settings>, (String, String)> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::resolve(config, |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    fn endpoint(url: &str) -> Telemetry {
        Telemetry {
            otlp_endpoint: Some(url.to_owned()),
            capture_content: false,
        }
    }

    #[test]
    fn no_endpoint_is_off() {
        assert_eq!(resolve(&Telemetry::default(), &[]), Ok(None));
        assert_eq!(
            resolve(&Telemetry::default(), &[(ENDPOINT_ENV, " ")]),
            Ok(None)
        );
    }

    #[test]
    fn the_config_key_is_a_base_url_and_wins_over_the_environment() {
        let settings = resolve(
            &endpoint("http://collector:4318"),
            &[(ENDPOINT_ENV, "http://other:4318")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            settings.traces_url.as_str(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(settings.from, "telemetry.otlp_endpoint");
        assert_eq!(settings.service_name, "chorus");
        for (base, url) in [
            ("http://c:4318/", "http://c:4318/v1/traces"),
            ("https://c/otlp", "https://c/otlp/v1/traces"),
            ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
        ] {
            let settings = resolve(&endpoint(base), &[]).unwrap().unwrap();
            assert_eq!(settings.traces_url.as_str(), url, "{base}");
        }
    }

    #[test]
    fn the_standard_variables_are_honoured() {
        let settings = resolve(
            &Telemetry::default(),
            &[
                (ENDPOINT_ENV, "http://c:4318"),
                (SERVICE_NAME_ENV, "team-chorus"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(settings.traces_url.as_str(), "http://c:4318/v1/traces");
        assert_eq!(settings.from, ENDPOINT_ENV);
        assert_eq!(settings.service_name, "team-chorus");
        let settings = resolve(
            &Telemetry::default(),
            &[
                (TRACES_ENDPOINT_ENV, "http://c:9999/custom"),
                (ENDPOINT_ENV, "http://x"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(settings.traces_url.as_str(), "http://c:9999/custom");
        assert_eq!(
            resolve(&endpoint("http://c:4318"), &[(DISABLED_ENV, "TRUE")]),
            Ok(None)
        );
    }

    #[test]
    fn a_bad_endpoint_names_where_it_came_from() {
        let (key, message) = resolve(&endpoint("collector:4318"), &[]).unwrap_err();
        assert_eq!(key, "telemetry.otlp_endpoint");
        assert!(message.contains("http://"), "{message}");
        let (key, message) =
            resolve(&Telemetry::default(), &[(ENDPOINT_ENV, "not a url")]).unwrap_err();
        assert_eq!(key, ENDPOINT_ENV);
        assert!(message.contains("not a URL"), "{message}");
    }

    #[test]
    fn check_says_where_traces_go_and_whether_content_goes_with_them() {
        let mut config = endpoint("http://c:4318");
        config.capture_content = true;
        let line = resolve(&config, &[]).unwrap().unwrap().describe();
        assert!(line.contains("http://c:4318/v1/traces"), "{line}");
        assert!(line.contains("capture_content"), "{line}");
    }
}
