//! The expected side's intake: each mapped page's items put in their
//! buckets by key hash, as both passes of a verification need them.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use sql2ddb_core::WorkBatch;

use super::canon::{in_sample, key_text, stable_hash};
use super::digest::Sink;
use super::pointers::PointerMax;
use super::spill::Record;
use super::table::TableSide;
use crate::error::EngineError;

/// Puts a mapped page's items in their buckets (those in the sample, with
/// one). In the first pass (`first`: its pointer maximums) the page's
/// pointer candidates are offered and its items counted.
pub(crate) fn take_batch<S: Sink>(
    batch: WorkBatch,
    side: &TableSide,
    sample: Option<f64>,
    expected: &Mutex<S>,
    first: Option<&mut PointerMax>,
) -> Result<(), EngineError> {
    let mut buckets = expected.lock().expect("buckets lock");
    let counted = first.is_some();
    for m in batch.items {
        // Read back from the text the run would write: what is compared is
        // exactly what a write would send.
        let item = m.decode().map_err(|message| EngineError::Entity {
            entity: batch.entity.clone(),
            message: message.to_string(),
        })?;
        let Some(key) = key_text(&item, &side.keys) else {
            continue;
        };
        let hash = stable_hash(&key);
        if sample.is_some_and(|f| !in_sample(hash, f)) {
            continue;
        }
        let record = Record {
            key,
            entity: batch.entity.clone(),
            item,
            source_key: Some(m.source_key),
        };
        buckets.push(hash, record)?;
        if counted {
            side.progress.expected.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(pointers) = first {
        for p in batch.pointers {
            pointers.offer(p.update);
        }
    }
    Ok(())
}
