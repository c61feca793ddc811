//! Which environment variables a provider's API key is read from. A
//! provider configured with the built-in default, `OPENROUTER_API_KEY`,
//! also takes `CHORUS_API_KEY` (first: chorus's own name, whatever the
//! endpoint) and, when its base URL is not OpenRouter's, `OPENAI_API_KEY`
//! (last: the name every OpenAI-compatible gateway's users already have
//! set), so `--base-url` to a LiteLLM proxy, vLLM or a company gateway
//! needs no key under OpenRouter's name. A provider whose configuration
//! names another variable reads that one alone: an operator who named a
//! variable meant it, and no other key may be sent to that host.

use url::Url;

/// chorus's own name for the key, read first.
pub const CHORUS_API_KEY: &str = "CHORUS_API_KEY";
/// The built-in configuration's variable.
pub const OPENROUTER_API_KEY: &str = "OPENROUTER_API_KEY";
/// Read last, and only for an endpoint that is not OpenRouter's.
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";

/// The variables to read, in order; the first one set is used.
pub fn candidates<'a>(configured: &'a str, base_url: &Url) -> Vec<&'a str> {
    if configured != OPENROUTER_API_KEY {
        return vec![configured];
    }
    let mut vars = vec![CHORUS_API_KEY, OPENROUTER_API_KEY];
    if !is_openrouter(base_url) {
        vars.push(OPENAI_API_KEY);
    }
    vars
}

fn is_openrouter(url: &Url) -> bool {
    url.host_str().is_some_and(|host| {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        host == "openrouter.ai" || host.ends_with(".openrouter.ai")
    })
}

/// The first of `vars` that is set (and not empty): its name and value.
/// A value that is not text counts as set, so that the problem is said
/// about it rather than a later variable silently used instead.
pub fn first_set<'a>(vars: &[&'a str]) -> Option<(&'a str, Result<String, std::env::VarError>)> {
    vars.iter().find_map(|var| match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => None,
        Ok(value) if value.trim().is_empty() => None,
        found => Some((*var, found)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn the_default_variable_takes_chorus_and_openai_names_off_openrouter() {
        assert_eq!(
            candidates(OPENROUTER_API_KEY, &url("https://openrouter.ai/api/v1")),
            [CHORUS_API_KEY, OPENROUTER_API_KEY],
            "an OpenAI key is never sent to OpenRouter"
        );
        assert_eq!(
            candidates(OPENROUTER_API_KEY, &url("http://127.0.0.1:4000/v1")),
            [CHORUS_API_KEY, OPENROUTER_API_KEY, OPENAI_API_KEY]
        );
        assert_eq!(
            candidates("MY_GATEWAY_KEY", &url("http://127.0.0.1:4000/v1")),
            ["MY_GATEWAY_KEY"],
            "a variable the operator named is the only one read"
        );
    }
}
