//! The contract's bindings (`chorus:strategy@0.6.0`), generated once here.
//! Every plugin reuses these types and host imports through wit-bindgen's
//! `with`, so a value moves between the kit and a plugin without
//! conversion; `kit::plugin!(synthesizer, Type)` (`plugin.rs`) writes that
//! `generate!` for the plugins of chorus's tree, so the contract a built-in
//! plugin is built for is named in one place, here and there.
//!
//! Built for another target than wasm32 (the kit's own tests), the host
//! imports exist but must not be called.

#![allow(clippy::all, missing_docs)]

wit_bindgen::generate!({
    inline: "package chorus:plugin-kit; world kit { import chorus:strategy/host@0.6.0; }",
    path: "../../wit/0.6.0",
    generate_all,
});

pub use chorus::strategy::{host, types};
