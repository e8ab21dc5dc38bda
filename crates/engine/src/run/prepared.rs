//! What a run knows of each entity once it is prepared, and the figures its
//! writers keep.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sql2ddb_mapping::{BoundEntity, BoundPointer, EntitySource};
use sql2ddb_source::{PageQuery, Segment};

use super::embed::ChildPlan;
use super::keys::Overwrites;
use crate::progress::EntityProgress;

/// Write-side figures of one entity, updated by the writers.
#[derive(Default)]
pub(super) struct WriteStats {
    pub(super) bytes: AtomicU64,
    pub(super) write_units: AtomicU64,
    pub(super) retries: AtomicU64,
    pub(super) pages: AtomicU64,
    pub(super) started: Mutex<Option<Instant>>,
    pub(super) finished: Mutex<Option<Instant>>,
}

impl WriteStats {
    pub(super) fn touch(&self) {
        *self.finished.lock().expect("stats lock") = Some(Instant::now());
    }
}

/// One entity, resolved against its source and ready to read.
pub(super) struct Prepared {
    pub(super) bound: Arc<BoundEntity>,
    pub(super) query: PageQuery,
    pub(super) segments: Vec<Segment>,
    /// Embedded child rows, fetched per page.
    pub(super) children: Vec<ChildPlan>,
    /// Pointers this entity's rows move.
    pub(super) pointers: Vec<BoundPointer>,
    pub(super) counters: Arc<EntityProgress>,
    pub(super) stats: Arc<WriteStats>,
    /// Rows that landed on an earlier row's item (`overwrite = true` only).
    pub(super) overwrites: Option<Overwrites>,
    /// What the entity reads, to count its rows again at the end.
    pub(super) from: EntitySource,
    /// Rows the source held when the run prepared the entity (with
    /// `--only-rejects`: the rows to replay).
    pub(super) counted: u64,
    /// With `--only-rejects`: the keys of the rows to read again, instead of
    /// the segments.
    pub(super) replay: Option<Vec<Vec<sql2ddb_core::SqlValue>>>,
    /// Segments whose rows read differ from the rows their range held when
    /// they finished, described for the report.
    pub(super) segment_mismatches: Mutex<Vec<String>>,
}
