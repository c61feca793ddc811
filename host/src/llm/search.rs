//! Web search for a call: what was asked (a run's switch, a model's own),
//! the provider's switch it becomes in the request body, what it may cost
//! on top of the tokens, and the citations an answer comes back with.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::config::{Model, Provider, SearchContext, SearchStyle};

/// A search asked for: how many results, how much context (`None`: the
/// provider's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebSearch {
    pub max_results: Option<u32>,
    pub context: Option<SearchContext>,
}

/// One `url_citation` annotation of an answer: the source, and the span of
/// the answer that cites it (when the provider said where).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Citation {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The answer's text from `start_index` to `end_index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cited: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_index: Option<u32>,
}

/// What results OpenRouter's web plugin reads when none is said.
const OPENROUTER_DEFAULT_RESULTS: u32 = 5;
/// OpenRouter's documented price for its web plugin: $4 per 1000 results.
const OPENROUTER_USD_PER_RESULT: f64 = 0.004;
/// Native `web_search_options` search, per request: the top of OpenAI's
/// published per-call prices ($50 per 1000 calls at high context), so the
/// worst case is not understated. `web_search_usd_per_request` sets it.
const NATIVE_USD_PER_REQUEST: f64 = 0.05;

/// How a provider searches, from its config.
#[derive(Debug, Clone, Copy)]
pub struct ProviderSearch {
    pub style: SearchStyle,
    pub usd_per_request: Option<f64>,
}

impl ProviderSearch {
    /// `providers.NAME.web_search`, or the default for its base URL:
    /// OpenRouter's plugin on openrouter.ai, `web_search_options` elsewhere.
    pub fn of(config: &Provider) -> Self {
        let openrouter = config
            .base_url
            .host_str()
            .is_some_and(|h| h == "openrouter.ai" || h.ends_with(".openrouter.ai"));
        let style = config.web_search.unwrap_or(if openrouter {
            SearchStyle::OpenrouterPlugin
        } else {
            SearchStyle::WebSearchOptions
        });
        Self {
            style,
            usd_per_request: config.web_search_usd_per_request,
        }
    }
}

/// What a call does about search.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Nobody asked.
    Off,
    /// Sent: the fields merged into the body, and the search's price.
    Send {
        fields: Map<String, Value>,
        usd: f64,
    },
    /// Asked, but the provider cannot search (`web_search = "none"`).
    Unsupported { provider: String },
}

impl Plan {
    /// What the search adds to the call's cost (0 when none is sent).
    pub fn usd(&self) -> f64 {
        match self {
            Self::Send { usd, .. } => *usd,
            _ => 0.0,
        }
    }
}

/// The plan for a call to `model` (configured as `config`) on a provider
/// searching as `provider` (named `provider_name`), given the run's switch.
/// The model's own settings win over the run's.
pub fn plan(
    model: Option<&Model>,
    provider_name: &str,
    provider: ProviderSearch,
    asked: Option<&WebSearch>,
) -> Plan {
    let own = model.filter(|m| m.web_search).map(|m| WebSearch {
        max_results: m.web_search_max_results,
        context: m.web_search_context,
    });
    let search = match (asked, own) {
        (None, None) => return Plan::Off,
        (Some(asked), None) => *asked,
        (asked, Some(own)) => WebSearch {
            max_results: own.max_results.or(asked.and_then(|a| a.max_results)),
            context: own.context.or(asked.and_then(|a| a.context)),
        },
    };
    let mut fields = Map::new();
    let context_options = |fields: &mut Map<String, Value>| {
        let options = match search.context {
            Some(size) => json!({ "search_context_size": size.as_str() }),
            None => json!({}),
        };
        fields.insert("web_search_options".to_owned(), options);
    };
    let usd = match provider.style {
        SearchStyle::None => {
            return Plan::Unsupported {
                provider: provider_name.to_owned(),
            };
        }
        SearchStyle::OpenrouterPlugin => {
            let results = search.max_results.unwrap_or(OPENROUTER_DEFAULT_RESULTS);
            let mut web = json!({ "id": "web" });
            if let Some(n) = search.max_results {
                web["max_results"] = n.into();
            }
            fields.insert("plugins".to_owned(), Value::Array(vec![web]));
            if search.context.is_some() {
                context_options(&mut fields);
            }
            OPENROUTER_USD_PER_RESULT * f64::from(results)
        }
        SearchStyle::WebSearchOptions => {
            context_options(&mut fields);
            NATIVE_USD_PER_REQUEST
        }
    };
    Plan::Send {
        fields,
        usd: provider.usd_per_request.unwrap_or(usd),
    }
}

/// `extra` (the provider's `extra_body`) with the search's fields merged
/// in: a `plugins` list the provider's body already has keeps its entries.
pub fn merged(extra: &Map<String, Value>, plan: &Plan) -> Option<Map<String, Value>> {
    let Plan::Send { fields, .. } = plan else {
        return None;
    };
    let mut body = extra.clone();
    for (key, value) in fields {
        match (body.get_mut(key), value) {
            (Some(Value::Array(have)), Value::Array(add)) => have.extend(add.iter().cloned()),
            _ => {
                body.insert(key.clone(), value.clone());
            }
        }
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(style: SearchStyle) -> ProviderSearch {
        ProviderSearch {
            style,
            usd_per_request: None,
        }
    }

    #[test]
    fn openrouter_gets_its_plugin_priced_per_result() {
        let asked = WebSearch {
            max_results: Some(3),
            context: None,
        };
        let plan = plan(
            None,
            "or",
            provider(SearchStyle::OpenrouterPlugin),
            Some(&asked),
        );
        let Plan::Send { fields, usd } = &plan else {
            panic!("{plan:?}")
        };
        assert_eq!(
            Value::Object(fields.clone()),
            json!({"plugins": [{"id": "web", "max_results": 3}]})
        );
        assert!((usd - 0.012).abs() < 1e-9);
        let extra = json!({"plugins": [{"id": "file-parser"}], "x": 1});
        let body = merged(extra.as_object().unwrap(), &plan).unwrap();
        assert_eq!(
            Value::Object(body),
            json!({"plugins": [{"id": "file-parser"}, {"id": "web", "max_results": 3}], "x": 1})
        );
    }

    #[test]
    fn a_model_that_searches_by_itself_wins_and_none_is_unsupported() {
        let model = Model {
            web_search: true,
            web_search_context: Some(SearchContext::High),
            ..Model::default()
        };
        let plan = plan(
            Some(&model),
            "p",
            provider(SearchStyle::WebSearchOptions),
            None,
        );
        assert_eq!(
            plan,
            Plan::Send {
                fields: json!({"web_search_options": {"search_context_size": "high"}})
                    .as_object()
                    .unwrap()
                    .clone(),
                usd: NATIVE_USD_PER_REQUEST
            }
        );
        assert_eq!(
            super::plan(None, "p", provider(SearchStyle::None), None),
            Plan::Off
        );
        assert_eq!(
            super::plan(
                None,
                "p",
                provider(SearchStyle::None),
                Some(&WebSearch::default())
            ),
            Plan::Unsupported {
                provider: "p".into()
            }
        );
    }
}
