//! The in-process run's writer tasks: they drain the queue through the one
//! write path ([`crate::sink::BatchSink`]) and count per entity.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sql2ddb_core::WorkBatch;
use sql2ddb_queue::Consumer;

use super::prepared::Prepared;
use crate::checkpoint::{BatchId, Checkpoints};
use crate::error::EngineError;
use crate::progress::EntityProgress;
use crate::sink::BatchSink;
use crate::stop::StopSignal;

/// Writes batches from the in-process queue until it ends, or until
/// `failed` is raised (a writer failed: the table or the progress table
/// cannot be written, so the batches left stay pending), counting per
/// entity.
pub(super) async fn drain(
    consumer: Consumer<WorkBatch>,
    sink: Arc<BatchSink>,
    entities: Arc<Vec<Arc<Prepared>>>,
    checkpoints: Option<Arc<Checkpoints>>,
    failed: Arc<StopSignal>,
) -> Result<(), EngineError> {
    loop {
        let batch = tokio::select! {
            biased;
            _ = failed.stopped() => break,
            batch = consumer.pop() => match batch {
                Some(batch) => batch,
                None => break,
            },
        };
        let p = entities
            .iter()
            .find(|p| p.bound.name() == batch.entity)
            .expect("batches come from known entities");
        let id = BatchId::of(&batch);
        let out = sink.write_batch(batch).await?;
        // Counted before it is recorded: the rows are in the table (or
        // refused) even if the record then fails.
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
        if let Some(c) = &checkpoints {
            c.written(&id, &out).await?;
        }
    }
    Ok(())
}
