//! One module of generated bindings per contract version this host serves
//! (as Zed's extension host does), each adapting its version to the host's
//! own types, and `Guest`, which dispatches a call to the right one. Adding
//! a contract version is: a new `wit/X.Y.Z/` folder, a new module here
//! (most of it `adapters!()`, from `adapt.rs`), a new arm in `Guest`, and a
//! line in `VERSIONS`.

#[macro_use]
mod adapt;
#[macro_use]
mod generated;

pub mod v0_1;
pub mod v0_2;
pub mod v0_3;
#[macro_use]
pub mod v0_4;
pub mod v0_5;
pub mod v0_6;

use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

use super::sandbox::State;
use super::types::{AnswerKind, Kind, Plan, Prompts, Request};
use crate::llm;

/// The newest contract version: the one new plugins are built for.
pub const CONTRACT: &str = v0_6::VERSION;

/// Every contract version this host serves, oldest first.
pub const VERSIONS: &[&str] = &[
    v0_1::VERSION,
    v0_2::VERSION,
    v0_3::VERSION,
    v0_4::VERSION,
    v0_5::VERSION,
    v0_6::VERSION,
];

/// Adds every version's `host` interface to the linker.
pub fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    v0_1::add_to_linker(linker)?;
    v0_2::add_to_linker(linker)?;
    v0_3::add_to_linker(linker)?;
    v0_4::add_to_linker(linker)?;
    v0_5::add_to_linker(linker)?;
    v0_6::add_to_linker(linker)
}

/// One part of a message, whatever the contract version spelled it.
pub enum Part {
    Text(String),
    /// A run attachment placed here, by id (0.4 on).
    Attachment(u32),
}

/// What an answer cites, in the terms of the contract it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sources {
    /// 0.1: indices into the completions the synthesizer was given.
    Indices(Vec<u32>),
    /// 0.2 on: call ids.
    CallIds(Vec<u32>),
}

/// An answer as a plugin returned it, before the host checks it.
#[derive(Debug, Clone)]
pub struct GuestAnswer {
    pub kind: AnswerKind,
    pub text: String,
    pub sources: Sources,
    pub notes: Vec<String>,
    pub details: String,
    /// The calls the answer makes (0.6 on; empty before).
    pub tool_calls: Vec<llm::tools::ToolCall>,
}

/// What a synthesizer made of the panel's tool calls (0.6 on).
#[derive(Debug, Clone)]
pub enum GuestToolDecision {
    /// chorus decides, as for older plugins.
    ByHost,
    /// No call: `synthesize` merges.
    Merge,
    /// The run's answer.
    Answer(GuestAnswer),
}

/// A linked plugin of some contract version.
pub enum Guest {
    V0_1(v0_1::Guest),
    V0_2(v0_2::Guest),
    V0_3(v0_3::Guest),
    V0_4(v0_4::Guest),
    V0_5(v0_5::Guest),
    V0_6(v0_6::Guest),
}

impl Guest {
    /// Links `pre` as a `kind` plugin of contract `version` (one of `VERSIONS`).
    pub fn new(pre: InstancePre<State>, kind: Kind, version: &str) -> wasmtime::Result<Self> {
        match version {
            v0_1::VERSION => Ok(Self::V0_1(v0_1::Guest::new(pre, kind)?)),
            v0_2::VERSION => Ok(Self::V0_2(v0_2::Guest::new(pre, kind)?)),
            v0_3::VERSION => Ok(Self::V0_3(v0_3::Guest::new(pre, kind)?)),
            v0_4::VERSION => Ok(Self::V0_4(v0_4::Guest::new(pre, kind)?)),
            v0_5::VERSION => Ok(Self::V0_5(v0_5::Guest::new(pre, kind)?)),
            v0_6::VERSION => Ok(Self::V0_6(v0_6::Guest::new(pre, kind)?)),
            other => Err(wasmtime::Error::msg(format!(
                "no bindings for contract version {other}"
            ))),
        }
    }

