//! One read segment of an update job: read a page (the filter = `where`),
//! write its matching items one conditional call each, then the next page.
//! A segment waits for its page's writes before reading on, so memory holds
//! at most a page per segment, whatever the table's size.

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sql2ddb_core::{
    item_size, BatchPart, EncodedItem, Item, KeyAttr, RunId, UpdateChange, UpdatePage,
};
use sql2ddb_dynamo::update::{
    read_page, write_item, ConditionalWrite, ItemOutcome, Pace, Page, PageKey, PageRequest,
};
use sql2ddb_dynamo::{
    AdaptiveConcurrency, Dynamo, Failure, Pacer, RetryPolicy, TableWriter, WriteCapacityLimiter,
};
use sql2ddb_mapping::UpdateJob;
use sql2ddb_queue::{SqsQueue, WorkQueue};
use tokio::task::JoinSet;

use super::checkpoint::{CheckpointFile, Counts, SegmentState};
use super::cost::CostCounter;
use super::report::UpdateProgress;
use super::tracking::Tracking;
use crate::error::{Cause, EngineError};
use crate::stop::StopSignal;

/// Called with each page's matching items before they are written: lets a
/// caller watch the job or, in tests, change items between read and write.
pub type PageHook =
    Arc<dyn Fn(Vec<Item>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Read-only read units of an eventually consistent read: 4 KB each, halved.
const READ_UNIT_BYTES: f64 = 4096.0 * 2.0;

/// What every segment of a job shares.
pub(crate) struct Shared {
    pub client: Dynamo,
    pub read: PageRequest,
    /// `None` in a dry run: nothing is written.
    pub write: Option<ConditionalWrite>,
    pub keys: Vec<KeyAttr>,
    pub policy: RetryPolicy,
    pub concurrency: Arc<AdaptiveConcurrency>,
    pub wcu: Option<Arc<WriteCapacityLimiter>>,
    pub rcu: Option<Arc<WriteCapacityLimiter>>,
    /// The rates the table admits, learned from its answers to the writes
    /// (conditional writes and a `batch-put` job's batches alike).
    pub pacer: Arc<Pacer>,
    pub progress: Arc<UpdateProgress>,
    pub cost: Mutex<CostCounter>,
    pub failures: FailuresFile,
    pub stop: Option<Arc<StopSignal>>,
    pub on_page: Option<PageHook>,
    /// Where each segment stands (`None` in a dry run: nothing to resume).
    pub checkpoint: Option<CheckpointFile>,
    /// `--max-seconds`: no page is started that would likely end after this.
    pub deadline: Option<tokio::time::Instant>,
    /// Set when a segment stopped at the deadline.
    pub time_up: AtomicBool,
    /// `mode = "batch-put"`: the job (its changes) and the batch writer.
    pub batch_put: Option<BatchPut>,
    /// `--progress-table`: the run's records for `status` and `verify`.
    pub tracking: Option<Tracking>,
    /// `--queue`: pages go to workers instead of being written here.
    pub queued: Option<QueuedPages>,
    /// The table's average item size, for read units an endpoint does not report.
    pub average_item_bytes: f64,
    halted: AtomicBool,
    /// Set when the table kept refusing a write past the retry budget.
    refused: AtomicBool,
    error: Mutex<Option<(String, Option<Cause>)>>,
}

impl Shared {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        client: Dynamo,
        read: PageRequest,
        write: Option<ConditionalWrite>,
        keys: Vec<KeyAttr>,
        policy: RetryPolicy,
        concurrency: Arc<AdaptiveConcurrency>,
        progress: Arc<UpdateProgress>,
        cost: CostCounter,
        failures: FailuresFile,
    ) -> Shared {
        Shared {
            client,
            read,
            write,
            keys,
            policy,
            concurrency,
            wcu: None,
            rcu: None,
            pacer: Arc::new(Pacer::new()),
            progress,
            cost: Mutex::new(cost),
            failures,
            stop: None,
            on_page: None,
            checkpoint: None,
            deadline: None,
            time_up: AtomicBool::new(false),
            batch_put: None,
            tracking: None,
            queued: None,
            average_item_bytes: 1024.0,
            halted: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            error: Mutex::new(None),
        }
    }

    /// Ends the job on an error (the first one is kept).
    pub(crate) fn halt(&self, e: &EngineError) {
        self.halt_with(e.to_string(), Some(e.cause()));
    }

    /// Ends the job on an error told by its message, and its cause when known.
    fn halt_with(&self, message: String, cause: Option<Cause>) {
        self.error
            .lock()
            .expect("error lock")
            .get_or_insert((message, cause));
        self.halted.store(true, Ordering::SeqCst);
    }

    /// The error that ended the job, if one did, and its cause.
    pub(crate) fn error(&self) -> Option<(String, Option<Cause>)> {
        self.error.lock().expect("error lock").clone()
    }

    /// Whether a page as long as `longest` would end past the deadline.
    fn out_of_time(&self, longest: Duration) -> bool {
        self.deadline
            .is_some_and(|d| tokio::time::Instant::now() + longest >= d)
    }

    fn stopping(&self) -> bool {
        self.halted.load(Ordering::SeqCst) || self.stop.as_ref().is_some_and(|s| s.is_stopped())
    }

    /// The read units of a page: as reported, else from the items evaluated.
    fn read_units(&self, page: &Page) -> f64 {
        if page.read_units > 0.0 {
            return page.read_units;
        }
        (page.scanned as f64 * self.average_item_bytes / READ_UNIT_BYTES)
            .ceil()
            .max(0.5)
    }
}

