//! The port a run's calls reuse earlier answers through. The pipeline says
//! what it needs here; the response cache (`respcache`), which sits above
//! the pipeline beside the store, provides it, and the composition root
//! (`app`) plugs it in with `Runner::with_responses`. The pipeline never
//! sees where answers are kept.

use futures::future::BoxFuture;

use crate::llm::{ChatRequest, WebSearch};
use crate::record::{CallRecord, CallRef};

/// Answers kept across runs, as a runner uses them.
pub trait CallCache: Send + Sync {
    /// The cache as run `run_id` of pipeline `pipeline` uses it.
    fn for_run(&self, pipeline: &str, run_id: &str) -> Box<dyn RunCallCache>;
}

/// One run's view of a [`CallCache`].
pub trait RunCallCache: Send + Sync {
    /// The key of `request` to `provider`, or `None` when the request may
    /// not be cached.
    fn key(
        &self,
        provider: &str,
        request: &ChatRequest,
        search: Option<&WebSearch>,
    ) -> Option<String>;

    /// The answer kept for `key`, if any (a cache that cannot be read is a
    /// miss).
    fn lookup<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<Hit>>;

    /// Keeps call `call` of this run as the answer to `key`.
    fn remember(&self, key: String, call: u32) -> BoxFuture<'_, ()>;
}

/// An answer found in the cache: the call it came from, as kept.
pub struct Hit {
    pub from: CallRef,
    pub call: CallRecord,
}
