//! `chorus plugin push|pull|inspect`: a plugin component on an OCI
//! registry (see `crate::oci`). Push checks the file is a chorus plugin
//! first and prints the digest to pin; pull fetches into the plugin cache
//! (a tag is resolved again and pinned); inspect shows what a reference
//! holds, from the cache when it is there.

// A terminal command: its output is the point, and it never runs under
// `serve` (see `crate::notice`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::Loaded;
use crate::oci::{self, Reference, Store, Transport};

#[derive(clap::Args)]
pub struct PushArgs {
    /// The component: a `.wasm` file `chorus check` would load.
    file: PathBuf,
    /// Where: `oci://HOST[:PORT]/REPOSITORY:TAG`.
    reference: String,
}

#[derive(clap::Args)]
pub struct RefArgs {
    /// `oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST` or `…:TAG`.
    reference: String,
}

/// How registries are reached, and where pulled components are kept, as
/// the configuration says (`insecure_registries`, `[tls] ca_files`,
/// `[cache]`).
struct Setting {
    transport: Transport,
    store: Option<Store>,
}

fn setting(config: Option<&Path>) -> Result<Setting, String> {
    let loaded = Loaded::discover(config).map_err(|e| e.to_string())?;
    let (transport, store) = crate::plugins::registry_access(&loaded).map_err(|e| e.to_string())?;
    Ok(Setting { transport, store })
}

fn parse(reference: &str) -> Result<Reference, String> {
    Reference::parse(reference)
}

pub async fn push(args: PushArgs, config: Option<&Path>) -> ExitCode {
    let result = async {
        let reference = parse(&args.reference)?;
        if reference.tag.is_none() || reference.digest.is_some() {
            return Err(format!(
                "push to a tag: oci://{}/{}:TAG (the registry gives the digest)",
                reference.registry, reference.repository
            ));
        }
        let setting = setting(config)?;
        let wasm = crate::config::read_regular_file(&args.file, crate::config::MAX_PLUGIN_BYTES)
            .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
        let (kind, contract) = crate::plugins::describe(&wasm)
            .map_err(|e| format!("{} is not a chorus plugin: {e}", args.file.display()))?;
        let title = args
            .file
            .file_name()
            .map_or("plugin.wasm".into(), |n| n.to_string_lossy().into_owned());
        let artifact = oci::Artifact::new(wasm, &kind.to_string(), &contract, &title);
        let digest = oci::push(&reference, &setting.transport, &artifact)
            .await
            .map_err(|e| e.to_string())?;
        Ok((reference, digest, kind, contract))
    }
    .await;
    match result {
        Ok((reference, digest, kind, contract)) => {
            eprintln!("pushed the {kind} (chorus:strategy@{contract}) to {reference}");
            eprintln!(
                "pin it: source = \"oci://{}/{}@{digest}\"",
                reference.registry, reference.repository
            );
            println!("{digest}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chorus plugin push: {e}");
            ExitCode::FAILURE
        }
    }
}

pub async fn pull(args: RefArgs, config: Option<&Path>) -> ExitCode {
    let result = async {
        let reference = parse(&args.reference)?;
        let setting = setting(config)?;
        let store = setting.store.as_ref().ok_or(
            "the plugin cache is off ([cache] enabled = false): there is nowhere to pull to",
        )?;
        oci::pull(&reference, &setting.transport, Some(store), true)
            .await
            .map(|pulled| (reference, pulled))
            .map_err(|e| e.to_string())
    }
    .await;
    match result {
        Ok((reference, pulled)) => {
            let pinned = format!(
                "oci://{}/{}@{}",
                reference.registry, reference.repository, pulled.digest
            );
            if pulled.from_tag {
                eprintln!(
                    "{reference} is {pinned} (pinned in the cache; pin it in plugins.toml too)"
                );
            }
            eprintln!(
                "pulled {pinned}: component {} ({} bytes){}",
                pulled.layer,
                pulled.wasm.len(),
                if pulled.from_store {
                    ", already in the cache"
                } else {
                    ""
                }
            );
            println!("{}", pulled.digest);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chorus plugin pull: {e}");
            ExitCode::FAILURE
        }
    }
}

pub async fn inspect(args: RefArgs, config: Option<&Path>) -> ExitCode {
    let result = async {
        let reference = parse(&args.reference)?;
        let setting = setting(config)?;
        let pulled = oci::pull(
            &reference,
            &setting.transport,
            setting.store.as_ref(),
            false,
        )
        .await
        .map_err(|e| e.to_string())?;
        let described = crate::plugins::describe(&pulled.wasm);
        Ok::<_, String>((reference, pulled, described))
    }
    .await;
    match result {
        Ok((reference, pulled, described)) => {
            println!("reference: {reference}");
            println!(
                "digest:    {} (oci://{}/{}@{})",
                pulled.digest, reference.registry, reference.repository, pulled.digest
            );
            println!("component: {} ({} bytes)", pulled.layer, pulled.wasm.len());
            match described {
                Ok((kind, contract)) => {
                    println!("kind:      {kind}");
                    println!("contract:  chorus:strategy@{contract}");
                }
                Err(e) => println!("not a chorus plugin: {e}"),
            }
            println!(
                "from:      {}",
                if pulled.from_store {
                    "the local cache"
                } else {
                    "the registry"
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chorus plugin inspect: {e}");
            ExitCode::FAILURE
        }
    }
}