    /// Calls `validate-settings`; 0.1 plugins have none and accept any
    /// settings, but are instantiated all the same, so that loading one
    /// proves it can run.
    pub async fn validate_settings(
        &self,
        store: &mut Store<State>,
        settings: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Self::V0_1(guest) => guest.instantiate(store).await.map(Ok),
            Self::V0_2(guest) => guest.validate_settings(store, settings).await,
            Self::V0_3(guest) => guest.validate_settings(store, settings).await,
            Self::V0_4(guest) => guest.validate_settings(store, settings).await,
            Self::V0_5(guest) => guest.validate_settings(store, settings).await,
            Self::V0_6(guest) => guest.validate_settings(store, settings).await,
        }
    }

    pub async fn select(
        &self,
        store: &mut Store<State>,
        request: &Request,
        settings: &str,
    ) -> wasmtime::Result<Result<Plan, String>> {
        match self {
            Self::V0_1(guest) => guest.select(store, request, settings).await,
            Self::V0_2(guest) => guest.select(store, request, settings).await,
            Self::V0_3(guest) => guest.select(store, request, settings).await,
            Self::V0_4(guest) => guest.select(store, request, settings).await,
            Self::V0_5(guest) => guest.select(store, request, settings).await,
            Self::V0_6(guest) => guest.select(store, request, settings).await,
        }
    }

    pub async fn prompt(
        &self,
        store: &mut Store<State>,
        request: &Request,
        plan: &Plan,
        settings: &str,
    ) -> wasmtime::Result<Result<Prompts, String>> {
        match self {
            Self::V0_1(guest) => guest.prompt(store, request, plan, settings).await,
            Self::V0_2(guest) => guest.prompt(store, request, plan, settings).await,
            Self::V0_3(guest) => guest.prompt(store, request, plan, settings).await,
            Self::V0_4(guest) => guest.prompt(store, request, plan, settings).await,
            Self::V0_5(guest) => guest.prompt(store, request, plan, settings).await,
            Self::V0_6(guest) => guest.prompt(store, request, plan, settings).await,
        }
    }

    pub async fn synthesize(
        &self,
        store: &mut Store<State>,
        request: &Request,
        plan: &Plan,
        completions: &[llm::Completion],
        settings: &str,
    ) -> wasmtime::Result<Result<GuestAnswer, String>> {
        match self {
            Self::V0_1(guest) => {
                guest
                    .synthesize(store, request, plan, completions, settings)
                    .await
            }
            Self::V0_2(guest) => {
                guest
                    .synthesize(store, request, plan, completions, settings)
                    .await
            }
            Self::V0_3(guest) => {
                guest
                    .synthesize(store, request, plan, completions, settings)
                    .await
            }
            Self::V0_4(guest) => {
                guest
                    .synthesize(store, request, plan, completions, settings)
                    .await
            }
            Self::V0_5(guest) => {
                guest
                    .synthesize(store, request, plan, completions, settings)
                    .await
            }
            Self::V0_6(guest) => {
                guest
                    .synthesize(store, request, plan, completions, settings)
                    .await
            }
        }
    }

    /// Whether the plugin's contract has `choose-tool-calls` (0.6 on).
    pub fn chooses_tool_calls(&self) -> bool {
        matches!(self, Self::V0_6(_))
    }

    /// Calls `choose-tool-calls`; `None` for a contract without it (before
    /// 0.6), whose plugins see the panel's calls as text only.
    pub async fn choose_tool_calls(
        &self,
        store: &mut Store<State>,
        request: &Request,
        plan: &Plan,
        completions: &[llm::Completion],
        settings: &str,
    ) -> wasmtime::Result<Option<Result<GuestToolDecision, String>>> {
        match self {
            Self::V0_6(guest) => guest
                .choose_tool_calls(store, request, plan, completions, settings)
                .await
                .map(Some),
            _ => Ok(None),
        }
    }
}

/// A call for another kind of plugin; `Plugin` checks the kind first, so
/// this is a bug if it ever shows.
fn wrong_kind() -> wasmtime::Error {
    wasmtime::Error::msg("the plugin does not export this kind of strategy")
}
