//! Where runs are kept: SQLite and PostgreSQL, the WAL, the response
//! cache, several instances on one store.

pub(crate) mod balanced;
pub(crate) mod failover;
pub(crate) mod history;
pub(crate) mod postgres;
pub(crate) mod response_cache;
pub(crate) mod shared_limits;
pub(crate) mod wal;
