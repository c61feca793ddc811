//! `chorus:strategy@0.5.0`, the current contract: 0.4's conversions
//! (written once, `since_0_4!` in `v0_4`), and `host.complete-answer`, a call
//! whose reply is the run's answer, streamed where the run is.

generated!("../wit/0.5.0");

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
