//! `chorus:strategy@0.5.0`, the current contract: 0.4's types and
//! conversions (shared with `v0_4`), and `host.complete-answer`, a call
//! whose reply is the run's answer, streamed where the run is.

mod generated {
    pub mod selector {
        wasmtime::component::bindgen!({
            world: "selector-plugin",
            path: "../wit/0.5.0",
            imports: { default: async | trappable },
            exports: { default: async },
        });
    }

    pub mod prompter {
        wasmtime::component::bindgen!({
            world: "prompter-plugin",
            path: "../wit/0.5.0",
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
            path: "../wit/0.5.0",
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
use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use super::{GuestAnswer, Sources};
use crate::attach;
use crate::llm;
use crate::plugins::sandbox::{State, Stopped};
use crate::plugins::types::{self as own, Kind};

pub const VERSION: &str = "0.5.0";

// 0.4's own conversions, unchanged.
since_0_4!();

adapters!(m => {
    input_modalities: m.input_modalities.clone(),
}, host => {
    async fn complete_answer(
        &mut self,
        request: wit::ChatRequest,
    ) -> wasmtime::Result<wit::Completion> {
        let label = request.label.clone();
        let request = llm::ChatRequest::try_from(request)
            .map_err(|why| wasmtime::Error::new(Stopped::BadRequest { index: 0, label, why }))?;
        Ok((&self.complete_answer(request).await).into())
    }
});
