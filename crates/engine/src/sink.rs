//! The one write path, at the end of read → map → sink: a page goes to
//! the one [`Destination`] the job was started with. [`BatchSink::write_batch`]
//! writes a migration page's items, then its pointers (or its lines into
//! export files), [`BatchSink::apply_updates`] applies an update job's page
//! to the keys it carries; both record what was refused. In-process runs,
//! exports and queue workers all write through it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sql2ddb_core::{
    AttrValue, BatchPointer, EncodedItem, KeyAttr, PointerUpdate, Reject, UpdatePage, WorkBatch,
};
use sql2ddb_dynamo::{
    write_pointer, AdaptiveConcurrency, BatchCalls, Dynamo, DynamoError, Failure, Pacer,
    PointerOutcome, RetryPolicy, TableWriter, WriteCapacityLimiter, WriteOutcome,
};
use sql2ddb_mapping::Plan;
use sql2ddb_queue::Message;

use crate::error::EngineError;
use crate::export::files::ItemFiles;
pub use crate::outcome::BatchOutcome;
use crate::rejects::RejectsFile;
use crate::settings::{max_wcu, retry_budget, WriterFlags, WriterSettings};
use crate::update::UpdateApplier;

mod pointers;
pub use pointers::{PointerStats, KEYS_COUNTED};

/// Where a job's pages go: one choice, made by whoever starts the job and
/// handed to it.
#[derive(Debug, Clone, Default)]
pub enum Destination {
    /// The mapping's DynamoDB table: items, then pointers. A worker writing
    /// it also applies an update job's pages of the same table.
    #[default]
    Table,
    /// Files for DynamoDB's import from S3 (`sql2ddb export`): no DynamoDB
    /// call at all.
    Files(Arc<ItemFiles>),
    /// An update job's changes, applied to the keys its pages carry (a
    /// worker started with the job instead of a mapping: it cannot write
    /// a migration's pages).
    Updates,
}

/// Writes pages to its destination and records what was refused. In a
/// dry run, items count as written and nothing is sent.
pub struct BatchSink {
    /// Where the pages go.
    route: Route,
    /// Where refused rows go.
    pub rejects: Arc<RejectsFile>,
    /// Calls throttled or answered with unprocessed items, over all batches.
    pub throttled: AtomicU64,
    /// What each pointer did, by name.
    pub pointer_stats: Mutex<BTreeMap<String, PointerStats>>,
    /// The calls in flight and the capacity cap its writes obey.
    pub(crate) limits: WriteLimits,
}

/// The calls in flight and the write-capacity cap a process's writes share,
/// and the cap as resolved (the limiter's rate is the process's share of it
/// when it works in a fleet).
#[derive(Clone)]
pub(crate) struct WriteLimits {
    pub controller: Arc<AdaptiveConcurrency>,
    pub limiter: Option<Arc<WriteCapacityLimiter>>,
    pub cap: Option<u64>,
    /// The pacer of the process's writes to the table, batched or not.
    pub pacer: Arc<Pacer>,
}

