//! The manifest of a Wasm component artifact (the CNCF Wasm OCI artifact
//! layout): written for a push, read and held to that layout for a pull.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Digest, OciError};

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Annotations chorus writes (and `chorus plugin inspect` shows).
pub const KIND_ANNOTATION: &str = "dev.chorus.plugin.kind";
pub const CONTRACT_ANNOTATION: &str = "dev.chorus.plugin.contract";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Map<String, serde_json::Value>>,
}

/// An artifact ready to push: its config, its one layer, its manifest.
pub struct Artifact {
    pub config: Vec<u8>,
    pub layer: Vec<u8>,
    pub manifest: Vec<u8>,
}

impl Artifact {
    /// The artifact of `component`, a chorus plugin of `kind` built for
    /// `contract`, named `title` (its file name).
    pub fn new(component: Vec<u8>, kind: &str, contract: &str, title: &str) -> Self {
        let layer_digest = Digest::of(&component);
        let config = serde_json::to_vec(&json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer_digest.to_string()],
            "component": {"exports": [format!("chorus:strategy/{kind}@{contract}")]},
        }))
        .expect("JSON");
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
            artifact_type: Some(CONFIG_MEDIA_TYPE.to_owned()),
            config: Descriptor {
                media_type: CONFIG_MEDIA_TYPE.to_owned(),
                digest: Digest::of(&config).to_string(),
                size: config.len() as u64,
                annotations: None,
            },
            layers: vec![Descriptor {
                media_type: LAYER_MEDIA_TYPE.to_owned(),
                digest: layer_digest.to_string(),
                size: component.len() as u64,
                annotations: Some(
                    [("org.opencontainers.image.title".to_owned(), title.into())]
                        .into_iter()
                        .collect(),
                ),
            }],
            annotations: Some(
                [
                    (KIND_ANNOTATION.to_owned(), kind.into()),
                    (CONTRACT_ANNOTATION.to_owned(), contract.into()),
                    ("org.opencontainers.image.title".to_owned(), title.into()),
                ]
                .into_iter()
                .collect(),
            ),
        };
        Self {
            config,
            layer: component,
            manifest: serde_json::to_vec(&manifest).expect("JSON"),
        }
    }
}

/// Reads `bytes` as a Wasm component artifact's manifest: its one
/// `application/wasm` layer's digest and size.
pub fn component_layer(bytes: &[u8]) -> Result<(Manifest, Digest, u64), OciError> {
    let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| {
        OciError::NotAComponent(format!("the manifest is not an OCI image manifest ({e})"))
    })?;
    if let Some(media_type) = &manifest.media_type
        && media_type != MANIFEST_MEDIA_TYPE
    {
        return Err(OciError::NotAComponent(format!(
            "the manifest is a `{media_type}`, not a `{MANIFEST_MEDIA_TYPE}`"
        )));
    }
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(OciError::NotAComponent(format!(
            "its config is a `{}`, not a `{CONFIG_MEDIA_TYPE}` (is it a container image?)",
            manifest.config.media_type
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(OciError::NotAComponent(format!(
            "it has {} layers; a component artifact has one",
            manifest.layers.len()
        )));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(OciError::NotAComponent(format!(
            "its layer is a `{}`, not `{LAYER_MEDIA_TYPE}`",
            layer.media_type
        )));
    }
    let digest = Digest::parse(&layer.digest).map_err(OciError::NotAComponent)?;
    let size = layer.size;
    Ok((manifest, digest, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_manifest_reads_back_as_a_component_artifact() {
        let artifact = Artifact::new(b"\0asm".to_vec(), "selector", "0.4.0", "s.wasm");
        let (manifest, digest, size) = component_layer(&artifact.manifest).unwrap();
        assert_eq!(digest, Digest::of(b"\0asm"));
        assert_eq!(size, 4);
        let annotations = manifest.annotations.unwrap();
        assert_eq!(annotations[KIND_ANNOTATION], "selector");
        assert_eq!(
            manifest.config.digest,
            Digest::of(&artifact.config).to_string()
        );
    }

    #[test]
    fn a_container_image_is_not_taken_for_a_component() {
        let image = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:00","size":1},
            "layers":[]}"#;
        let error = component_layer(image).unwrap_err().to_string();
        assert!(error.contains("container image"), "{error}");
    }
}
