//! The write side of a run: writer tasks draining the queue. The same
//! [`BatchSink::write_batch`] serves in-process runs and queue workers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sql2ddb_core::{MappedItem, Reject, WorkBatch};
use sql2ddb_dynamo::{BatchWriter, Client};
use sql2ddb_queue::Consumer;

use super::Prepared;
use crate::error::EngineError;
use crate::progress::EntityProgress;
use crate::rejects::RejectsFile;

/// What became of one batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Rows whose item is in the table.
    pub written: u64,
    /// Rows DynamoDB refused (validation): rejected.
    pub rejected: u64,
    /// Rows still unwritten when the retry budget ran out.
    pub failed: u64,
    /// Bytes written, by DynamoDB's size rules.
    pub bytes: u64,
    /// Write units billed.
    pub write_units: u64,
    /// Calls retried.
    pub retries: u64,
}

/// Writes batches: items, then (later) pointers; refused rows go to the
/// rejects file. Without a writer (a dry run) items count as written and
/// nothing is sent.
pub struct BatchSink {
    /// The writer; `None` in a dry run.
    pub writer: Option<Arc<BatchWriter<Client>>>,
    /// Where refused rows go.
    pub rejects: Arc<RejectsFile>,
    /// Calls throttled or answered with unprocessed items, over all batches.
    pub throttled: AtomicU64,
}

impl BatchSink {
    /// Writes one batch and records what was refused.
    pub async fn write_batch(&self, batch: WorkBatch) -> Result<BatchOutcome, EngineError> {
        let Some(writer) = &self.writer else {
            return Ok(BatchOutcome {
                written: batch.items.len() as u64,
                bytes: batch.items.iter().map(|m| m.size as u64).sum(),
                write_units: batch
                    .items
                    .iter()
                    .map(|m| sql2ddb_core::write_units(m.size))
                    .sum(),
                ..BatchOutcome::default()
            });
        };
        let out = writer.write(batch.items).await;
        self.throttled.fetch_add(out.throttled, Ordering::Relaxed);
        let refused: Vec<Reject> = out
            .rejected
            .iter()
            .chain(out.failed.iter())
            .map(|(m, reason)| write_reject(&batch.entity, m, reason))
            .collect();
        self.rejects.write(&refused)?;
        Ok(BatchOutcome {
            written: out.written,
            rejected: out.rejected.len() as u64,
            failed: out.failed.len() as u64,
            bytes: out.bytes,
            write_units: out.write_units,
            retries: out.retries,
        })
    }
}

/// Writes batches from the in-process queue until it ends, counting per entity.
pub(super) async fn drain(
    consumer: Consumer,
    sink: Arc<BatchSink>,
    entities: Arc<Vec<Arc<Prepared>>>,
) -> Result<(), EngineError> {
    while let Some(batch) = consumer.pop().await {
        let p = entities
            .iter()
            .find(|p| p.bound.name() == batch.entity)
            .expect("batches come from known entities");
        let out = sink.write_batch(batch).await?;
        let (counters, stats) = (&p.counters, &p.stats);
        EntityProgress::add(&counters.written, out.written);
        EntityProgress::add(&counters.rejected, out.rejected);
        EntityProgress::add(&counters.failed, out.failed);
        stats.bytes.fetch_add(out.bytes, Ordering::Relaxed);
        stats
            .write_units
            .fetch_add(out.write_units, Ordering::Relaxed);
        stats.retries.fetch_add(out.retries, Ordering::Relaxed);
        stats.touch();
    }
    Ok(())
}

/// A reject for an item DynamoDB refused or that ran out of retries.
fn write_reject(entity: &str, m: &MappedItem, reason: &str) -> Reject {
    Reject {
        entity: entity.to_string(),
        key: m.source_key.clone(),
        column: None,
        reason: reason.to_string(),
        row: sql2ddb_core::attr::map_to_dynamo_json(&m.item),
    }
}
