//! What `verify --deep` takes, and the counters it keeps for progress bars.

use std::sync::atomic::AtomicU64;

use crate::run::RunOptions;

/// What `verify --deep` takes besides the mapping.
#[derive(Debug, Clone)]
pub struct DeepOptions {
    /// Source, endpoint, region, run directory (`runs_dir` and `run_id`),
    /// source connections, segments per entity, page size, snapshot.
    pub run: RunOptions,
    /// Only this entity.
    pub entity: Option<String>,
    /// Only a deterministic fraction (0..=1] of the keys, fetched by key.
    pub sample: Option<f64>,
    /// Read units per second the table side may spend.
    pub max_rcu: Option<u64>,
    /// Segments of the table's Scan.
    pub segments: u32,
    /// Bytes of records held in memory before spilling.
    pub memory_budget: usize,
}

/// Counters for progress bars, updated while the verification runs.
#[derive(Debug, Default)]
pub struct DeepProgress {
    /// Items mapped from the source (kept: in the sample, if any).
    pub expected: AtomicU64,
    /// Items read from the table.
    pub scanned: AtomicU64,
    /// Items compared (expected keys and table items).
    pub compared: AtomicU64,
    /// Buckets to compare, once reading is over.
    pub buckets: AtomicU64,
    /// Buckets compared.
    pub buckets_done: AtomicU64,
}
