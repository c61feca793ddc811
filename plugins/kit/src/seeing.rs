//! Which models can see a run's attachments (contract 0.4's
//! `request.attachments` and `model-info.input-modalities`), for selectors
//! that prefer models that can, and say so when they had to take one that
//! cannot.

use crate::wit::types::{AttachmentKind, ModelInfo, Request};

/// The input modalities a model needs to take every attachment of the run
/// as it is ("image", "file", "audio"); empty when none (text files are
/// inlined, so every model reads them).
pub fn needed(request: &Request) -> Vec<&'static str> {
    let mut needed = Vec::new();
    for attachment in &request.attachments {
        let modality = match attachment.kind {
            AttachmentKind::Image => "image",
            AttachmentKind::Pdf => "file",
            AttachmentKind::Audio => "audio",
            AttachmentKind::Text => continue,
        };
        if !needed.contains(&modality) {
            needed.push(modality);
        }
    }
    needed
}

/// Whether `model` takes every modality in `needed`. A model whose
/// modalities nobody states is taken to see text only, as the host does.
pub fn sees(model: &ModelInfo, needed: &[&str]) -> bool {
    needed.iter().all(|n| {
        model
            .input_modalities
            .as_ref()
            .is_some_and(|m| m.iter().any(|have| have == n))
    })
}

/// `models` reordered so those that see `needed` come first, each group
/// in its own order.
pub fn seeing_first(models: Vec<ModelInfo>, needed: &[&str]) -> Vec<ModelInfo> {
    let (mut seeing, blind): (Vec<_>, Vec<_>) = models.into_iter().partition(|m| sees(m, needed));
    seeing.extend(blind);
    seeing
}

/// The plan's note when `chosen` includes models that cannot see the
/// attachments: which, and what the host will do about it.
pub fn blind_note(chosen: &[String], models: &[ModelInfo], needed: &[&str]) -> Option<String> {
    if needed.is_empty() {
        return None;
    }
    let blind: Vec<&str> = chosen
        .iter()
        .filter(|id| !models.iter().any(|m| m.id == **id && sees(m, needed)))
        .map(String::as_str)
        .collect();
    (!blind.is_empty()).then(|| {
        format!(
            "Chose models that cannot take the {} attachments, for want of enough that can: {} (the pipeline's attachments_for_text_models decides what they get).",
            needed.join("/"),
            blind.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::types::AttachmentInfo;

    fn model(id: &str, input: Option<&[&str]>) -> ModelInfo {
        ModelInfo {
            id: id.into(),
            provider: "p".into(),
            context_window: None,
            max_output_tokens: None,
            input_price: None,
            output_price: None,
            tags: vec![],
            supported_parameters: None,
            prices_source: None,
            listed: None,
            input_modalities: input.map(|m| m.iter().map(|s| (*s).to_owned()).collect()),
            extra: "{}".into(),
        }
    }

    fn with(kinds: &[AttachmentKind]) -> Request {
        Request {
            run_id: "r".into(),
            pipeline: "p".into(),
            prompt: "q".into(),
            options: "{}".into(),
            attachments: kinds
                .iter()
                .zip(1..)
                .map(|(kind, id)| AttachmentInfo {
                    id,
                    kind: *kind,
                    mime: "x/y".into(),
                    name: None,
                    bytes: 1,
                    pages: None,
                    width: None,
                    height: None,
                    description: None,
                })
                .collect(),
            tools: None,
        }
    }

    #[test]
    fn models_that_see_the_attachments_come_first_and_the_rest_are_named() {
        let needed = needed(&with(&[
            AttachmentKind::Image,
            AttachmentKind::Text,
            AttachmentKind::Image,
            AttachmentKind::Pdf,
        ]));
        assert_eq!(needed, ["image", "file"]);
        let models = vec![
            model("text", Some(&["text"])),
            model("unknown", None),
            model("both", Some(&["text", "image", "file"])),
            model("image", Some(&["text", "image"])),
        ];
        let order: Vec<String> = seeing_first(models.clone(), &needed)
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(order, ["both", "text", "unknown", "image"]);
        let chosen = ["both".to_owned(), "image".to_owned()];
        let note = blind_note(&chosen, &models, &needed).unwrap();
        assert!(note.contains("image/file attachments"), "{note}");
        assert!(note.ends_with("for want of enough that can: image (the pipeline's attachments_for_text_models decides what they get)."), "{note}");
        assert_eq!(blind_note(&chosen[..1], &models, &needed), None);
        // Text files are inlined: every model reads them.
        assert!(super::needed(&with(&[AttachmentKind::Text])).is_empty());
        assert_eq!(blind_note(&["text".to_owned()], &models, &[]), None);
    }
}