/// Reads segment `index` (`segment`: its part of a parallel Scan; `None`
/// for a query) from where the checkpoint says to its end, or until the job
/// stops; the page being written is finished and recorded first.
pub(crate) async fn run_segment(shared: Arc<Shared>, index: usize, segment: Option<(u32, u32)>) {
    let mut req = shared.read.clone();
    req.segment = segment;
    let mut state = match &shared.checkpoint {
        Some(c) => c.segment(index),
        None => SegmentState::default(),
    };
    if state.done {
        return;
    }
    let mut longest = Duration::ZERO;
    let mut pages = 0u64;
    while !shared.stopping() {
        if pages > 0 && shared.out_of_time(longest) {
            shared.time_up.store(true, Ordering::SeqCst);
            return;
        }
        let began = tokio::time::Instant::now();
        let start = state.next.clone().map(PageKey);
        let page = match read_page(&shared.client, &req, start, &shared.policy).await {
            Ok(page) => page,
            Err(e) => return shared.halt(&EngineError::Dynamo(e)),
        };
        let units = shared.read_units(&page);
        let mut tally = Counts {
            scanned: page.scanned,
            matched: page.items.len() as u64,
            pages: 1,
            retries: page.retries,
            throttled: page.throttled,
            read_milli_units: (units * 1000.0).round() as u64,
            ..Counts::default()
        };
        tally.publish(&shared.progress);
        if let Some(rcu) = &shared.rcu {
            rcu.acquire(units.ceil() as u64).await;
        }
        match take_page(&shared, (index as u32, state.counts.pages), page.items).await {
            Some(counts) => tally.add(&counts),
            // Halted, or a page whose items the table kept refusing: not
            // recorded, so `--resume` reads and writes it again.
            None => return,
        }
        let page_index = state.counts.pages;
        state.counts.add(&tally);
        state.next = page.next.clone().map(|k| k.0);
        state.done = page.next.is_none();
        if let Err(e) = record(&shared, index, page_index, &tally, &state).await {
            return shared.halt(&e);
        }
        pages += 1;
        longest = longest.max(began.elapsed());
        if state.done {
            UpdateProgress::add(&shared.progress.segments_done, 1);
            return;
        }
    }
}

