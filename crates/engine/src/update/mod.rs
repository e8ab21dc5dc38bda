//! `sql2ddb update`: the mass `UPDATE x WHERE y` (or `DELETE … WHERE y`) on
//! an existing DynamoDB table, from an [`UpdateJob`].
//!
//! The table is read with a parallel Scan (`TotalSegments`) or a Query on an
//! index, `where` as the `FilterExpression`, so items that do not match never
//! travel. Each matching item is then written with its own conditional
//! `UpdateItem` (or `DeleteItem`) whose `ConditionExpression` is `where`
//! again, and the item's existence: an item changed or deleted since it was
//! read is left alone and counted `skipped`, never overwritten by a stale
//! judgement.
//!
//! An update whose result depends on the item's current value (`ADD`,
//! `DELETE`, `SET a = a + :x`, `SET a = b`, `list_append`, `if_not_exists`,
//! a list index such as `REMOVE tags[0]`: judged from the parsed expression)
//! also writes the run id into the item's [`RUN_MARKER`] attribute, and its
//! condition requires that attribute to differ from the run id: a retried
//! call, a page read again by `--resume`, or the same job run again with the
//! same `--run-id`, changes each item once; an item found already carrying
//! the mark counts as updated. The marker stays on the items (remove it with
//! a later job if it matters).

mod apply;
mod checkpoint;
mod cost;
mod queued;
mod report;
mod requests;
mod tracking;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sql2ddb_dynamo::update::{describe, TableDescription};
use sql2ddb_dynamo::{AdaptiveConcurrency, RetryPolicy, TableWriter, WriteCapacityLimiter};
use sql2ddb_mapping::{
    IndexShape, JobAction, JobMode, JobRead, Projection, TableShape, UpdateJob, RUN_MARKER,
};

pub use apply::PageHook;
pub use queued::UpdateApplier;
pub use report::{CostEstimate, IndexUnits, UpdateProgress, UpdateReport, UpdateStatus};

use crate::error::EngineError;
use crate::ids::{new_run_id, RunId};
use crate::resources::{Job, ResourceOptions, Resources};
use crate::stop::StopSignal;
use crate::timeline::{Recorder, Timeline};
use apply::{run_segment, BatchPut, FailuresFile, QueuedPages, Shared};
use checkpoint::{Checkpoint, CheckpointFile};
use cost::CostCounter;
use tracking::Tracking;

/// Conditional writes in flight when `--concurrency` does not say.
pub const DEFAULT_UPDATE_CONCURRENCY: usize = 32;

/// Everything an update job takes besides the job file.
#[derive(Clone, Default)]
pub struct UpdateOptions {
    /// DynamoDB endpoint (`local` or a URL), over the job's.
    pub endpoint: Option<String>,
    /// AWS region, over the job's.
    pub region: Option<String>,
    /// Where run directories go (`<runs_dir>/<run id>/`).
    pub runs_dir: PathBuf,
    /// The run id; a new one when `None`. A job that is not idempotent,
    /// run again with the same id, changes each item once.
    pub run_id: Option<RunId>,
    /// Continue run `run_id` from its checkpoint (in its run directory).
    pub resume: bool,
    /// Start no page that would likely end after this many seconds from
    /// the start (each segment reads at least one page), then stop with
    /// status `time_up`; `--resume` continues.
    pub max_seconds: Option<u64>,
    /// Likewise, start no page that would likely end after this instant
    /// (a serverless reader's deadline less its margin).
    pub deadline: Option<std::time::Instant>,
    /// Read and count, estimate the cost, write nothing.
    pub dry_run: bool,
    /// Most conditional writes in flight (adapts to throttling within [1, N]).
    pub concurrency: Option<usize>,
    /// Cap on write units per second.
    pub max_wcu: Option<u64>,
    /// Cap on read units per second.
    pub max_rcu: Option<u64>,
    /// Retry parameters of every call.
    pub retry: RetryPolicy,
    /// How long a read or a write the table throttles is retried
    /// (`--retry-budget`; default [`crate::settings::DEFAULT_RETRY_BUDGET`]).
    /// Past it the job stops with status `throttled` and `--resume` goes on.
    pub retry_budget: Option<std::time::Duration>,
    /// Raised to stop cleanly: segments stop after the page they are writing.
    pub stop: Option<Arc<StopSignal>>,
    /// Called with each page's matching items before they are written.
    pub on_page: Option<PageHook>,
    /// Keep the run's records in this progress table, for `sql2ddb status`
    /// and `sql2ddb verify` (created if missing). With `queue`, default
    /// `<table>-sql2ddb-progress`, where workers look.
    pub progress_table: Option<String>,
    /// Send the pages to this SQS queue for `sql2ddb worker` processes to
    /// apply, instead of writing them here.
    pub queue: Option<String>,
    /// SQS endpoint URL (default AWS).
    pub sqs_endpoint: Option<String>,
    /// The job's context, when the process has one already (see
    /// [`ResourceOptions::job_context`]); else the job loads one.
    pub job_context: Option<crate::JobContext>,
}

