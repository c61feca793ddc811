//! Failures in words, and fallback chains that try models in order
//! without hiding any failure.

/// A failure as people read it: `kind` is the WIT enum's Debug name.
pub fn describe_failure(kind: &str, status: Option<u16>, message: &str) -> String {
    let kind = kind.rsplit("::").next().unwrap_or(kind);
    let words = match kind {
        "HttpStatus" => "HTTP error".to_owned(),
        "Connection" => "connection failed".to_owned(),
        "MissingApiKey" => "missing API key".to_owned(),
        // Split CamelCase: RateLimited -> rate limited; also kinds added
        // to the contract after this plugin was built.
        other => {
            let mut words = String::new();
            for (i, c) in other.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    words.push(' ');
                }
                words.extend(c.to_lowercase());
            }
            words
        }
    };
    match status {
        Some(status) => format!("{words} (HTTP {status}): {message}"),
        None => format!("{words}: {message}"),
    }
}

/// A model and a text about it: its answer, or its error.
pub type ModelText = (String, String);

/// Tries `models` in order until `call` succeeds. Returns the model and
/// its text, and every earlier model's error, so nothing is hidden.
pub fn first_success(
    models: &[String],
    mut call: impl FnMut(&str) -> Result<String, String>,
) -> (Option<ModelText>, Vec<ModelText>) {
    let mut errors = Vec::new();
    for model in models {
        match call(model) {
            Ok(text) if !text.trim().is_empty() => return (Some((model.clone(), text)), errors),
            Ok(_) => errors.push((model.clone(), "empty reply".to_owned())),
            Err(e) => errors.push((model.clone(), e)),
        }
    }
    (None, errors)
}

/// Notes for a fallback chain's earlier failures.
pub fn fallback_notes(role: &str, errors: &[(String, String)], used: Option<&str>) -> Vec<String> {
    errors
        .iter()
        .map(|(model, error)| match used {
            Some(used) => format!("{role} {model} failed ({error}); fell back to {used}."),
            None => format!("{role} {model} failed: {error}"),
        })
        .collect()
}
