//! `kit::plugin!(KIND, Type)`: makes a plugin crate of chorus's tree a
//! strategy plugin of one kind on the kit's contract — the world's
//! bindings, generated with the kit's types and host imports (`with`), its
//! `Guest` trait in scope, and `Type` exported as the plugin:
//!
//! ```text
//! kit::plugin!(synthesizer, Synthesize);
//!
//! struct Synthesize;
//!
//! impl Guest for Synthesize { … }
//! ```
//!
//! `KIND` is `selector`, `prompter` or `synthesizer`. For a synthesizer,
//! `Guest` is the kit's `Synthesizer`: the contract's, with
//! `choose-tool-calls` leaving the decision on the panel's tool calls to
//! chorus unless the plugin writes its own, so only the strategies that
//! decide on calls (`vote`, `judge`) say anything about them. The
//! contract's path is the one of a crate two folders below `plugins/`
//! (`plugins/builtin/*`, `plugins/testing/*`); a plugin elsewhere writes
//! its own `wit_bindgen::generate!` as `wit.rs` shows.

use crate::wit::types::{Answer, Completion, Plan, Request, ToolDecision};

/// A synthesizer as the kit's plugins write it: the contract's
/// `synthesizer` interface, with `choose_tool_calls` answering `by-host`,
/// or `merge` for a strategy that decides on calls as it merges.
pub trait Synthesizer {
    /// Whether `synthesize` decides on the panel's tool calls itself — a
    /// proposal is a ballot, or a candidate, like any answer — so that
    /// `choose_tool_calls` leaves the decision to it (`merge`) rather
    /// than to chorus (`by-host`).
    const DECIDES_CALLS_WHEN_MERGING: bool = false;

    fn validate_settings(settings: String) -> Result<(), String>;

    fn synthesize(
        request: Request,
        plan: Plan,
        completions: Vec<Completion>,
        settings: String,
    ) -> Result<Answer, String>;

    /// What the strategy makes of the panel's tool calls before any
    /// merge: see `DECIDES_CALLS_WHEN_MERGING`.
    fn choose_tool_calls(
        _request: Request,
        _plan: Plan,
        _completions: Vec<Completion>,
        _settings: String,
    ) -> Result<ToolDecision, String> {
        Ok(if Self::DECIDES_CALLS_WHEN_MERGING {
            ToolDecision::Merge
        } else {
            ToolDecision::ByHost
        })
    }
}

#[macro_export]
macro_rules! plugin {
    (selector, $plugin:ident) => {
        $crate::plugin!(@world "selector-plugin", selector);
        use exports::chorus::strategy::selector::Guest;
        export!($plugin);
    };
    (prompter, $plugin:ident) => {
        $crate::plugin!(@world "prompter-plugin", prompter);
        use exports::chorus::strategy::prompter::Guest;
        export!($plugin);
    };
    (synthesizer, $plugin:ident) => {
        $crate::plugin!(@world "synthesizer-plugin", synthesizer);
        use kit::Synthesizer as Guest;

        /// The contract's export, forwarding to the plugin's `Synthesizer`.
        struct KitSynthesizer;

        impl exports::chorus::strategy::synthesizer::Guest for KitSynthesizer {
            fn validate_settings(settings: String) -> Result<(), String> {
                <$plugin as kit::Synthesizer>::validate_settings(settings)
            }

            fn synthesize(
                request: kit::wit::types::Request,
                plan: kit::wit::types::Plan,
                completions: Vec<kit::wit::types::Completion>,
                settings: String,
            ) -> Result<kit::wit::types::Answer, String> {
                <$plugin as kit::Synthesizer>::synthesize(request, plan, completions, settings)
            }

            fn choose_tool_calls(
                request: kit::wit::types::Request,
                plan: kit::wit::types::Plan,
                completions: Vec<kit::wit::types::Completion>,
                settings: String,
            ) -> Result<kit::wit::types::ToolDecision, String> {
                <$plugin as kit::Synthesizer>::choose_tool_calls(
                    request,
                    plan,
                    completions,
                    settings,
                )
            }
        }

        export!(KitSynthesizer);
    };
    (@world $world:literal, $kind:ident) => {
        wit_bindgen::generate!({
            world: $world,
            path: "../../../wit/0.6.0",
            with: {
                "chorus:strategy/types@0.6.0": kit::wit::types,
                "chorus:strategy/host@0.6.0": kit::wit::host,
            },
        });
    };
}