impl UpdateOptions {
    /// The job's write-capacity cap: `max_wcu` by the one rule
    /// ([`crate::settings::max_wcu`]; an update job has no mapping).
    pub fn write_cap(&self) -> Option<u64> {
        crate::settings::max_wcu(self.max_wcu, None)
    }
}

/// Runs an update job.
///
/// Returned as `Err`, with nothing written: a table that cannot be
/// described, a job that does not fit the table (a key attribute written, an
/// index it lacks, keys other than the job declares). Once the job runs,
/// every failure ends in the report (status `failed`, the error in it).
pub async fn update(
    job: &UpdateJob,
    opts: &UpdateOptions,
    progress: Arc<UpdateProgress>,
) -> Result<UpdateReport, EngineError> {
    let started = Instant::now();
    // Resolved once: every read and write of the job retries throttling
    // within this budget.
    let budget = crate::settings::retry_budget(opts.retry_budget, None);
    let opts = &UpdateOptions {
        retry: opts.retry.with_throttle_budget(budget),
        ..opts.clone()
    };
    check_options(job, opts)?;
    let run_id = opts.run_id.clone().unwrap_or_else(new_run_id);
    let run_dir = opts.runs_dir.join(&run_id);
    // `local` is refused: the embedded server's data belongs to the run that started it.
    let resources = Resources::open(None, &resource_options(job, opts), Job::Status).await?;
    let result = prepare(job, opts, &resources, &run_dir, &run_id, progress.clone()).await;
    // The run directory only once the job is known to fit its table.
    let made = result.and_then(|shared| {
        std::fs::create_dir_all(&run_dir).map_err(|e| EngineError::io(&run_dir, e))?;
        if let Some(c) = &shared.checkpoint {
            c.save()?;
        }
        Ok(Arc::new(shared))
    });
    let shared = match made {
        Ok(shared) => shared,
        Err(e) => {
            resources.close().await;
            return Err(e);
        }
    };
    let mut report = new_report(job, opts, &run_id, &run_dir, &resources, &shared);
    // Keys sent to a queue are changed by its workers, not here.
    let timeline = shared.queued.is_none().then(|| {
        let progress = progress.clone();
        Recorder::start(shared.concurrency.clone(), move || {
            UpdateProgress::get(&progress.updated)
        })
    });
    read_all(job, &shared, &mut report).await;
    let interrupted = opts.stop.as_ref().is_some_and(|s| s.is_stopped());
    let time_up = shared.time_up.load(std::sync::atomic::Ordering::SeqCst);
    report.timeline = timeline.map(Recorder::finish).unwrap_or_default();
    report.pacing = crate::report::PacingReport::of(&shared.pacer);
    report.finish(
        &progress,
        interrupted,
        time_up,
        started.elapsed().as_secs_f64(),
    );
    if opts.dry_run {
        let cost = shared.cost.lock().expect("cost lock");
        report.estimate = Some(cost.estimate(report.read_units, opts.write_cap(), opts.max_rcu));
    }
    resources.close().await;
    let path = run_dir.join("report.json");
    let json = serde_json::to_vec_pretty(&report).expect("report serialises");
    std::fs::write(&path, json).map_err(|e| EngineError::io(&path, e))?;
    Ok(report)
}

