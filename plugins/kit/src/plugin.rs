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
//! `KIND` is `selector`, `prompter` or `synthesizer`. The contract's path
//! is the one of a crate two folders below `plugins/` (`plugins/builtin/*`,
//! `plugins/testing/*`); a plugin elsewhere writes its own
//! `wit_bindgen::generate!` as `wit.rs` shows.

#[macro_export]
macro_rules! plugin {
    (selector, $plugin:ident) => {
        $crate::plugin!(@world "selector-plugin", selector, $plugin);
    };
    (prompter, $plugin:ident) => {
        $crate::plugin!(@world "prompter-plugin", prompter, $plugin);
    };
    (synthesizer, $plugin:ident) => {
        $crate::plugin!(@world "synthesizer-plugin", synthesizer, $plugin);
    };
    (@world $world:literal, $kind:ident, $plugin:ident) => {
        wit_bindgen::generate!({
            world: $world,
            path: "../../../wit/0.5.0",
            with: {
                "chorus:strategy/types@0.5.0": kit::wit::types,
                "chorus:strategy/host@0.5.0": kit::wit::host,
            },
        });

        use exports::chorus::strategy::$kind::Guest;

        export!($plugin);
    };
}
