//! The one write path: [`BatchSink::write_batch`] writes a batch's items,
//! then its pointers, and records what was refused. In-process runs, queue
//! workers (and the jobs to come) all write through it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sql2ddb_core::{AttrValue, EncodedItem, KeyAttr, PointerUpdate, Reject, WorkBatch};
use sql2ddb_dynamo::{
    write_pointer, AdaptiveConcurrency, BatchCalls, Dynamo, Failure, PointerOutcome, RetryPolicy,
    TableWriter, WriteCapacityLimiter,
};
use sql2ddb_mapping::Plan;

use crate::error::EngineError;
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
    /// Of `written`, keys of an update batch left alone because the item no
    /// longer met the job's `where` when it was written.
    pub skipped: u64,
}

/// Writes batches: items, then (later) pointers; refused rows go to the
/// rejects file. Without a writer (a dry run) items count as written and
/// nothing is sent.
pub struct BatchSink {
    /// The writer; `None` in a dry run.
    pub writer: Option<Arc<TableWriter>>,
    /// Where refused rows go.
    pub rejects: Arc<RejectsFile>,
    /// Calls throttled or answered with unprocessed items, over all batches.
    pub throttled: AtomicU64,
    /// Where pointer updates go; `None` in a dry run.
    pub pointers: Option<PointerTarget>,
    /// What each pointer did, by name.
    pub pointer_stats: Mutex<BTreeMap<String, PointerStats>>,
    /// Files the items go to instead (`sql2ddb export`).
    pub files: Option<Arc<crate::export::ItemFiles>>,
    /// How update batches are applied; `None` in a dry run.
    pub updates: Option<crate::update::UpdateApplier>,
}

/// The table pointer items are written to.
pub struct PointerTarget {
    /// The client.
    pub client: Dynamo,
    /// Target table.
    pub table: String,
    /// The table's key attributes (partition key first).
    pub keys: Vec<KeyAttr>,
    /// Retries of a pointer write.
    pub retry: RetryPolicy,
}

/// Counts of one pointer.
#[derive(Debug, Default, Clone)]
pub struct PointerStats {
    /// Conditional writes that moved it.
    pub moved: u64,
    /// Conditional writes that found a newer value there.
    pub already_newer: u64,
    /// Distinct pointer items, with the last update of each (to read them back).
    pub items: BTreeMap<String, PointerUpdate>,
}

/// The calls in flight (adapting to throttling unless `adaptive` is off)
/// and the write-capacity cap a process's writes share.
fn write_limits(
    concurrency: usize,
    adaptive: bool,
    max_wcu: Option<u64>,
) -> (Arc<AdaptiveConcurrency>, Option<Arc<WriteCapacityLimiter>>) {
    let controller = Arc::new(match adaptive {
        true => AdaptiveConcurrency::new(concurrency),
        false => AdaptiveConcurrency::fixed(concurrency),
    });
    let limiter = max_wcu.map(|w| Arc::new(WriteCapacityLimiter::new(w)));
    (controller, limiter)
}

impl BatchSink {
    /// A sink that applies update batches only (a worker started with an
    /// update job: no mapping, so no batch writer and no pointers).
    pub fn for_updates(
        client: &Dynamo,
        opts: &SinkOptions,
        rejects: Arc<RejectsFile>,
    ) -> BatchSink {
        // Conditional writes in flight: one call per key, so more than batches.
        let concurrency = opts
            .concurrency
            .unwrap_or(1)
            .max(crate::update::DEFAULT_UPDATE_CONCURRENCY);
        let max_wcu = opts.max_wcu.filter(|w| *w > 0);
        let (controller, limiter) = write_limits(concurrency, !opts.fixed_concurrency, max_wcu);
        BatchSink {
            writer: None,
            rejects,
            throttled: Default::default(),
            pointers: None,
            pointer_stats: Default::default(),
            files: None,
            updates: Some(crate::update::UpdateApplier {
                client: client.clone(),
                retry: opts.retry,
                concurrency: controller,
                limiter,
            }),
        }
    }

