//! The write side of a run: writer tasks draining the queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sql2ddb_core::{MappedItem, Reject};
use sql2ddb_dynamo::{BatchWriter, Client};
use sql2ddb_queue::Consumer;

use super::Prepared;
use crate::error::EngineError;
use crate::progress::EntityProgress;
use crate::rejects::RejectsFile;

/// Writes batches until the queue ends. Without a writer (a dry run) every
/// mapped item counts as written and nothing is sent.
pub(super) async fn drain(
    consumer: Consumer,
    writer: Option<Arc<BatchWriter<Client>>>,
    entities: Arc<Vec<Arc<Prepared>>>,
    rejects: Arc<RejectsFile>,
) -> Result<(), EngineError> {
    while let Some(batch) = consumer.pop().await {
        let p = entities
            .iter()
            .find(|p| p.bound.name() == batch.entity)
            .expect("batches come from known entities");
        let (counters, stats) = (&p.counters, &p.stats);
        let Some(writer) = &writer else {
            EntityProgress::add(&counters.written, batch.items.len() as u64);
            let bytes: usize = batch.items.iter().map(|m| m.size).sum();
            stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            let units: u64 = batch
                .items
                .iter()
                .map(|m| sql2ddb_core::write_units(m.size))
                .sum();
            stats.write_units.fetch_add(units, Ordering::Relaxed);
            stats.touch();
            continue;
        };
        let out = writer.write(batch.items).await;
        EntityProgress::add(&counters.written, out.written);
        EntityProgress::add(&counters.rejected, out.rejected.len() as u64);
        EntityProgress::add(&counters.failed, out.failed.len() as u64);
        stats.bytes.fetch_add(out.bytes, Ordering::Relaxed);
        stats
            .write_units
            .fetch_add(out.write_units, Ordering::Relaxed);
        stats.retries.fetch_add(out.retries, Ordering::Relaxed);
        stats.touch();
        let refused: Vec<Reject> = out
            .rejected
            .iter()
            .chain(out.failed.iter())
            .map(|(m, reason)| write_reject(&batch.entity, m, reason))
            .collect();
        rejects.write(&refused)?;
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