/// Refuses options that do not fit together, before anything is opened.
fn check_options(job: &UpdateJob, opts: &UpdateOptions) -> Result<(), EngineError> {
    if opts.resume && (opts.run_id.is_none() || opts.dry_run) {
        return Err(EngineError::Config(
            "to resume an update, give its run id (and no --dry-run)".into(),
        ));
    }
    if opts.queue.is_some() && job.mode == JobMode::BatchPut && !opts.dry_run {
        return Err(EngineError::Config(format!(
            "{}: mode = \"batch-put\" rewrites whole items in this process; it cannot send them to a queue (use the default mode, update-item, with --queue)",
            job.file()
        )));
    }
    Ok(())
}

/// What the job connects to: a job sent to a queue always keeps a
/// progress table (its workers record their batches there).
fn resource_options(job: &UpdateJob, opts: &UpdateOptions) -> ResourceOptions {
    let queued = opts.queue.is_some() && !opts.dry_run;
    ResourceOptions {
        endpoint: opts.endpoint.clone().or(job.target.endpoint.clone()),
        region: opts.region.clone().or(job.target.region.clone()),
        progress_table: match queued {
            true => Some(
                opts.progress_table
                    .clone()
                    .unwrap_or_else(|| sql2ddb_dynamo::progress::default_table(&job.target.table)),
            ),
            false => opts.progress_table.clone(),
        },
        sqs_endpoint: opts.sqs_endpoint.clone(),
        job_context: opts.job_context.clone(),
    }
}

/// Reads (and writes) every segment to its end, then puts the error that
/// stopped the job, if one did, in the report.
async fn read_all(job: &UpdateJob, shared: &Arc<Shared>, report: &mut UpdateReport) {
    let mut segments = tokio::task::JoinSet::new();
    for (index, segment) in read_segments(job).into_iter().enumerate() {
        segments.spawn(run_segment(shared.clone(), index, segment));
    }
    while let Some(done) = segments.join_next().await {
        if let Err(e) = done {
            report
                .error
                .get_or_insert(format!("a read segment failed: {e}"));
        }
    }
    if let Err(e) = shared.failures.flush() {
        shared.halt(&e);
    }
    if let Some((e, cause)) = shared.error() {
        if report.error.is_none() {
            report.error = Some(sql2ddb_core::redact_secrets(&e));
            report.cause = cause;
        }
    }
}

