//! The store's side of the response cache: an index from a request's key
//! to the earlier call that answered it, with an expiry. The answer itself
//! is never copied: a hit reads the stored call. What a key is, and which
//! requests may use the index, is `respcache`'s business; this module only
//! keeps the index, in whichever backend holds the runs. Runs kept in
//! memory have no index: every lookup misses.

use super::{CallLookup, Store, StoreError};
use crate::record::{CallRef, StoredCall};

/// One entry of the index: the call whose answer a key gets, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    pub key: String,
    pub from: CallRef,
    /// Unix ms.
    pub created_at: i64,
    pub expires_at: i64,
}

impl Store {
    /// The call whose answer `key` gets at `now` (unix ms): found only if
    /// the entry has not expired and the call is kept and answered `ok`.
    /// Blocking: call it off the async runtime's threads.
    pub fn cached_answer(
        &self,
        key: &str,
        now: i64,
    ) -> Result<Option<(CallRef, StoredCall)>, StoreError> {
        let Some(from) = self.backend.cache_entry(key, now)? else {
            return Ok(None);
        };
        Ok(match self.call(&from.run_id, from.call, false)? {
            CallLookup::Found(call) if call.call.status == "ok" && call.call.reply.is_some() => {
                Some((from, call))
            }
            _ => None,
        })
    }

    /// Adds `entry` to the index, replacing any entry of its key. Runs
    /// kept in memory keep no index. Blocking.
    pub fn remember_answer(&self, entry: &CacheEntry) -> Result<(), StoreError> {
        self.backend.remember_answer(entry)
    }

    /// Whether the store keeps a response-cache index (not in memory).
    pub fn keeps_answers(&self) -> bool {
        self.backend.keeps_answers()
    }
}
