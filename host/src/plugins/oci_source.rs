//! A plugin whose `source` is an OCI reference: its component pulled (or
//! read from the local store, checked against its digest either way), the
//! digest a tag resolved to pinned and said, and an unreachable registry
//! told apart from every other failure, so that at a first start of
//! `serve` it fails only the pipelines of that plugin.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::Kind;
use crate::config::{ConfigError, Loaded};
use crate::notice::notice;
use crate::oci::{self, Reference, Store, Transport};

/// Why a plugin's component could not be had.
pub(super) enum Unavailable {
    /// Anything wrong with the configuration or the component.
    Refused(ConfigError),
    /// Its registry could not be reached and it is not in the store.
    Unreachable(ConfigError),
}

impl From<ConfigError> for Unavailable {
    fn from(error: ConfigError) -> Self {
        Self::Refused(error)
    }
}

/// How registries are reached and where pulled components are kept, as
/// `loaded` says: `insecure_registries`, `registry_token_realms`,
/// `[tls] ca_files`, `[cache]`.
pub fn registry_access(loaded: &Loaded) -> Result<(Transport, Option<Store>), ConfigError> {
    let config = &loaded.config;
    let roots = config
        .tls
        .roots(&loaded.base_dir)
        .map_err(|(key, message)| loaded.error(key, message))?;
    let dir = if config.cache.enabled {
        config
            .cache
            .dir
            .clone()
            .or_else(super::cache::CompileCache::default_dir)
    } else {
        None
    };
    let transport = Transport {
        insecure: config.insecure_registries.clone(),
        token_realms: config.registry_token_realms.clone(),
        roots,
    };
    Ok((transport, dir.map(|d| Store::in_cache(&d))))
}

/// The component of plugin `name` from `source`: its bytes, its origin
/// for messages (`oci://HOST/REPO@sha256:…`, with the tag it came from),
/// and the config key.
pub(super) fn component(
    loaded: &Loaded,
    name: &str,
    source: &str,
) -> Result<(Vec<u8>, String, String), Unavailable> {
    let key = format!("plugins.{name}.source");
    let reference = Reference::parse(source).map_err(|e| loaded.error(&key, e))?;
    let (transport, store) = registry_access(loaded)?;
    let pulled = oci::pull_blocking(&reference, &transport, store.as_ref()).map_err(|e| {
        if e.is_unreachable() {
            Unavailable::Unreachable(loaded.error(
                &key,
                format!(
                    "{reference}: {e}, and the component is not in the local cache: \
                     start the registry, or pull it where it is reachable (`chorus plugin pull`)"
                ),
            ))
        } else {
            Unavailable::Refused(loaded.error(&key, format!("{reference}: {e}")))
        }
    })?;
    let pinned = reference.pinned(pulled.digest.clone());
    if pulled.from_tag {
        notice!(
            "chorus: plugin `{name}`: {reference} names a tag, which can move; pinned to {} \
             (kept until the reference changes). Pin it in the config: source = \"oci://{}/{}@{}\"",
            pulled.digest,
            reference.registry,
            reference.repository,
            pulled.digest
        );
    }
    tracing::info!(
        plugin = %name,
        "component {} of {pinned} {}",
        pulled.layer,
        if pulled.from_store { "from the local store" } else { "pulled" }
    );
    Ok((pulled.wasm, pinned.to_string(), key))
}

/// What a component is, without running it: the strategy interface it
/// exports and the contract version (compiled, on an engine of its own).
/// For `chorus plugin push` and `inspect`.
pub fn describe(wasm: &[u8]) -> Result<(Kind, String), String> {
    let engine = Engine::new(&super::engine_config::code_config()).map_err(|e| format!("{e:#}"))?;
    let component = Component::new(&engine, wasm).map_err(|e| {
        let why = format!("{e:#}");
        format!(
            "it is not a loadable WebAssembly component: {}",
            why.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    })?;
    super::registry::contract_of(&engine, &component)
}