    /// The sink a process writing `plan`'s table builds (`sql2ddb run` and
    /// `sql2ddb worker` alike): the mapping's `[writer]` settings with the
    /// options' overrides, writing batches through `calls` and pointers
    /// and updates through `client`, refused rows to `rejects`.
    pub fn for_plan(
        plan: &Plan,
        opts: &SinkOptions,
        client: &Dynamo,
        calls: &BatchCalls,
        rejects: Arc<RejectsFile>,
    ) -> Arc<BatchSink> {
        build_sink(plan, opts, client, calls, rejects).sink
    }

    /// Writes one batch and records what was refused.
    pub async fn write_batch(&self, batch: WorkBatch) -> Result<BatchOutcome, EngineError> {
        if batch.update.is_some() {
            return self.apply_update(batch).await;
        }
        if let Some(files) = &self.files {
            return files.write_batch(batch).await;
        }
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
        let mut items = batch.items;
        let all_keys: Vec<Vec<AttrValue>> = match &self.pointers {
            Some(t) if !batch.pointers.is_empty() => {
                // A page queued by an older release carries no key values.
                for m in &mut items {
                    m.ensure_key(&t.keys);
                }
                items.iter().map(|m| m.key.clone()).collect()
            }
            _ => Vec::new(),
        };
        let out = writer.write(items).await;
        self.throttled.fetch_add(out.throttled, Ordering::Relaxed);
        if let Some((_, e)) = out
            .rejected
            .iter()
            .find(|(_, e)| e.failure == Failure::TableFault)
        {
            // Not a bad row: the table cannot be written at all. The batch
            // fails whole, so it is retried or dead-lettered, never "rejected".
            return Err(EngineError::Entity {
                entity: batch.entity,
                message: format!("the table cannot be written: {}", e.message),
            });
        }
        if !batch.pointers.is_empty() {
            // A pointer moves only once the item it points at is written.
            let not_written: BTreeSet<Vec<AttrValue>> = out
                .rejected
                .iter()
                .map(|(m, _)| m)
                .chain(out.failed.iter().map(|(m, _)| m))
                .map(|m| m.key.clone())
                .collect();
            let written: BTreeSet<&Vec<AttrValue>> = all_keys
                .iter()
                .filter(|k| !not_written.contains(*k))
                .collect();
            for p in &batch.pointers {
                if written.contains(&p.item_key) {
                    self.move_pointer(&p.update).await?;
                }
            }
        }
        let refused: Vec<Reject> = out
            .rejected
            .iter()
            .map(|(m, e)| (m, &e.message))
            .chain(out.failed.iter().map(|(m, reason)| (m, reason)))
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
            skipped: 0,
        })
    }
}

/// What a process's writer takes besides the mapping's `[writer]` section.
#[derive(Debug, Clone)]
pub struct SinkOptions {
    /// Overrides the mapping's writer concurrency.
    pub concurrency: Option<usize>,
    /// Keeps concurrency fixed instead of adapting to throttling.
    pub fixed_concurrency: bool,
    /// Overrides the mapping's `max_wcu`.
    pub max_wcu: Option<u64>,
    /// Retry parameters (the mapping's `max_attempts` overrides the attempts).
    pub retry: RetryPolicy,
    /// Write nothing: every item counts as written.
    pub dry_run: bool,
    /// Write the items to files instead (`sql2ddb export`).
    pub export: Option<Arc<crate::export::ItemFiles>>,
}

/// A sink and the shared limits its writer obeys.
pub(crate) struct SinkSetup {
    pub sink: Arc<BatchSink>,
    pub controller: Arc<AdaptiveConcurrency>,
    pub limiter: Option<Arc<WriteCapacityLimiter>>,
    pub max_wcu: Option<u64>,
    pub concurrency: usize,
}