/// What the job does with one page's matched items, `at` (segment, page)
/// in the scan: counts them for the estimate, or sends them to the queue,
/// or writes them. `None` when the job halted on it, or when the table kept
/// refusing some of its items past the retry budget (the job is halted):
/// the page must then not be recorded.
async fn take_page(shared: &Arc<Shared>, at: (u32, u64), items: Vec<Item>) -> Option<Counts> {
    if shared.write.is_none() {
        let mut cost = shared.cost.lock().expect("cost lock");
        items.iter().for_each(|item| cost.add(item));
        return Some(Counts::default());
    }
    if let Some(hook) = &shared.on_page {
        hook(items.clone()).await;
    }
    let written = match (&shared.queued, &shared.batch_put) {
        (Some(_), _) if items.is_empty() => Written::default(),
        (Some(q), _) => {
            if let Err(e) = q.send(&shared.keys, at, items).await {
                shared.halt(&e);
                return None;
            }
            Written::default()
        }
        (None, Some(batch)) => put_page(shared, batch, items).await,
        (None, None) => write_page(shared, items).await,
    };
    match written.kept_refusing {
        true => None,
        false => Some(written.counts),
    }
}

/// Records a finished page: in the progress table first (a crash before
/// the checkpoint reads the page again, and its record is rewritten, never
/// missing), then in the checkpoint.
async fn record(
    shared: &Shared,
    index: usize,
    page: u64,
    tally: &Counts,
    state: &SegmentState,
) -> Result<(), EngineError> {
    if let Some(t) = &shared.tracking {
        // A queued page is recorded by the worker that applies it; a page
        // with no match is not sent, and recorded here.
        if shared.queued.is_none() || tally.matched == 0 {
            t.page(index as u32, page, tally).await?;
        }
        if state.done {
            t.finish(index as u32, state).await?;
        }
        t.cursor(index as u32, state).await?;
    }
    match &shared.checkpoint {
        Some(c) => c.record(index, state.clone()),
        None => Ok(()),
    }
}

/// What became of a page's items: their counts, and whether the table
/// kept refusing some of them (throttled) past the retry budget, which
/// leaves the page unrecorded.
#[derive(Default)]
struct Written {
    counts: Counts,
    kept_refusing: bool,
}

/// Writes a page's items, as many at once as the shared concurrency allows;
/// returns what became of them.
async fn write_page(shared: &Arc<Shared>, items: Vec<Item>) -> Written {
    // Tasks beyond the calls in flight would only wait: keep a few more than
    // the concurrency allows, so a page's items are not all held by tasks.
    let width = 2 * shared.concurrency.max().max(1);
    let mut writes = JoinSet::new();
    let mut tally = Written::default();
    let mut cut = false;
    let mut join = |done: Result<Written, tokio::task::JoinError>| match done {
        Ok(w) => {
            w.counts.publish(&shared.progress);
            tally.counts.add(&w.counts);
            tally.kept_refusing |= w.kept_refusing;
        }
        Err(e) => shared.halt_with(format!("a write task failed: {e}"), None),
    };
    let alone = super::alone_of_their_key(&items, &shared.keys);
    for (item, alone) in items.into_iter().zip(alone) {
        if writes.len() >= width {
            if let Some(done) = writes.join_next().await {
                join(done);
            }
        }
        if shared.refused.load(Ordering::SeqCst) {
            // The table kept refusing a write past the budget: the job is
            // stopping, and this page stays unrecorded for `--resume`.
            cut = true;
            break;
        }
        let shared = shared.clone();
        writes.spawn(async move { write_one(&shared, item, alone).await });
    }
    while let Some(done) = writes.join_next().await {
        join(done);
    }
    tally.kept_refusing |= cut;
    tally
}