/// Describes the table, checks the job against it, and builds the calls.
async fn prepare(
    job: &UpdateJob,
    opts: &UpdateOptions,
    resources: &Resources,
    run_dir: &std::path::Path,
    run_id: &RunId,
    progress: Arc<UpdateProgress>,
) -> Result<Shared, EngineError> {
    let client = resources.client().clone();
    let table = describe(&client, &job.target.table, &opts.retry).await?;
    check_declared_keys(job, &table)?;
    job.check_table(&shape(&table))?;
    let queued = opts.queue.is_some() && !opts.dry_run;
    let read = requests::read_request(job, run_id, queued || opts.resume);
    let write = (!opts.dry_run).then(|| requests::write_request(job, &table, run_id));
    let written: Option<BTreeSet<String>> = match job.action {
        JobAction::Update { .. } => Some(job.written_attributes().map(str::to_string).collect()),
        JobAction::Delete => None,
    };
    let max = opts
        .concurrency
        .unwrap_or(DEFAULT_UPDATE_CONCURRENCY)
        .max(1);
    let failures = FailuresFile::new(run_dir.join("failed.jsonl"));
    let mut shared = Shared::new(
        client,
        read,
        write,
        table.keys.clone(),
        opts.retry,
        Arc::new(AdaptiveConcurrency::new(max)),
        progress,
        CostCounter::new(&table.indexes, written),
        failures,
    );
    shared.wcu = opts
        .write_cap()
        .map(|w| Arc::new(WriteCapacityLimiter::new(w)));
    shared.rcu = opts.max_rcu.map(|r| Arc::new(WriteCapacityLimiter::new(r)));
    shared.stop = opts.stop.clone();
    shared.on_page = opts.on_page.clone();
    let by_seconds = opts
        .max_seconds
        .map(|s| tokio::time::Instant::now() + std::time::Duration::from_secs(s));
    let by_instant = opts.deadline.map(tokio::time::Instant::from_std);
    shared.deadline = by_seconds.into_iter().chain(by_instant).min();
    if !opts.dry_run {
        attach_writers(&mut shared, job, opts, resources, &table, run_dir, run_id).await?;
    }
    if table.item_count > 0 {
        shared.average_item_bytes = table.size_bytes as f64 / table.item_count as f64;
    }
    Ok(shared)
}

/// What only a run that writes has: the batch writer of `batch-put`, the
/// checkpoint (loaded when resuming), the progress table's records.
async fn attach_writers(
    shared: &mut Shared,
    job: &UpdateJob,
    opts: &UpdateOptions,
    resources: &Resources,
    table: &TableDescription,
    run_dir: &std::path::Path,
    run_id: &RunId,
) -> Result<(), EngineError> {
    if job.mode == JobMode::BatchPut {
        let mut writer = TableWriter::new(
            resources.calls().clone(),
            job.target.table.clone(),
            table.keys.clone(),
            opts.retry,
        )
        .with_concurrency(shared.concurrency.clone())
        .with_pacer(shared.pacer.clone());
        if let Some(wcu) = &shared.wcu {
            writer = writer.with_capacity_limit(wcu.clone(), 1 + table.indexes.len() as u64);
        }
        shared.batch_put = Some(BatchPut {
            job: Arc::new(job.clone()),
            writer,
        });
    }
    let fresh = Checkpoint::new(
        &job.name,
        &job.target.table,
        &read_description(job),
        read_segments(job).len(),
    );
    let tracked = opts.progress_table.is_some() || opts.queue.is_some();
    let (checkpoint, tracking) = match tracked {
        true => resume_or_track(job, opts, resources, run_dir, run_id, fresh).await?,
        false if opts.resume => (Checkpoint::load(run_dir, run_id, &fresh)?, None),
        false => (fresh, None),
    };
    checkpoint.totals().publish(&shared.progress);
    shared.checkpoint = Some(CheckpointFile::new(run_dir, checkpoint));
    shared.tracking = tracking;
    if let Some(url) = &opts.queue {
        shared.queued = Some(QueuedPages {
            queue: resources.queue(url).await?,
            run_id: run_id.clone(),
            entity: job.name.clone(),
            change: requests::write_request(job, table, run_id).to_change(&table.keys),
        });
    }
    Ok(())
}

