//! A full `verify --deep` in two passes. The first reads both sides at once
//! (the source through the run's stages, the table by a parallel Scan) into
//! per-bucket digests ([`Digests`]): memory holds a few dozen bytes per
//! bucket, nothing is spilled. Buckets whose digests are equal hold the same
//! items on both sides and are counted identical. Only when some differ, a
//! second pass reads both sides again, keeps the records of those buckets
//! alone ([`Resolver`], spilled to files past the memory budget) and
//! compares them key by key, bucket by bucket.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use sql2ddb_core::WorkBatch;

use super::compare::Findings;
use super::digest::{Digests, Resolver};
use super::options::{DeepOptions, DeepProgress};
use super::pointers::PointerMax;
use super::spill::Buckets;
use super::table::TableSide;
use super::take::take_batch;
use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::run::expected::SourceItems;

/// Source rows per bucket of the digests aimed at: the fewer rows a bucket
/// holds, the fewer a difference makes the second pass keep.
const ROWS_PER_BUCKET: u64 = 1_000;
/// Fewest and most buckets (at most a few MB of digests).
const BUCKETS: (u64, u64) = (16, 65_536);

/// What the two passes did, for the report.
pub struct Outcome {
    /// Buckets of the digests.
    pub buckets: u64,
    /// Buckets whose digests differed, resolved key by key.
    pub resolved: u64,
    /// Bytes the second pass spilled to files.
    pub spilled_bytes: u64,
    /// Rows each entity (by name) rejected, counted by the first pass.
    pub rejected: Vec<(String, u64)>,
    /// Items the first pass read from the table.
    pub items_read: u64,
    /// Of those, items outside the mapping's key space.
    pub outside: u64,
}

/// What the passes read and compare with.
pub struct Full<'a> {
    /// The table side.
    pub side: &'a Arc<TableSide>,
    /// The options.
    pub opts: &'a DeepOptions,
    /// The entities read from the source, in the plan's order.
    pub names: &'a [String],
    /// Where the second pass spills.
    pub spill_dir: &'a Path,
    /// Progress counters.
    pub progress: (&'a RunProgress, &'a DeepProgress),
}

impl Full<'_> {
    /// Runs both passes, writing the differences to `findings`.
    pub async fn run(
        &self,
        source: &mut SourceItems,
        findings: &mut Findings,
        pointers: &mut PointerMax,
    ) -> Result<Outcome, EngineError> {
        let count = (source.rows() / ROWS_PER_BUCKET).clamp(BUCKETS.0, BUCKETS.1) as usize;
        let expected = Arc::new(Mutex::new(Digests::new(count, self.names)));
        let actual = Arc::new(Mutex::new(Digests::new(count, &self.side.names)));
        let side = self.side;
        let take = |batch: WorkBatch| take_batch(batch, side, None, &expected, Some(pointers));
        let (r, s) = tokio::join!(source.read(take), side.scan(self.opts.segments, &actual));
        r.and(s)?;
        let (rows, deep) = self.progress;
        let rejected = self
            .names
            .iter()
            .map(|n| (n.clone(), rows.entity(n).rejected.load(Ordering::Relaxed)))
            .collect();
        let items_read = deep.scanned.load(Ordering::Relaxed);
        let outside = side.outside.load(Ordering::Relaxed);
        let wanted = {
            let (expected, actual) = (
                expected.lock().expect("digests lock"),
                actual.lock().expect("digests lock"),
            );
            let wanted = expected.differing(&actual);
            let same = expected.items_outside(&wanted);
            for (name, n) in self.names.iter().zip(&same) {
                findings.add_identical(name, *n);
            }
            let same_actual: u64 = actual.items_outside(&wanted).iter().sum();
            let compared = same.iter().sum::<u64>() + same_actual;
            deep.compared.fetch_add(compared, Ordering::Relaxed);
            wanted
        };
        let resolved = wanted.iter().filter(|w| **w).count() as u64;
        deep.buckets.store(resolved, Ordering::Relaxed);
        tracing::info!(buckets = count, resolved, "digests compared");
        let spilled_bytes = match resolved {
            0 => 0,
            _ => self.resolve(source, findings, wanted).await?,
        };
        Ok(Outcome {
            buckets: count as u64,
            resolved,
            spilled_bytes,
            rejected,
            items_read,
            outside,
        })
    }

    /// The second pass: both sides read again, the records of the `wanted`
    /// buckets kept and compared key by key. Returns the bytes spilled.
    async fn resolve(
        &self,
        source: &mut SourceItems,
        findings: &mut Findings,
        wanted: Vec<bool>,
    ) -> Result<u64, EngineError> {
        let dir = self.spill_dir;
        std::fs::create_dir_all(dir).map_err(|e| EngineError::io(dir, e))?;
        // The first pass listed the rejected rows already.
        source.rejects_to(&dir.join("rejects-again.jsonl"));
        let half = (self.opts.memory_budget / 2).max(1);
        let resolver = |side: &'static str| {
            Arc::new(Mutex::new(Resolver {
                buckets: Buckets::new(dir, side, wanted.len(), half),
                wanted: wanted.clone(),
            }))
        };
        let (expected, actual) = (resolver("expected"), resolver("actual"));
        let side = self.side;
        let take = |batch: WorkBatch| take_batch(batch, side, None, &expected, None);
        let (r, s) = tokio::join!(source.read(take), side.scan(self.opts.segments, &actual));
        r.and(s)?;
        let deep = self.progress.1;
        let (mut expected, mut actual) = (
            expected.lock().expect("resolver lock"),
            actual.lock().expect("resolver lock"),
        );
        for bucket in (0..wanted.len()).filter(|b| wanted[*b]) {
            let exp = expected.buckets.take(bucket)?;
            let act = actual.buckets.take(bucket)?;
            let n = findings.compare(exp, act)?;
            deep.compared.fetch_add(n, Ordering::Relaxed);
            deep.buckets_done.fetch_add(1, Ordering::Relaxed);
        }
        Ok(expected.buckets.spilled_bytes() + actual.buckets.spilled_bytes())
    }
}
