//! `generated!("../wit/X.Y.Z")`: one contract version's bindings, made by
//! wasmtime's `bindgen!` for its three worlds (sharing one set of types
//! and one `host` interface), and the names every version module uses for
//! them: `wit` (the types), `host`, `selector`, `prompter`, `synthesizer`.

macro_rules! generated {
    ($path:literal) => {
        mod generated {
            pub mod selector {
                wasmtime::component::bindgen!({
                    world: "selector-plugin",
                    path: $path,
                    imports: { default: async | trappable },
                    exports: { default: async },
                });
            }

            pub mod prompter {
                wasmtime::component::bindgen!({
                    world: "prompter-plugin",
                    path: $path,
                    imports: { default: async | trappable },
                    exports: { default: async },
                    with: {
                        "chorus:strategy/types": super::selector::chorus::strategy::types,
                        "chorus:strategy/host": super::selector::chorus::strategy::host,
                    },
                });
            }

            pub mod synthesizer {
                wasmtime::component::bindgen!({
                    world: "synthesizer-plugin",
                    path: $path,
                    imports: { default: async | trappable },
                    exports: { default: async },
                    with: {
                        "chorus:strategy/types": super::selector::chorus::strategy::types,
                        "chorus:strategy/host": super::selector::chorus::strategy::host,
                    },
                });
            }
        }

        use generated::selector::chorus::strategy::host;
        use generated::selector::chorus::strategy::types as wit;
        use generated::{prompter, selector, synthesizer};
    };
}