/// With a progress table: a resumed run's checkpoint from its cursors there
/// (from any machine), else from its run directory's checkpoint; the run
/// recorded afresh unless the table already knows it.
async fn resume_or_track(
    job: &UpdateJob,
    opts: &UpdateOptions,
    resources: &Resources,
    run_dir: &std::path::Path,
    run_id: &RunId,
    fresh: Checkpoint,
) -> Result<(Checkpoint, Option<Tracking>), EngineError> {
    let store = resources.progress_store()?;
    if opts.resume {
        if let Some((tracking, found)) = Tracking::reopen(store.clone(), run_id, &fresh).await? {
            return Ok((found, Some(tracking)));
        }
    }
    // A second run under the same id would mix its pages with the first's.
    if !opts.resume && store.exists().await? && store.run_meta(run_id).await?.is_some() {
        return Err(EngineError::Config(format!(
            "run {run_id} is already recorded in progress table {}: continue it with --resume {run_id}, or give a new run id",
            store.table()
        )));
    }
    let checkpoint = match opts.resume {
        true => Checkpoint::load(run_dir, run_id, &fresh)?,
        false => fresh,
    };
    let read = read_description(job);
    let segments = checkpoint.segments.len() as u32;
    let (name, file, table) = (&job.name, job.file(), &job.target.table);
    let at = (read.as_str(), segments, opts.queue.clone());
    let tracking = Tracking::open(store, run_id, name, file, table, at).await?;
    Ok((checkpoint, Some(tracking)))
}

/// The table's keys and indexes, as the job's checks want them.
fn shape(table: &TableDescription) -> TableShape {
    TableShape {
        keys: table.keys.iter().map(|k| k.name.clone()).collect(),
        indexes: table
            .indexes
            .iter()
            .map(|i| IndexShape {
                name: i.name.clone(),
                keys: i.keys.clone(),
                projection: match &i.projected {
                    None => Projection::All,
                    Some(list) if list.is_empty() => Projection::KeysOnly,
                    Some(list) => Projection::Include(list.clone()),
                },
            })
            .collect(),
    }
}

