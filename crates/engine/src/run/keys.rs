//! The two key rules a run checks before it writes anything: the entity's
//! key is unique and never NULL (or keyset paging skips rows), and its key
//! templates cannot collapse distinct rows onto one item unless the entity
//! says `overwrite = true` (then collapsed rows are counted as overwritten).

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use sql2ddb_core::EncodedItem;
use sql2ddb_mapping::Entity;
use sql2ddb_source::{KeyProof, Relation, Shape, Source};

use crate::error::EngineError;

/// Refuses an entity whose key templates can map two rows to one item,
/// unless it says `overwrite = true`; then returns the counter of the rows
/// that land on an item an earlier row of the run already produced.
pub(super) fn settle(
    entity: &Entity,
    shape: &Shape,
    key: &[String],
    warnings: &mut Vec<String>,
) -> Result<Option<Overwrites>, EngineError> {
    let collapses = entity.collapse_lints(key, Some(&shape.columns));
    if collapses.is_empty() {
        return Ok(None);
    }
    if entity.overwrite {
        warnings.push(format!(
            "entity {:?} has overwrite = true: several rows may map to one item and the last write wins (rows counted as `overwritten`); which row wins is not defined when segments are read in parallel",
            entity.name
        ));
        return Ok(Some(Overwrites::default()));
    }
    let lines: Vec<String> = collapses.iter().map(|l| format!("  {l}")).collect();
    Err(EngineError::Entity {
        entity: entity.name.clone(),
        message: format!(
            "its key templates can map distinct rows to one item, which would overwrite items silently; nothing was written:\n{}\nfix the templates, or set `overwrite = true` in the [[entity]] if several rows per item (last write wins) is what you mean",
            lines.join("\n")
        ),
    })
}

/// Refuses an entity whose key is not proven unique and non-NULL.
pub(super) async fn prove_unique(
    source: &Source,
    entity: &Entity,
    from: &Relation<'_>,
    shape: &Shape,
    key: &[String],
) -> Result<KeyProof, EngineError> {
    let proof = source.prove_unique_key(from, shape, key).await?;
    if let KeyProof::NotProven { reason } = &proof {
        return Err(EngineError::Entity {
            entity: entity.name.clone(),
            message: format!(
                "its key ({}) is not proven unique and non-NULL, so paging by it could skip rows: {reason}. Give the table a primary key or a unique index over NOT NULL columns and use those columns as `key`, or set `key = [...]` to columns that already have one",
                key.join(", ")
            ),
        });
    }
    Ok(proof)
}

/// Rows of an `overwrite = true` entity whose item an earlier row of this
/// run already produced: they are counted as `overwritten`, not as items.
/// Holds one 64-bit hash per distinct item (a few bytes per item, only for
/// entities that opt in).
#[derive(Default)]
pub(super) struct Overwrites {
    seen: Mutex<HashSet<u64>>,
    count: AtomicU64,
    hasher: std::hash::RandomState,
}

impl Overwrites {
    /// Records a page's items.
    pub fn record(&self, items: &[EncodedItem]) {
        let mut seen = self.seen.lock().expect("overwrites lock");
        let mut repeated = 0;
        for m in items {
            if !seen.insert(self.hasher.hash_one(&m.key)) {
                repeated += 1;
            }
        }
        self.count.fetch_add(repeated, Ordering::Relaxed);
    }

    /// Rows so far that overwrote an earlier row's item.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}
