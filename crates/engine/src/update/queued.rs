//! Pages of an update job taken from a queue (`sql2ddb update --queue`):
//! a worker applies the batch's change to each key it carries, one
//! conditional `UpdateItem` or `DeleteItem` each, as the in-process job
//! does, through the same calls and the writer's shared concurrency and
//! write-capacity cap.
//!
//! A condition that fails is no error: the item no longer matched (it is
//! left alone, counted as written and as `skipped`), or, for a change that
//! marks items with its run, an earlier delivery of the same batch already
//! changed it (counted as written). So a redelivered batch, or a page a
//! resumed reader sends again, never changes an item twice.

use std::sync::Arc;

use sql2ddb_core::{EncodedItem, Item, KeyAttr, UpdatePage};
use sql2ddb_dynamo::update::{write_item, ConditionalWrite, ItemOutcome, Pace};
use sql2ddb_dynamo::{
    AdaptiveConcurrency, Dynamo, DynamoError, Failure, Pacer, RetryPolicy, WriteCapacityLimiter,
};

use crate::error::EngineError;
use crate::outcome::BatchOutcome;

/// Items of one batch being written at once (each call also takes a permit
/// of the shared concurrency, so this only bounds the tasks).
const ITEMS_AT_ONCE: usize = 64;

/// How a worker applies update batches: the writer's client, retries,
/// concurrency and capacity cap.
#[derive(Clone)]
pub struct UpdateApplier {
    /// The DynamoDB client.
    pub client: Dynamo,
    /// Retries of each conditional write.
    pub retry: RetryPolicy,
    /// Calls in flight, shared with the batch writer.
    pub concurrency: Arc<AdaptiveConcurrency>,
    /// The write-capacity cap, shared with the batch writer.
    pub limiter: Option<Arc<WriteCapacityLimiter>>,
    /// The rates the table admits, learned from its answers, shared with
    /// the batch writer.
    pub pacer: Arc<Pacer>,
}

/// What became of one key.
enum Applied {
    Written {
        units: u64,
        skipped: bool,
    },
    Refused(String),
    Failed(String),
    /// The table kept refusing it (throttled) past the retry budget.
    Throttled(String),
    TableFault(String),
}

impl UpdateApplier {
    /// Applies the page's change to every key it carries. Keys DynamoDB
    /// refuses (validation) come back with their reason, to be rejected; a
    /// table that cannot be written at all fails the page.
    pub(crate) async fn apply(
        &self,
        page: &UpdatePage,
    ) -> Result<(BatchOutcome, Vec<(EncodedItem, String)>), EngineError> {
        let write = Arc::new(ConditionalWrite::from_change(&page.change));
        let keys = Arc::new(page.change.keys.clone());
        let mut results = Vec::with_capacity(page.keys.len());
        let items: Vec<Item> = page.keys.iter().map(|m| m.key_item(&keys)).collect();
        let alone = super::alone_of_their_key(&items, &keys);
        let mut tasks = tokio::task::JoinSet::new();
        for (i, (item, alone)) in items.into_iter().zip(alone).enumerate() {
            if tasks.len() >= ITEMS_AT_ONCE {
                results.push(joined(tasks.join_next().await)?);
            }
            let (me, write, keys) = (self.clone(), write.clone(), keys.clone());
            let size = page.keys[i].size;
            tasks.spawn(async move {
                let (applied, retries) = me.apply_one(&write, &keys, (&item, size), alone).await;
                (i, applied, retries)
            });
        }
        while let Some(done) = tasks.join_next().await {
            results.push(joined(Some(done))?);
        }
        // Not the keys' fault: the table kept refusing them. The batch
        // fails whole and stays on the queue, to come back later.
        let throttled: Vec<(usize, &String)> = results
            .iter()
            .filter_map(|(i, a, _)| match a {
                Applied::Throttled(reason) => Some((*i, reason)),
                _ => None,
            })
            .collect();
        if let Some((i, reason)) = throttled.first() {
            return Err(EngineError::Dynamo(DynamoError::KeptRefusing {
                table: page.change.table.clone(),
                items: throttled.len() as u64,
                first: format!(
                    "entity {}, key {}: {reason}",
                    page.entity,
                    page.keys[*i].source_key.get()
                ),
            }));
        }
        let mut out = BatchOutcome::default();
        let mut refused = Vec::new();
        for (i, applied, retries) in results {
            out.retries += retries;
            let m = &page.keys[i];
            match applied {
                Applied::Written { units, skipped } => {
                    out.written += 1;
                    out.skipped += u64::from(skipped);
                    // A skipped key's item was left as it was: no bytes written.
                    out.bytes += if skipped { 0 } else { m.size as u64 };
                    out.write_units += units;
                }
                Applied::Refused(reason) => {
                    out.rejected += 1;
                    refused.push((m.clone(), reason));
                }
                Applied::Failed(reason) => {
                    out.failed += 1;
                    tracing::warn!(entity = %page.entity, key = %m.source_key, "{reason}");
                }
                Applied::Throttled(_) => unreachable!("the batch failed above"),
                // Not a bad key: the table cannot be written at all. The
                // batch fails whole, so it is retried or dead-lettered.
                Applied::TableFault(reason) => {
                    return Err(EngineError::Entity {
                        entity: page.entity.clone(),
                        message: format!("the table cannot be written: {reason}"),
                    })
                }
            }
        }
        Ok((out, refused))
    }

    /// Applies the change to one key (`item`, of an item of `size` bytes),
    /// `alone` if its partition key has few keys in the page
    /// ([`super::alone_of_their_key`]).
    async fn apply_one(
        &self,
        write: &ConditionalWrite,
        keys: &[KeyAttr],
        (item, size): (&Item, usize),
        alone: bool,
    ) -> (Applied, u64) {
        let estimate = sql2ddb_core::write_units(size);
        if let Some(l) = &self.limiter {
            l.acquire(estimate).await;
        }
        let pace = Pace {
            pacer: &self.pacer,
            units: estimate,
            alone,
        };
        let result = write_item(
            &self.client,
            write,
            keys,
            item,
            &self.retry,
            Some(&self.concurrency),
            Some(pace),
        )
        .await;
        match result {
            Ok(w) => {
                let (units, skipped) = match w.outcome {
                    ItemOutcome::Written { write_units } if write_units > 0.0 => {
                        (write_units.ceil() as u64, false)
                    }
                    ItemOutcome::Written { .. } => (estimate, false),
                    ItemOutcome::Skipped => (0, true),
                };
                (Applied::Written { units, skipped }, w.retries)
            }
            Err(e) => {
                let reason = sql2ddb_core::redact_secrets(&e.to_string());
                let applied = match e.failure() {
                    Some(Failure::ItemRejected) => Applied::Refused(reason),
                    Some(Failure::TableFault) => Applied::TableFault(reason),
                    Some(Failure::Throttled) => Applied::Throttled(reason),
                    _ => Applied::Failed(reason),
                };
                (applied, 0)
            }
        }
    }
}

/// A finished item task's result; a task that panicked fails the batch.
fn joined(
    done: Option<Result<(usize, Applied, u64), tokio::task::JoinError>>,
) -> Result<(usize, Applied, u64), EngineError> {
    match done {
        Some(Ok(r)) => Ok(r),
        Some(Err(e)) => Err(EngineError::Worker(format!("an update task failed: {e}"))),
        None => Err(EngineError::Worker("an update task vanished".into())),
    }
}