/// Writes one item, `alone` if its partition key has few items in its
/// page ([`super::alone_of_their_key`]).
async fn write_one(shared: &Shared, item: Item, alone: bool) -> Written {
    let mut counts = Counts::default();
    let Some(write) = &shared.write else {
        return Written::default();
    };
    let (units, per_index) = shared.cost.lock().expect("cost lock").item_units(&item);
    let units = units + per_index.iter().sum::<u64>();
    if let Some(wcu) = &shared.wcu {
        wcu.acquire(units).await;
    }
    let pace = Pace {
        pacer: &shared.pacer,
        units,
        alone,
    };
    let result = write_item(
        &shared.client,
        write,
        &shared.keys,
        &item,
        &shared.policy,
        Some(&shared.concurrency),
        Some(pace),
    )
    .await;
    match result {
        Ok(w) => {
            counts.retries = w.retries;
            counts.throttled = w.throttled;
            match w.outcome {
                ItemOutcome::Written { write_units } => {
                    counts.updated = 1;
                    // An endpoint that does not report units: the estimate.
                    let units = match write_units > 0.0 {
                        true => write_units,
                        false => sql2ddb_core::write_units(item_size(&item)) as f64,
                    };
                    counts.write_milli_units = (units * 1000.0).round() as u64;
                }
                ItemOutcome::Skipped => counts.skipped = 1,
            }
        }
        Err(e) if e.failure() == Some(Failure::Throttled) => {
            // Not the item's fault: the table kept refusing it past the
            // retry budget. The job stops, the item stays to be written by
            // `--resume`; it is neither failed nor in failed.jsonl.
            let reason = sql2ddb_core::redact_secrets(&e.to_string());
            shared.refused.store(true, Ordering::SeqCst);
            shared.halt_with(reason, Some(Cause::from(&e)));
            return Written {
                counts,
                kept_refusing: true,
            };
        }
        Err(e) => {
            counts.failed = 1;
            let reason = sql2ddb_core::redact_secrets(&e.to_string());
            if let Err(io) = shared.failures.write(&shared.keys, &item, &reason) {
                shared.halt(&io);
            }
            // A table that cannot be written fails every item alike: stop.
            if e.failure() == Some(Failure::TableFault) {
                shared.halt_with(reason, Some(Cause::from(&e)));
            }
        }
    }
    Written {
        counts,
        kept_refusing: false,
    }
}

/// Where `--queue` sends the pages: each page's matching keys, with the
/// change a worker applies to them.
pub(crate) struct QueuedPages {
    pub queue: Arc<SqsQueue>,
    pub run_id: RunId,
    pub entity: String,
    pub change: UpdateChange,
}

impl QueuedPages {
    /// Sends page `page` of segment `segment`: the keys of its matching
    /// items (split over several messages when they do not fit one).
    async fn send(
        &self,
        keys: &[KeyAttr],
        (segment, page): (u32, u64),
        items: Vec<Item>,
    ) -> Result<(), EngineError> {
        let items: Vec<EncodedItem> = items
            .into_iter()
            .map(|item| {
                let key: Item = keys
                    .iter()
                    .filter_map(|k| Some((k.name.clone(), item.get(&k.name)?.clone())))
                    .collect();
                let source_key = source_key(keys, &item);
                EncodedItem::new(&key, keys, source_key, item_size(&item))
            })
            .collect();
        let page = UpdatePage {
            run_id: self.run_id.clone(),
            entity: self.entity.clone(),
            segment,
            page,
            part: BatchPart::WHOLE,
            rows_read: items.len() as u64,
            keys: items,
            change: self.change.clone(),
        };
        self.queue
            .send(vec![page.into()])
            .await
            .map(|_| ())
            .map_err(EngineError::Queue)
    }
}

/// How a `mode = "batch-put"` job rewrites items.
pub(crate) struct BatchPut {
    pub job: Arc<UpdateJob>,
    pub writer: TableWriter,
}

