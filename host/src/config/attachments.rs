//! The attachment keys: `[limits] max_attachment_bytes`, `max_attachments`,
//! `max_attachments_bytes` and `attachment_dirs`, `[models."…"] input`,
//! and `[pipelines.P] describer`. Checked here so a typo is an error at
//! load, not a refusal in the middle of a run.

use super::Config;

/// The input kinds a model may list.
pub const MODALITIES: [&str; 4] = ["text", "image", "file", "audio"];

/// `Err((key, message))` for the first key that is wrong.
pub(super) fn check(config: &Config) -> Result<(), (String, String)> {
    let limits = &config.limits;
    let bounds = [
        (
            "limits.max_attachment_bytes",
            limits.max_attachment_bytes,
            1 << 30,
        ),
        ("limits.max_attachments", limits.max_attachments, 100),
        (
            "limits.max_attachments_bytes",
            limits.max_attachments_bytes,
            1 << 30,
        ),
    ];
    for (key, value, max) in bounds {
        if value == 0 || value > max {
            return Err((
                key.into(),
                format!("must be between 1 and {max}, got {value}"),
            ));
        }
    }
    for dir in &limits.attachment_dirs {
        if !dir.is_absolute() {
            return Err((
                "limits.attachment_dirs".into(),
                format!("`{}` must be an absolute path", dir.display()),
            ));
        }
    }
    for (id, model) in &config.models {
        for kind in model.input.iter().flatten() {
            if !MODALITIES.contains(&kind.as_str()) {
                return Err((
                    format!("models.\"{id}\".input"),
                    format!("unknown input `{kind}`: use {}", MODALITIES.join(", ")),
                ));
            }
        }
    }
    for (name, pipeline) in &config.pipelines {
        if let Some(describer) = &pipeline.describer
            && !config.models.contains_key(describer)
        {
            return Err((
                format!("pipelines.{name}.describer"),
                format!("`{describer}` is not a model of [models]"),
            ));
        }
    }
    Ok(())
}
