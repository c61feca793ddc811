//! The wasmtime settings that compiled plugin code depends on, in one place
//! for the two sides that must agree on them: the running engine
//! (`plugins::engine`) and the build script, which precompiles the built-in
//! plugins with them (host/build.rs includes this file). Code compiled under
//! other settings is refused when it is loaded, never run.
//!
//! Depends on nothing but wasmtime, so the build script can include it.

use wasmtime::Config;

/// The settings compiled code depends on: fuel metering for CPU budgets.
/// Everything else is wasmtime's default.
pub fn code_config() -> Config {
    let mut config = Config::new();
    config.consume_fuel(true);
    config
}

/// CPU features precompiled code may use on each architecture: a baseline
/// every machine chorus ships to has (x86-64-v2 on x86_64, the base
/// architecture on aarch64), so it loads anywhere; a machine without them
/// compiles the plugins itself, as it would without precompiled code.
#[cfg_attr(not(test), allow(dead_code))]
const BASELINE_FEATURES: &[(&str, &[&str])] = &[(
    "x86_64",
    &[
        "has_sse3",
        "has_ssse3",
        "has_sse41",
        "has_sse42",
        "has_popcnt",
        "has_cmpxchg16b",
    ],
)];

/// `code_config` for precompiling code for `triple`, using only the
/// baseline CPU features of its architecture rather than the building
/// machine's.
#[cfg_attr(not(test), allow(dead_code))] // the build script's, and the tests'
pub fn portable_code_config(triple: &str) -> wasmtime::Result<Config> {
    let mut config = code_config();
    config.target(triple)?;
    let arch = triple.split('-').next().unwrap_or_default();
    for (of, features) in BASELINE_FEATURES {
        if *of == arch {
            for feature in *features {
                // SAFETY: wasmtime checks, when it loads code compiled with
                // these, that the running CPU has each of them, and refuses
                // the code otherwise.
                unsafe {
                    config.cranelift_flag_enable(feature);
                }
            }
        }
    }
    Ok(config)
}