/// Applies the job's changes to a page's items and rewrites them whole,
/// 25 a call, with the batch writer's retries; returns what became of them.
async fn put_page(shared: &Shared, batch: &BatchPut, items: Vec<Item>) -> Written {
    let mapped: Vec<EncodedItem> = items
        .into_iter()
        .map(|mut item| {
            batch.job.apply_changes(&mut item);
            let size = item_size(&item);
            EncodedItem::new(&item, &shared.keys, source_key(&shared.keys, &item), size)
        })
        .collect();
    let out = batch.writer.write(mapped).await;
    if let Some((m, why)) = out.unwritten.first() {
        // The table kept refusing them: not the items' fault, see write_one.
        let e = sql2ddb_dynamo::DynamoError::KeptRefusing {
            table: batch.job.target.table.clone(),
            items: out.unwritten.len() as u64,
            first: format!("key {}: {why}", m.source_key.get()),
        };
        shared.refused.store(true, Ordering::SeqCst);
        shared.halt_with(
            sql2ddb_core::redact_secrets(&e.to_string()),
            Some(Cause::from(&e)),
        );
        return Written {
            counts: Counts::default(),
            kept_refusing: true,
        };
    }
    let mut counts = Counts {
        updated: out.written,
        retries: out.retries,
        throttled: out.throttled,
        write_milli_units: out.write_units * 1000,
        ..Counts::default()
    };
    let refused = out
        .rejected
        .iter()
        .map(|(m, e)| (m, e.message.clone(), e.failure));
    let failed = out
        .failed
        .iter()
        .map(|(m, reason)| (m, reason.clone(), Failure::Transient));
    for (m, reason, failure) in refused.chain(failed) {
        counts.failed += 1;
        if let Err(io) = shared
            .failures
            .write(&shared.keys, &m.key_item(&shared.keys), &reason)
        {
            shared.halt(&io);
        }
        if failure == Failure::TableFault {
            let cause = Cause::Dynamo(sql2ddb_dynamo::ErrorKind::Call, Some(failure));
            shared.halt_with(reason, Some(cause));
        }
    }
    counts.publish(&shared.progress);
    Written {
        counts,
        kept_refusing: false,
    }
}

fn key_json<'a>(keys: &'a [KeyAttr], item: &Item) -> Vec<(&'a str, serde_json::Value)> {
    keys.iter()
        .filter_map(|k| Some((k.name.as_str(), item.get(&k.name)?.to_dynamo_json())))
        .collect()
}

/// An item's key as the source key of its row in rejects and reports.
fn source_key(keys: &[KeyAttr], item: &Item) -> serde_json::Value {
    serde_json::Value::Object(
        key_json(keys, item)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// `failed.jsonl`: one line per item not written, its key and the reason;
/// created on the first failure only.
pub(crate) struct FailuresFile {
    path: PathBuf,
    file: Mutex<Option<std::io::BufWriter<std::fs::File>>>,
}

impl FailuresFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        FailuresFile {
            path,
            file: Mutex::new(None),
        }
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn write(&self, keys: &[KeyAttr], item: &Item, reason: &str) -> Result<(), EngineError> {
        let io = |e: std::io::Error| EngineError::io(&self.path, e);
        let key: HashMap<&str, serde_json::Value> = key_json(keys, item).into_iter().collect();
        let line = serde_json::json!({ "key": key, "reason": reason });
        let mut guard = self.file.lock().expect("failures lock");
        if guard.is_none() {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(io)?;
            *guard = Some(std::io::BufWriter::new(f));
        }
        let w = guard.as_mut().expect("opened above");
        writeln!(w, "{line}").map_err(io)
    }

    pub(crate) fn flush(&self) -> Result<(), EngineError> {
        match self.file.lock().expect("failures lock").as_mut() {
            Some(w) => w.flush().map_err(|e| EngineError::io(&self.path, e)),
            None => Ok(()),
        }
    }
}
