//! The process's wasmtime engine: fuel for yielding (CPU budgets), and the pooling
//! instance allocator, so a plugin call takes a warm slot instead of mapping
//! and unmapping a fresh reservation. The pool's slots are a hard cap on
//! instances alive at once; `Slots` pairs it with a semaphore, so a call past
//! the cap waits for a slot instead of failing.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Core instances, memories and tables one plugin may have: generous for
/// what componentize-py and componentize-js build (a few of each).
const CORE_INSTANCES_PER_PLUGIN: u32 = 32;
const MEMORIES_PER_PLUGIN: u32 = 8;
const TABLES_PER_PLUGIN: u32 = 16;
const TABLE_ELEMENTS: usize = 100_000;
/// Memory kept resident in a freed slot and reset with memset rather than
/// madvise: a Rust plugin's whole working set, so reusing a slot takes no
/// page faults.
const KEEP_RESIDENT: usize = 1 << 20;
/// Slots beyond the runs: for validating settings at load.
const SPARE_SLOTS: u32 = 2;

/// How the engine is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// Plugin calls alive at once (one per run, plus spares).
    pub slots: u32,
    /// The largest `max_memory_mib` of any plugin.
    pub max_memory_mib: u32,
}

impl Sizing {
    pub fn for_runs(max_concurrent_runs: u32, max_memory_mib: u32) -> Self {
        Self {
            slots: max_concurrent_runs.saturating_add(SPARE_SLOTS),
            max_memory_mib,
        }
    }
}

/// The plugin-call slots of an engine: wait for one before instantiating.
#[derive(Clone)]
pub struct Slots(Arc<Semaphore>);

impl Slots {
    pub async fn take(&self) -> OwnedSemaphorePermit {
        self.0
            .clone()
            .acquire_owned()
            .await
            .expect("the slot semaphore is never closed")
    }
}

/// Builds the engine; falls back to on-demand allocation (with a warning)
/// where the pool's address-space reservation is not available, and uses
/// it when `CHORUS_INSTANCE_ALLOCATOR=on-demand` says so (for hosts that
/// limit address space, and to measure the pool's effect).
pub fn engine(sizing: Sizing) -> (Engine, Slots) {
    let slots = Slots(Arc::new(Semaphore::new(sizing.slots as usize)));
    if std::env::var("CHORUS_INSTANCE_ALLOCATOR").is_ok_and(|v| v == "on-demand") {
        let engine = Engine::new(&base_config()).expect("the engine configuration is valid");
        return (engine, slots);
    }
    let mut config = base_config();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool(sizing)));
    match Engine::new(&config) {
        Ok(engine) => (engine, slots),
        Err(e) => {
            tracing::warn!(
                "cannot reserve the plugin instance pool ({e:#}); allocating plugin instances on demand instead"
            );
            let engine = Engine::new(&base_config()).expect("the engine configuration is valid");
            (engine, slots)
        }
    }
}

fn base_config() -> Config {
    super::engine_config::code_config()
}

fn pool(sizing: Sizing) -> PoolingAllocationConfig {
    let slots = sizing.slots;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .total_core_instances(slots * CORE_INSTANCES_PER_PLUGIN)
        .max_core_instances_per_component(CORE_INSTANCES_PER_PLUGIN)
        .total_memories(slots * MEMORIES_PER_PLUGIN)
        .max_memories_per_component(MEMORIES_PER_PLUGIN)
        .max_memories_per_module(MEMORIES_PER_PLUGIN)
        .total_tables(slots * TABLES_PER_PLUGIN)
        .max_tables_per_component(TABLES_PER_PLUGIN)
        .max_tables_per_module(TABLES_PER_PLUGIN)
        .table_elements(TABLE_ELEMENTS)
        .max_memory_size((sizing.max_memory_mib as usize) << 20)
        .total_stacks(slots)
        .total_gc_heaps(slots)
        .linear_memory_keep_resident(keep_resident())
        .table_keep_resident(keep_resident())
        // Where the kernel can say which pages a call dirtied (Linux 6.7+,
        // PAGEMAP_SCAN), only those are reset, instead of a memset of the
        // whole resident MiB per instance (12 % of a run's CPU measured).
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

/// `KEEP_RESIDENT`, or `CHORUS_POOL_KEEP_RESIDENT` bytes (to measure the
/// trade between memset and page faults).
fn keep_resident() -> usize {
    std::env::var("CHORUS_POOL_KEEP_RESIDENT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(KEEP_RESIDENT)
}
