//! A plugin's component: its bytes and digest, from the binary (a
//! built-in), a file, or an OCI registry by digest; and the contract
//! version it was built for, served by this host's bindings or refused.

use std::borrow::Cow;

use std::path::PathBuf;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::{Sourced, builtin, builtin_names};
use crate::config::Loaded;
use crate::plugins::Kind;
use crate::plugins::bindings::{CONTRACT, VERSIONS};
use crate::plugins::oci_source::Unavailable;

/// A plugin's component, as [`Sourced`] says.
pub(super) fn component_of(
    loaded: &Loaded,
    name: &str,
    spec: &crate::config::PluginSpec,
) -> Result<Sourced, Unavailable> {
    let digested = |(bytes, origin, key): (Vec<u8>, String, String)| {
        let digest = Sha256::digest(&bytes).into();
        (Cow::Owned(bytes), digest, origin, key)
    };
    if let Some(source) = &spec.source {
        return crate::plugins::oci_source::component(loaded, name, source).map(digested);
    }
    match (&spec.builtin, &spec.path) {
        (Some(builtin), _) => {
            let key = format!("plugins.{name}.builtin");
            let found = builtin::BUILTINS.iter().find(|b| b.name == *builtin);
            let found = found.ok_or_else(|| {
                let known: Vec<_> = builtin_names().collect();
                loaded.error(
                    &key,
                    format!(
                        "no built-in plugin `{builtin}` (built in: {})",
                        known.join(", ")
                    ),
                )
            })?;
            Ok((
                Cow::Borrowed(found.component),
                found.digest,
                format!("builtin:{builtin}"),
                key,
            ))
        }
        (None, Some(path)) => {
            let full: PathBuf = loaded.base_dir.join(path);
            let key = format!("plugins.{name}.path");
            let bytes = crate::config::read_regular_file(&full, crate::config::MAX_PLUGIN_BYTES)
                .map_err(|e| loaded.error(&key, format!("cannot read {}: {e}", full.display())))?;
            Ok(digested((bytes, full.display().to_string(), key)))
        }
        (None, None) => unreachable!("validated: a plugin has builtin, path or source"),
    }
}

/// Reads which world a component implements and which contract version it
/// was built for.
pub(in crate::plugins) fn contract_of(
    engine: &Engine,
    component: &Component,
) -> Result<(Kind, String), String> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    if let Some((kind, version)) = exports.iter().find_map(|name| strategy_export(name)) {
        return Ok((kind, version.to_owned()));
    }
    Err(format!(
        "it is not a chorus strategy plugin: it exports none of chorus:strategy/{{selector,prompter,synthesizer}} (it exports: {})",
        if exports.is_empty() {
            "nothing".to_owned()
        } else {
            exports.join(", ")
        }
    ))
}

/// The kind and contract version an export named `name` (say
/// `chorus:strategy/synthesizer@0.6.0`) implements, if it is a strategy's.
fn strategy_export(name: &str) -> Option<(Kind, &str)> {
    let rest = name.strip_prefix("chorus:strategy/")?;
    let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
    let kind = Kind::ALL.into_iter().find(|k| k.interface() == interface)?;
    Some((kind, version))
}

/// The kind a component's own exports declare, read from its outer
/// sections without compiling it (the core modules inside are skipped
/// unread): what a plugin still compiling in the background is. `None`
/// when the bytes are no component or export no strategy; compiling then
/// says why.
pub(super) fn declared_kind(wasm: &[u8]) -> Option<Kind> {
    use wasmparser::{Chunk, Parser, Payload};
    let mut parser = Parser::new(0);
    let mut at = 0;
    loop {
        let Chunk::Parsed { consumed, payload } = parser.parse(wasm.get(at..)?, true).ok()? else {
            return None; // not possible at end of input
        };
        at += consumed;
        match payload {
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => at = unchecked_range.end,
            Payload::ComponentExportSection(exports) => {
                for export in exports {
                    if let Some((kind, _)) = strategy_export(export.ok()?.name.name) {
                        return Some(kind);
                    }
                }
            }
            Payload::End(_) => return None,
            _ => {}
        }
    }
}

/// The contract version whose bindings serve a plugin built for `guest`:
/// the known version with the same major and minor and a patch at least
/// the guest's. Anything else is refused, naming both versions.
pub(super) fn serving(guest: &str) -> Result<&'static str, String> {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.split('.');
        let version = (
            parts.next()?.parse().ok()?,
            parts.next()?.parse().ok()?,
            parts.next()?.parse().ok()?,
        );
        parts.next().is_none().then_some(version)
    };
    let served = VERSIONS.join(", ");
    let Some((major, minor, patch)) = parse(guest) else {
        return Err(format!(
            "it was built for chorus:strategy@{guest}, which is not a version chorus knows (this chorus speaks chorus:strategy@{CONTRACT}; it serves {served})"
        ));
    };
    let newest = parse(CONTRACT).expect("CONTRACT is a version");
    for known in VERSIONS.iter().rev() {
        let (kmajor, kminor, kpatch) = parse(known).expect("VERSIONS are versions");
        if (kmajor, kminor) == (major, minor) && kpatch >= patch {
            return Ok(known);
        }
    }
    if (major, minor, patch) > newest {
        Err(format!(
            "it was built for chorus:strategy@{guest}, but this chorus speaks chorus:strategy@{CONTRACT} (and serves {served}); upgrade chorus, or rebuild the plugin against wit/{CONTRACT}"
        ))
    } else {
        Err(format!(
            "it was built for chorus:strategy@{guest}, which this chorus no longer serves (it speaks chorus:strategy@{CONTRACT} and serves {served}); rebuild the plugin against wit/{CONTRACT}"
        ))
    }
}
