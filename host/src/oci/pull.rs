//! Pushing a component, and pulling one into the local store: by digest
//! from the store when it is there (no request at all), else from the
//! registry, every byte checked against its digest before it is kept or
//! used. A tag is resolved once and pinned: later loads use the pinned
//! digest until the reference changes or `chorus plugin pull` resolves it
//! again.

use super::artifact::{self, Artifact, MANIFEST_MEDIA_TYPE};
use super::client::MAX_MANIFEST_BYTES;
use super::{Client, Digest, OciError, Reference, Store, Transport};
use crate::config::MAX_PLUGIN_BYTES;

/// A component pulled (or read from the store).
#[derive(Debug, Clone)]
pub struct Pulled {
    pub wasm: Vec<u8>,
    /// The manifest's digest: what a reference pins.
    pub digest: Digest,
    /// The component layer's digest.
    pub layer: Digest,
    pub manifest: artifact::Manifest,
    /// Whether no request was made (all from the store).
    pub from_store: bool,
    /// The reference named a tag and no digest: it was pinned to `digest`.
    pub from_tag: bool,
}

/// Pulls `reference` into `store` (when there is one). `resolve_tags`
/// makes a tag be resolved at the registry even when a pin exists (what
/// `chorus plugin pull` does; loading a configuration keeps the pin).
pub async fn pull(
    reference: &Reference,
    transport: &Transport,
    store: Option<&Store>,
    resolve_tags: bool,
) -> Result<Pulled, OciError> {
    let from_tag = reference.digest.is_none();
    let pinned = match (&reference.digest, store) {
        (Some(digest), _) => Some(digest.clone()),
        (None, Some(store)) if !resolve_tags => store.pin(reference),
        (None, _) => None,
    };
    // All from the store: no request.
    if let (Some(digest), Some(store)) = (&pinned, store) {
        match from_store(store, digest) {
            Ok(Some(found)) => return Ok(Pulled { from_tag, ..found }),
            Ok(None) => {}
            // A damaged copy (the store removed it): fetched again, and
            // checked again.
            Err(e) => tracing::warn!("{e}; fetching it from the registry again"),
        }
    }
    let client = Client::new(reference, transport)?;
    let (manifest_bytes, digest) = match &pinned {
        Some(expected) => {
            let (bytes, found) = client.manifest(&expected.to_string()).await?;
            if &found != expected {
                return Err(OciError::WrongDigest {
                    what: format!("the manifest {reference} served"),
                    expected: expected.clone(),
                    found,
                });
            }
            (bytes, found)
        }
        None => client.manifest(&reference.version()).await?,
    };
    let (manifest, layer, size) = artifact::component_layer(&manifest_bytes)?;
    if size > MAX_PLUGIN_BYTES {
        return Err(OciError::TooLarge(format!(
            "the component is {size} bytes, over the limit of {MAX_PLUGIN_BYTES}"
        )));
    }
    let cached = match store {
        Some(store) => store.read(&layer, MAX_PLUGIN_BYTES).unwrap_or(None),
        None => None,
    };
    let wasm = match cached {
        Some(wasm) => wasm,
        None => {
            let wasm = client.blob(&layer, size).await?;
            let found = Digest::of(&wasm);
            if found != layer {
                return Err(OciError::WrongDigest {
                    what: format!("the component {reference} served"),
                    expected: layer,
                    found,
                });
            }
            wasm
        }
    };
    if let Some(store) = store {
        store.write(&layer, &wasm)?;
        store.write(&digest, &manifest_bytes)?;
        if from_tag {
            store.set_pin(reference, &digest)?;
        }
    }
    Ok(Pulled {
        wasm,
        digest,
        layer,
        manifest,
        from_store: false,
        from_tag,
    })
}

/// The manifest `digest` and its component, if both are in the store
/// (each checked against its digest as it is read).
fn from_store(store: &Store, digest: &Digest) -> Result<Option<Pulled>, OciError> {
    let Some(manifest_bytes) = store.read(digest, MAX_MANIFEST_BYTES)? else {
        return Ok(None);
    };
    let (manifest, layer, _) = artifact::component_layer(&manifest_bytes)?;
    let Some(wasm) = store.read(&layer, MAX_PLUGIN_BYTES)? else {
        return Ok(None);
    };
    Ok(Some(Pulled {
        wasm,
        digest: digest.clone(),
        layer,
        manifest,
        from_store: true,
        from_tag: false,
    }))
}

/// [`pull`] from code that is not async (loading a configuration): on a
/// thread of its own with a runtime of its own, so it works from inside a
/// runtime as well as outside one.
pub fn pull_blocking(
    reference: &Reference,
    transport: &Transport,
    store: Option<&Store>,
) -> Result<Pulled, OciError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| OciError::Registry(format!("cannot start a runtime: {e}")))?;
                runtime.block_on(pull(reference, transport, store, false))
            })
            .join()
            .unwrap_or_else(|_| Err(OciError::Registry("pulling panicked".into())))
    })
}

/// Pushes `artifact` to `reference` (which must name a tag); the
/// manifest's digest.
pub async fn push(
    reference: &Reference,
    transport: &Transport,
    artifact: &Artifact,
) -> Result<Digest, OciError> {
    let Some(tag) = &reference.tag else {
        return Err(OciError::Registry(format!(
            "{reference} names no tag to push to: write oci://HOST/REPOSITORY:TAG"
        )));
    };
    let client = Client::new(reference, transport)?;
    client
        .push_blob(&Digest::of(&artifact.config), &artifact.config)
        .await?;
    client
        .push_blob(&Digest::of(&artifact.layer), &artifact.layer)
        .await?;
    client
        .push_manifest(tag, MANIFEST_MEDIA_TYPE, &artifact.manifest)
        .await
}
