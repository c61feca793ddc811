//! Retention: runs are removed oldest first once there are more than
//! `max_runs`, once they are older than `max_age`, or while the runs kept
//! hold more than `max_bytes` — never a run still in progress. Applied a
//! few seconds after the store opens and every few minutes, off the start
//! and off the writer's path (SQLite: in slices on a thread of its own,
//! `sqlite/pruner.rs`; PostgreSQL: by one instance at a time), and by
//! `chorus runs prune`. What to keep is said here; each backend applies
//! it in its own SQL.

use std::time::Duration;

use serde::Serialize;

use crate::config;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    pub max_runs: u64,
    pub max_age: Option<Duration>,
    pub max_bytes: u64,
}

impl Retention {
    pub fn of(store: &config::Store) -> Self {
        Self {
            max_runs: store.max_runs,
            max_age: store.max_age,
            max_bytes: store.max_bytes,
        }
    }
}

/// What a pruning removed and what is left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    pub removed: u64,
    pub removed_bytes: u64,
    pub kept: u64,
    pub kept_bytes: u64,
}