/// Keys the job declares under `[target]` must be the table's.
fn check_declared_keys(job: &UpdateJob, table: &TableDescription) -> Result<(), EngineError> {
    if job.target.keys.is_empty() || job.target.keys == table.keys {
        return Ok(());
    }
    let show = |keys: &[sql2ddb_core::KeyAttr]| {
        keys.iter()
            .map(|k| format!("{} ({})", k.name, k.kind.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(EngineError::Config(format!(
        "{}: [target] declares the keys {}, but table {} has {}",
        job.file(),
        show(&job.target.keys),
        job.target.table,
        show(&table.keys)
    )))
}

fn new_report(
    job: &UpdateJob,
    opts: &UpdateOptions,
    run_id: &RunId,
    run_dir: &std::path::Path,
    resources: &Resources,
    shared: &Shared,
) -> UpdateReport {
    let mut notes = Vec::new();
    if job.mode == JobMode::BatchPut {
        notes.push(
            "mode = \"batch-put\": matching items are rewritten whole with BatchWriteItem, without a condition; an application's write to one of them between its read and its rewrite is LOST (use mode = \"update-item\", the default, while the application writes)".into(),
        );
    }
    if let Some(note) = repeat_note(job, run_id) {
        notes.push(note);
    }
    UpdateReport {
        run_id: run_id.clone(),
        resumed: opts.resume,
        job: job.name.clone(),
        status: UpdateStatus::Ok,
        action: match job.action {
            JobAction::Update { .. } => "update".into(),
            JobAction::Delete => "delete".into(),
        },
        mode: match job.mode {
            JobMode::UpdateItem => "update-item".into(),
            JobMode::BatchPut => "batch-put".into(),
        },
        dry_run: opts.dry_run,
        idempotent: job.not_idempotent().is_none(),
        table: job.target.table.clone(),
        endpoint: resources.endpoint().to_string(),
        read: read_description(job),
        run_dir: run_dir.display().to_string(),
        failures_file: shared.failures.path().display().to_string(),
        progress_table: shared.tracking.as_ref().map(|t| t.table().to_string()),
        queue: shared.queued.as_ref().and(opts.queue.clone()),
        scanned: 0,
        not_matched: 0,
        matched: 0,
        updated: 0,
        skipped: 0,
        failed: 0,
        pending: 0,
        pages: 0,
        retries: 0,
        throttled: 0,
        read_units: 0.0,
        write_units: 0.0,
        seconds: 0.0,
        estimate: None,
        notes,
        error: None,
        cause: None,
        timeline: Timeline::default(),
        pacing: Default::default(),
    }
}

/// What applying the update again does: harmless, or prevented by the run's
/// marker (the update reads the item's current value). `None` for a delete.
fn repeat_note(job: &UpdateJob, run_id: &str) -> Option<String> {
    let JobAction::Update { .. } = job.action else {
        return None;
    };
    Some(match job.not_idempotent() {
        None => "the update is idempotent: applied again (a retried call, a page read again after a crash) it leaves the item as once".into(),
        Some(why) => format!(
            "the update is not idempotent ({why}): it reads the item's current value, so it is applied at most once per item per run: each changed item is marked {RUN_MARKER} = {run_id}, and a retried call or a page read again by --resume that finds the mark leaves the item alone and counts it updated; run the job again with --run-id {run_id} (or --resume {run_id}) to finish it without changing any item twice"
        ),
    })
}

/// The read segments: each part of a parallel Scan, or the one query.
fn read_segments(job: &UpdateJob) -> Vec<Option<(u32, u32)>> {
    match &job.read {
        JobRead::Scan { segments: 1 } | JobRead::Query { .. } => vec![None],
        JobRead::Scan { segments } => (0..*segments).map(|s| Some((s, *segments))).collect(),
    }
}

fn read_description(job: &UpdateJob) -> String {
    match &job.read {
        JobRead::Scan { segments } => format!("scan, {segments} segments"),
        JobRead::Query { index, .. } => format!("query on {index}"),
    }
}

/// The most items of one partition key in a page for the pacer to take
/// them as spread over the table, as many as one `BatchWriteItem` call
/// carries: a throttle of such items, one call each, says the table is at
/// its limit (with others over the same second); a key with more (an item
/// collection, a hot key) is paced on its own.
pub(crate) const FEW_OF_A_KEY: usize = sql2ddb_core::limits::MAX_BATCH_ITEMS;

/// For each of a page's items, whether its partition key (the first of
/// `keys`) has at most [`FEW_OF_A_KEY`] items in the page.
pub(crate) fn alone_of_their_key(
    items: &[sql2ddb_core::Item],
    keys: &[sql2ddb_core::KeyAttr],
) -> Vec<bool> {
    let Some(pk) = keys.first() else {
        return vec![true; items.len()];
    };
    let mut seen: std::collections::HashMap<&sql2ddb_core::AttrValue, usize> =
        std::collections::HashMap::with_capacity(items.len());
    for k in items.iter().filter_map(|item| item.get(&pk.name)) {
        *seen.entry(k).or_default() += 1;
    }
    items
        .iter()
        .map(|item| {
            item.get(&pk.name)
                .is_none_or(|k| seen.get(k).is_some_and(|&n| n <= FEW_OF_A_KEY))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_core::{AttrValue, Item, KeyAttr, KeyType};

    #[test]
    fn an_item_is_alone_unless_its_partition_key_has_more_items_in_its_page_than_a_call_carries() {
        let keys = [
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::S),
        ];
        let item = |pk: &str, sk: usize| -> Item {
            [
                ("PK".to_string(), AttrValue::S(pk.into())),
                ("SK".to_string(), AttrValue::S(sk.to_string())),
            ]
            .into_iter()
            .collect()
        };
        // Ten orders of a customer, one item of its own, and a collection
        // one item larger than a call carries.
        let mut page: Vec<Item> = (0..10).map(|i| item("CUSTOMER#1", i)).collect();
        page.push(item("ITEM#1", 0));
        page.extend((0..=FEW_OF_A_KEY).map(|i| item("CUSTOMER#2", i)));
        let alone = alone_of_their_key(&page, &keys);
        assert!(alone[..11].iter().all(|&a| a), "{alone:?}");
        assert!(alone[11..].iter().all(|&a| !a), "{alone:?}");
        assert!(alone_of_their_key(&[], &keys).is_empty());
    }
}