/// A [`Destination`] made ready to write.
enum Route {
    /// The table: items through the writer, pointers through their
    /// target, update pages through the applier (all sharing one
    /// concurrency and capacity cap).
    Table {
        writer: Arc<TableWriter>,
        pointers: PointerTarget,
        updates: UpdateApplier,
    },
    /// A dry run: nothing is sent.
    Nowhere,
    /// Export files.
    Files(Arc<ItemFiles>),
    /// An update job's worker.
    Updates(UpdateApplier),
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

/// The calls in flight (adapting to throttling unless `adaptive` is off)
/// and the write-capacity cap a process's writes share.
pub(crate) fn write_limits(
    settings: &WriterSettings,
) -> (Arc<AdaptiveConcurrency>, Option<Arc<WriteCapacityLimiter>>) {
    let controller = Arc::new(match settings.adaptive {
        true => AdaptiveConcurrency::new(settings.concurrency),
        false => AdaptiveConcurrency::fixed(settings.concurrency),
    });
    let limiter = settings
        .max_wcu
        .map(|w| Arc::new(WriteCapacityLimiter::new(w)));
    (controller, limiter)
}

impl BatchSink {
    /// The sink of [`Destination::Updates`]: it applies update pages only (a
    /// worker started with an update job: no mapping, so no batch writer
    /// and no pointers).
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
        // No mapping: the budget is the flag's, else the default.
        let retry = opts
            .retry
            .with_throttle_budget(retry_budget(opts.retry_budget, None));
        let (controller, limiter) = write_limits(&WriterSettings {
            concurrency,
            adaptive: !opts.fixed_concurrency,
            // No mapping: the flag's cap, by the one rule.
            max_wcu: max_wcu(opts.max_wcu, None),
            retry,
        });
        let cap = max_wcu(opts.max_wcu, None);
        let pacer = Arc::new(Pacer::new());
        BatchSink {
            route: Route::Updates(UpdateApplier {
                client: client.clone(),
                retry,
                concurrency: controller.clone(),
                limiter: limiter.clone(),
                pacer: pacer.clone(),
            }),
            rejects,
            throttled: Default::default(),
            pointer_stats: Default::default(),
            limits: WriteLimits {
                controller,
                limiter,
                cap,
                pacer,
            },
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

    /// Whether a migration's pages can be written here (not by a worker
    /// started with an update job, which has no mapping).
    pub fn writes_migrations(&self) -> bool {
        !matches!(self.route, Route::Updates(_))
    }

    /// The table pointers are written to, when pages go to a table.
    pub fn pointer_target(&self) -> Option<&PointerTarget> {
        match &self.route {
            Route::Table { pointers, .. } => Some(pointers),
            _ => None,
        }
    }

    /// Writes one message's page and records what was refused.
    pub async fn write(&self, message: Message) -> Result<BatchOutcome, EngineError> {
        match message {
            Message::Migration(batch) => self.write_batch(batch).await,
            Message::Update(page) => self.apply_updates(page).await,
        }
    }

    /// Writes one migration page and records what was refused.
    pub async fn write_batch(&self, batch: WorkBatch) -> Result<BatchOutcome, EngineError> {
        let (writer, pointers) = match &self.route {
            Route::Table {
                writer, pointers, ..
            } => (writer, pointers),
            Route::Files(files) => return files.write_batch(batch).await,
            Route::Nowhere => {
                return Ok(BatchOutcome {
                    written: batch.items.len() as u64,
                    bytes: batch.items.iter().map(|m| m.size as u64).sum(),
                    write_units: batch
                        .items
                        .iter()
                        .map(|m| sql2ddb_core::write_units(m.size))
                        .sum(),
                    ..BatchOutcome::default()
                })
            }
            Route::Updates(_) => {
                return Err(EngineError::Worker(format!(
                    "run {} is a migration: this worker was started with an update job; start workers of migrations with the mapping",
                    batch.run_id
                )))
            }
        };
        let mut items = batch.items;
        let all_keys: Vec<Vec<AttrValue>> = match batch.pointers.is_empty() {
            false => {
                // A page queued by an older release carries no key values.
                for m in &mut items {
                    m.ensure_key(&pointers.keys);
                }
                items.iter().map(|m| m.key.clone()).collect()
            }
            true => Vec::new(),
        };
        let out = writer.write(items).await;
        self.throttled.fetch_add(out.throttled, Ordering::Relaxed);
        if let Some(e) = failed_whole(&batch.entity, &pointers.table, &out) {
            return Err(e);
        }
        if !batch.pointers.is_empty() {
            self.move_pointers(pointers, &batch.pointers, &all_keys, &out)
                .await?;
        }
        let refused: Vec<Reject> = out
            .rejected
            .iter()
            .map(|(m, e)| (m, &e.message))
            .chain(out.failed.iter().map(|(m, reason)| (m, reason)))
            .map(|(m, reason)| write_reject(&batch.entity, m, reason))
            .collect();
        self.rejects.write(&refused).await?;
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
    /// How long throttling is retried (`--retry-budget`), over the mapping's
    /// `retry_seconds`.
    pub retry_budget: Option<std::time::Duration>,
    /// Write nothing: every item counts as written, no call is made.
    pub dry_run: bool,
    /// Where the pages go.
    pub destination: Destination,
}

/// A sink, the shared limits its writer obeys and the settings they were
/// made from.
pub(crate) struct SinkSetup {
    pub sink: Arc<BatchSink>,
    pub controller: Arc<AdaptiveConcurrency>,
    pub limiter: Option<Arc<WriteCapacityLimiter>>,
    pub settings: WriterSettings,
}

impl SinkOptions {
    /// The writer flags of the options.
    pub fn flags(&self) -> WriterFlags {
        WriterFlags {
            concurrency: self.concurrency,
            fixed_concurrency: self.fixed_concurrency,
            max_wcu: self.max_wcu,
            retry_budget: self.retry_budget,
        }
    }

    /// The options over `plan`'s `[writer]`: what the process writes with.
    pub fn writer_settings(&self, plan: &Plan) -> WriterSettings {
        WriterSettings::resolve(plan, &self.flags(), self.retry)
    }
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
    let settings = opts.writer_settings(plan);
    let (controller, limiter) = write_limits(&settings);
    // One pacer for the process's writes to the table, batched or not.
    let pacer = Arc::new(Pacer::new());
    let updates = || UpdateApplier {
        client: client.clone(),
        retry: settings.retry,
        concurrency: controller.clone(),
        limiter: limiter.clone(),
        pacer: pacer.clone(),
    };
    let route = match &opts.destination {
        // Files take the pages even in a dry run: an export makes no DynamoDB call.
        Destination::Files(files) => Route::Files(files.clone()),
        _ if opts.dry_run => Route::Nowhere,
        Destination::Updates => Route::Updates(updates()),
        Destination::Table => Route::Table {
            writer: Arc::new(
                table_writer(plan, &settings, calls, &controller, &limiter)
                    .with_pacer(pacer.clone()),
            ),
            pointers: PointerTarget {
                client: client.clone(),
                table: plan.target.table.clone(),
                keys: plan.key_attrs(),
                retry: settings.retry,
            },
            updates: updates(),
        },
    };
    let sink = Arc::new(BatchSink {
        route,
        rejects,
        throttled: Default::default(),
        pointer_stats: Default::default(),
        limits: WriteLimits {
            controller: controller.clone(),
            limiter: limiter.clone(),
            cap: settings.max_wcu,
            pacer,
        },
    });
    SinkSetup {
        sink,
        controller,
        limiter,
        settings,
    }
}

/// The batch writer of `plan`'s table, within the process's shared limits
/// and its resolved retry budget.
pub(crate) fn table_writer(
    plan: &Plan,
    settings: &WriterSettings,
    calls: &BatchCalls,
    controller: &Arc<AdaptiveConcurrency>,
    limiter: &Option<Arc<WriteCapacityLimiter>>,
) -> TableWriter {
    let mut w = TableWriter::new(
        calls.clone(),
        plan.target.table.clone(),
        plan.key_attrs(),
        settings.retry,
    )
    .with_concurrency(controller.clone());
    if let Some(l) = limiter {
        // Each GSI bills its own write for an item it projects.
        w = w.with_capacity_limit(l.clone(), 1 + plan.target.gsis.len() as u64);
    }
    w
}

impl BatchSink {
    /// Applies an update job's page (`sql2ddb update --queue`) to the keys
    /// it carries; keys DynamoDB refuses go to the rejects file.
    pub async fn apply_updates(&self, page: UpdatePage) -> Result<BatchOutcome, EngineError> {
        let applier = match &self.route {
            Route::Table { updates, .. } | Route::Updates(updates) => updates,
            Route::Files(_) => {
                return Err(EngineError::Entity {
                    entity: page.entity.clone(),
                    message: "an export writes files: it cannot apply an update job's batch".into(),
                })
            }
            Route::Nowhere => {
                return Ok(BatchOutcome {
                    written: page.keys.len() as u64,
                    ..BatchOutcome::default()
                })
            }
        };
        let (out, refused) = applier.apply(&page).await?;
        let refused: Vec<Reject> = refused
            .iter()
            .map(|(m, reason)| write_reject(&page.entity, m, reason))
            .collect();
        self.rejects.write(&refused).await?;
        Ok(out)
    }

    /// Moves the batch's pointers whose item was written (a pointer moves
    /// only once the item it points at is in the table).
    async fn move_pointers(
        &self,
        target: &PointerTarget,
        pointers: &[BatchPointer],
        all_keys: &[Vec<AttrValue>],
        out: &WriteOutcome,
    ) -> Result<(), EngineError> {
        let not_written: BTreeSet<&Vec<AttrValue>> = out
            .rejected
            .iter()
            .map(|(m, _)| m)
            .chain(out.failed.iter().map(|(m, _)| m))
            .map(|m| &m.key)
            .collect();
        let written: BTreeSet<&Vec<AttrValue>> = all_keys
            .iter()
            .filter(|k| !not_written.contains(k))
            .collect();
        for p in pointers {
            if written.contains(&p.item_key) {
                self.move_pointer(target, &p.update).await?;
            }
        }
        Ok(())
    }

    async fn move_pointer(
        &self,
        t: &PointerTarget,
        update: &PointerUpdate,
    ) -> Result<(), EngineError> {
        let outcome = write_pointer(&t.client, &t.table, &t.keys, update, &t.retry).await?;
        let mut stats = self.pointer_stats.lock().expect("pointer stats lock");
        let s = stats.entry(update.name.clone()).or_default();
        match outcome {
            PointerOutcome::Written => s.moved += 1,
            PointerOutcome::AlreadyNewer => s.already_newer += 1,
        }
        s.touched(update);
        Ok(())
    }
}

/// The error a batch fails whole with, if any: items the table kept
/// refusing past the retries (not the rows' fault: the batch stays
/// pending, a run keeps its checkpoint before it, a worker leaves the
/// message on the queue; its rejects and pointers wait for the attempt
/// that writes it), or a table that cannot be written at all (not a bad
/// row: retried or dead-lettered, never "rejected").
fn failed_whole(entity: &str, table: &str, out: &WriteOutcome) -> Option<EngineError> {
    if let Some((item, why)) = out.unwritten.first() {
        return Some(EngineError::Dynamo(DynamoError::KeptRefusing {
            table: table.to_string(),
            items: out.unwritten.len() as u64,
            first: format!("entity {entity}, row {}: {why}", item.source_key.get()),
        }));
    }
    out.rejected
        .iter()
        .find(|(_, e)| e.failure == Failure::TableFault)
        .map(|(_, e)| EngineError::Entity {
            entity: entity.to_string(),
            message: format!("the table cannot be written: {}", e.message),
        })
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

#[cfg(test)]
mod tests;