/// The sink of a process that writes `plan`'s table: the mapping's writer
/// settings with the options' overrides. In-process runs and queue workers
/// build it the same way.
pub(crate) fn build_sink(
    plan: &Plan,
    opts: &SinkOptions,
    client: &Dynamo,
    calls: &BatchCalls,
    rejects: Arc<RejectsFile>,
) -> SinkSetup {
    let concurrency = opts.concurrency.unwrap_or(plan.writer.concurrency).max(1);
    let adaptive = plan.writer.adaptive && !opts.fixed_concurrency;
    let max_wcu = opts.max_wcu.or(plan.writer.max_wcu).filter(|w| *w > 0);
    let (controller, limiter) = write_limits(concurrency, adaptive, max_wcu);
    let sink = Arc::new(BatchSink {
        writer: (!opts.dry_run).then(|| {
            let retry = RetryPolicy {
                max_attempts: plan.writer.max_attempts,
                ..opts.retry
            };
            let mut w = TableWriter::new(
                calls.clone(),
                plan.target.table.clone(),
                plan.key_attrs(),
                retry,
            )
            .with_concurrency(controller.clone());
            if let Some(l) = &limiter {
                // Each GSI bills its own write for an item it projects.
                w = w.with_capacity_limit(l.clone(), 1 + plan.target.gsis.len() as u64);
            }
            if let Some(secs) = plan.writer.retry_seconds {
                w = w.with_retry_deadline(std::time::Duration::from_secs(secs));
            }
            Arc::new(w)
        }),
        rejects,
        throttled: Default::default(),
        pointers: (!opts.dry_run).then(|| PointerTarget {
            client: client.clone(),
            table: plan.target.table.clone(),
            keys: plan.key_attrs(),
            retry: opts.retry,
        }),
        pointer_stats: Default::default(),
        files: opts.export.clone(),
        updates: (!opts.dry_run && opts.export.is_none()).then(|| crate::update::UpdateApplier {
            client: client.clone(),
            retry: opts.retry,
            concurrency: controller.clone(),
            limiter: limiter.clone(),
        }),
    });
    SinkSetup {
        sink,
        controller,
        limiter,
        max_wcu,
        concurrency,
    }
}

impl BatchSink {
    /// Applies an update job's batch (`sql2ddb update --queue`) to the keys
    /// it carries; keys DynamoDB refuses go to the rejects file.
    async fn apply_update(&self, batch: WorkBatch) -> Result<BatchOutcome, EngineError> {
        let change = batch.update.as_ref().expect("an update batch");
        if self.files.is_some() {
            return Err(EngineError::Entity {
                entity: batch.entity.clone(),
                message: "an export writes files: it cannot apply an update job's batch".into(),
            });
        }
        let Some(applier) = &self.updates else {
            return Ok(BatchOutcome {
                written: batch.items.len() as u64,
                ..BatchOutcome::default()
            });
        };
        let (out, refused) = applier.apply(&batch, change).await?;
        let refused: Vec<Reject> = refused
            .iter()
            .map(|(m, reason)| write_reject(&batch.entity, m, reason))
            .collect();
        self.rejects.write(&refused)?;
        Ok(out)
    }

    async fn move_pointer(&self, update: &PointerUpdate) -> Result<(), EngineError> {
        let Some(t) = &self.pointers else {
            return Ok(());
        };
        let outcome = write_pointer(&t.client, &t.table, &t.keys, update, &t.retry).await?;
        let mut stats = self.pointer_stats.lock().expect("pointer stats lock");
        let s = stats.entry(update.name.clone()).or_default();
        match outcome {
            PointerOutcome::Written => s.moved += 1,
            PointerOutcome::AlreadyNewer => s.already_newer += 1,
        }
        let item = format!("{:?}/{:?}", update.pk, update.sk);
        s.items.insert(item, update.clone());
        Ok(())
    }
}

/// A reject for an item DynamoDB refused or that ran out of retries.
fn write_reject(entity: &str, m: &EncodedItem, reason: &str) -> Reject {
    Reject {
        entity: entity.to_string(),
        key: m.source_key.to_json(),
        column: None,
        reason: reason.to_string(),
        row: m.to_json(),
    }
}
