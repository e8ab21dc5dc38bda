//! The batch writer: `BatchWriteItem` in chunks of 25, retrying failed calls
//! and `UnprocessedItems` with capped exponential backoff and full jitter.
//!
//! Outcomes are classified as in Vector's sinks: success; retry the whole
//! call (throttling, 5xx, timeouts, dropped connections); retry *part* (only
//! the unprocessed items, sent back among the batch's next items); or give
//! up (validation errors: the chunk is split so the bad item fails alone and
//! the others are written).
//!
//! Throttling is retried within the policy's time budget, never counted as
//! attempts; an item the table still refuses when its budget ends is
//! *unwritten*, no fault of its own ([`WriteOutcome::unwritten`]), and the
//! caller leaves it pending. Other retryable failures (5xx, timeouts) keep
//! their cap of attempts and end as *failed*.

mod pending;

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
pub use sql2ddb_aws::RetryPolicy;
use sql2ddb_aws::{Attempt, Jitter, Retrier, Spent};
use sql2ddb_core::limits::{MAX_BATCH_BYTES, MAX_ITEM_BYTES};
use sql2ddb_core::{duration_text, write_units, AttrValue, EncodedItem, ItemProblem, KeyAttr};
use tokio::time::Instant;

use crate::concurrency::AdaptiveConcurrency;
use crate::failure::Failure;
use crate::limiter::WriteCapacityLimiter;
use crate::spread::spread;
pub use pending::RESENDS_PER_CALL;
use pending::{put_bytes, Pending, Sending, BODY_OVERHEAD};

/// A failed call: what it means, and what the service or the transport said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// What the failure means (classified once, from the error code and the
    /// HTTP status).
    pub failure: Failure,
    /// What the service or the transport said.
    pub message: String,
}

impl CallError {
    /// Whether trying again may succeed (throttling, 5xx, timeouts, connection errors).
    pub fn retryable(&self) -> bool {
        self.failure.is_retryable()
    }

    /// Whether the service said to slow down (as opposed to failing): the
    /// signal that halves an adaptive concurrency.
    pub fn is_throttling(&self) -> bool {
        self.failure == Failure::Throttled
    }
}

/// The one DynamoDB call the writer needs, so its retry logic can be tested
/// against a scripted client with paused time. The real one is
/// [`crate::BatchCalls`].
pub trait BatchWriteApi: Send + Sync {
    /// Puts `items` into `table`, whose key attributes are `keys`, in one
    /// `BatchWriteItem` call and returns the indices (into `items`) of the
    /// items DynamoDB left unprocessed, found by their keys.
    fn batch_put(
        &self,
        table: &str,
        keys: &[KeyAttr],
        items: &[&EncodedItem],
    ) -> impl Future<Output = Result<Vec<usize>, CallError>> + Send;
}

/// What became of one batch.
#[derive(Debug, Default)]
pub struct WriteOutcome {
    /// Rows whose item is in the table (including rows superseded by a later
    /// row with the same key in the same batch).
    pub written: u64,
    /// Rows superseded by a later row with the same key in the same batch.
    pub superseded: u64,
    /// Bytes of the items written, by DynamoDB's size rules.
    pub bytes: u64,
    /// Write units billed (1 KB rounding per item).
    pub write_units: u64,
    /// Calls made beyond the first of each chunk.
    pub retries: u64,
    /// Calls that were throttled or returned unprocessed items (a call that
    /// failed otherwise and was retried, a 500, counts in `retries` only).
    pub throttled: u64,
    /// Items DynamoDB refused (a non-retryable error such as a validation
    /// error), each with the classified failure and its message: bad rows,
    /// never retried. A [`Failure::TableFault`] is no fault of the item.
    pub rejected: Vec<(EncodedItem, CallError)>,
    /// Items still unwritten when their attempts ran out on failures other
    /// than throttling (5xx, timeouts, dropped connections: the service kept
    /// failing), with the reason. Each carries its item (so its key) and
    /// source key.
    pub failed: Vec<(EncodedItem, String)>,
    /// What the last refusal of a failed item was: why its retries ended,
    /// for the caller's error kind.
    pub failed_by: Option<Failure>,
    /// Items the table kept refusing (throttled, or returned unprocessed)
    /// until their retry budget ran out, with the reason: no fault of the
    /// item, never a rejected row. The caller leaves them pending, to be
    /// written again later (a run keeps its checkpoint before them, a
    /// worker leaves the message on the queue).
    pub unwritten: Vec<(EncodedItem, String)>,
}

impl WriteOutcome {
    fn absorb(&mut self, other: WriteOutcome) {
        self.written += other.written;
        self.superseded += other.superseded;
        self.bytes += other.bytes;
        self.write_units += other.write_units;
        self.retries += other.retries;
        self.throttled += other.throttled;
        self.rejected.extend(other.rejected);
        self.failed.extend(other.failed);
        self.failed_by = self.failed_by.or(other.failed_by);
        self.unwritten.extend(other.unwritten);
    }
}

/// Writes batches of items to one table.
pub struct BatchWriter<C> {
    client: C,
    table: String,
    keys: Vec<KeyAttr>,
    policy: RetryPolicy,
    /// The retry engine of `policy`: each wait's jitter and its sleep.
    retry: Retrier,
    concurrency: Option<Arc<AdaptiveConcurrency>>,
    capacity: Option<(Arc<WriteCapacityLimiter>, u64)>,
    /// The run's budget: set when a chunk spent its whole budget on
    /// retryable failures, cleared by the next call that succeeds. While
    /// set, a chunk gets one attempt.
    spent: AtomicBool,
    /// When an item's throttle budget last ran out: the job that made this
    /// writer is ending (its work stays pending), so the items being
    /// written since before then give up at their next throttled refusal
    /// instead of each waiting out a budget of its own. Items first sent
    /// later (a process that writes on) get their whole budget.
    refused_out: Mutex<Option<Instant>>,
}

impl<C: BatchWriteApi> BatchWriter<C> {
    /// A writer for `table`, whose key attributes are `keys` (partition key first).
    pub fn new(
        client: C,
        table: impl Into<String>,
        keys: Vec<KeyAttr>,
        policy: RetryPolicy,
    ) -> Self {
        BatchWriter {
            client,
            table: table.into(),
            keys,
            policy,
            retry: Retrier::new(policy),
            concurrency: None,
            capacity: None,
            spent: AtomicBool::new(false),
            refused_out: Mutex::new(None),
        }
    }

    /// The waits between attempts draw their jitter from `jitter` (a seeded
    /// one makes them repeatable).
    pub fn with_jitter(mut self, jitter: Arc<dyn Jitter>) -> Self {
        self.retry = self.retry.with_jitter(jitter);
        self
    }

    /// Every call first takes a permit from `concurrency` (shared by all the
    /// writers of the process) and reports to it whether it was throttled.
    /// The chunks of one batch then go out concurrently, as many as the
    /// permits allow; without it, one after the other.
    pub fn with_concurrency(mut self, concurrency: Arc<AdaptiveConcurrency>) -> Self {
        self.concurrency = Some(concurrency);
        self
    }

    /// Every call first takes its write units from `limiter`: per item, its
    /// billed units (1 KB rounding) times `units_multiplier` (1 + the number
    /// of global secondary indexes, each of which bills the write again).
    pub fn with_capacity_limit(
        mut self,
        limiter: Arc<WriteCapacityLimiter>,
        units_multiplier: u64,
    ) -> Self {
        self.capacity = Some((limiter, units_multiplier.max(1)));
        self
    }

    /// Writes `items`: duplicates of a key are resolved (the last row wins, as
    /// sequential puts would), then chunks of 25 are written with retries.
    /// An item that came without its key values (a queued page of an older
    /// release) has them read from its text first.
    pub async fn write(&self, mut items: Vec<EncodedItem>) -> WriteOutcome {
        let mut out = WriteOutcome::default();
        for m in &mut items {
            m.ensure_key(&self.keys);
        }
        // Items a queue message carried were checked by the reader that
        // mapped them; what the message itself could get wrong is checked
        // again here, before any call, so such an item is refused alone.
        let mut sendable = Vec::with_capacity(items.len());
        for m in items {
            match self.refusal(&m) {
                Some(message) => {
                    let failure = Failure::ItemRejected;
                    out.rejected.push((m, CallError { failure, message }));
                }
                None => sendable.push(m),
            }
        }
        let sent = sendable.len();
        let items = self.dedupe(sendable);
        out.superseded = (sent - items.len()) as u64;
        let fresh = Pending::new(spread(items));
        // The permits bound the calls in flight; this only bounds the futures.
        let width = self.concurrency.as_ref().map_or(1, |c| c.max());
        // Each chunk is cut when its call is about to start, so a chunk
        // that resends refused items can take fresh ones along first.
        let mut chunks = futures::stream::iter(std::iter::from_fn(|| fresh.next_chunk()))
            .map(|chunk| self.write_chunk(chunk, &fresh))
            .buffer_unordered(width);
        let mut split_up = Vec::new();
        while let Some((part, split)) = chunks.next().await {
            out.absorb(part);
            split_up.extend(split.into_iter().flatten());
        }
        drop(chunks);
        // A non-retryable error on several items: isolate the bad one, each
        // item in a call of its own.
        let alone = Pending::new(Vec::new());
        let mut singles = futures::stream::iter(split_up)
            .map(|m| self.write_chunk(vec![Sending::new(m)], &alone))
            .buffer_unordered(width);
        while let Some((part, _)) = singles.next().await {
            out.absorb(part);
        }
        out.written += out.superseded;
        out
    }

    /// Why an item cannot be sent at all, whatever the service would say:
    /// over 400 KB by DynamoDB's rules, a key attribute missing or empty, or
    /// text too long for one request.
    fn refusal(&self, m: &EncodedItem) -> Option<String> {
        if m.size > MAX_ITEM_BYTES {
            return Some(ItemProblem::TooLarge { size: m.size }.to_string());
        }
        for (k, v) in self.keys.iter().zip(&m.key) {
            let empty = match v {
                AttrValue::Null => return Some(format!("key attribute {} is missing", k.name)),
                AttrValue::S(s) => s.is_empty(),
                AttrValue::B(b) => b.is_empty(),
                AttrValue::N(_) => false,
                other => {
                    return Some(format!(
                        "key attribute {} is of type {}, not S, N or B",
                        k.name,
                        other.type_name()
                    ))
                }
            };
            if empty {
                return Some(format!("key attribute {} is empty", k.name));
            }
        }
        if put_bytes(m) + BODY_OVERHEAD > MAX_BATCH_BYTES {
            return Some(format!(
                "item text of {} bytes does not fit one BatchWriteItem request of {MAX_BATCH_BYTES} bytes",
                m.item.get().len()
            ));
        }
        None
    }

    fn dedupe(&self, items: Vec<EncodedItem>) -> Vec<EncodedItem> {
        // This runs on every item of every batch: keys by reference (a table
        // has at most two key attributes) in one hash set, no allocation per
        // item. Walked from the last row back, so the last of equal keys wins.
        let mut keep: Vec<bool> = {
            let mut seen: HashSet<&[AttrValue], foldhash::fast::RandomState> =
                HashSet::with_capacity_and_hasher(items.len(), Default::default());
            items
                .iter()
                .rev()
                .map(|m| seen.insert(&m.key[..]))
                .collect()
        };
        if keep.iter().all(|&k| k) {
            return items;
        }
        keep.reverse();
        items
            .into_iter()
            .zip(keep)
            .filter_map(|(m, kept)| kept.then_some(m))
            .collect()
    }

    /// One call for `chunk`, within the concurrency and capacity limits.
    async fn call(&self, chunk: &[Sending]) -> Result<Vec<usize>, CallError> {
        let permit = match &self.concurrency {
            Some(c) => Some(c.acquire().await),
            None => None,
        };
        // After the permit, so the units are spent when the call goes out.
        if let Some((limiter, multiplier)) = &self.capacity {
            let units: u64 = chunk.iter().map(|s| write_units(s.item.size)).sum();
            limiter.acquire(units * multiplier).await;
        }
        let refs: Vec<&EncodedItem> = chunk.iter().map(|s| &s.item).collect();
        let result = self.client.batch_put(&self.table, &self.keys, &refs).await;
        if let Some(permit) = permit {
            // Items refused before are on partitions known to be at their
            // limit: a call of only those, refused whole, says nothing of
            // the table's.
            let fresh = chunk.iter().any(|s| s.refusals == 0);
            match &result {
                Ok(unprocessed) if unprocessed.is_empty() => permit.success(),
                Ok(unprocessed) if unprocessed.len() < chunk.len() => permit.partial(),
                Ok(_) if fresh => permit.throttled(),
                Err(e) if e.is_throttling() && fresh => permit.throttled(),
                Ok(_) => permit.partial(),
                Err(e) if e.is_throttling() => permit.partial(),
                // Other failures say nothing about our pace.
                Err(_) => drop(permit),
            }
        }
        result
    }

    /// Writes one chunk until done or out of budget, through the one retry
    /// engine: each attempt ([`BatchWriter::chunk_attempt`]) says the
    /// backoff step its items call for and the nearest end of their
    /// budgets, and the engine waits. Returns what happened, and the chunk
    /// back when a non-retryable error hit more than one item.
    async fn write_chunk(
        &self,
        chunk: Vec<Sending>,
        pending: &Pending,
    ) -> (WriteOutcome, Option<Vec<EncodedItem>>) {
        let start = Chunk {
            items: chunk,
            out: WriteOutcome::default(),
            resent: false,
        };
        let (ended, tally) = self
            .retry
            .run_counted("BatchWriteItem", start, |c| self.chunk_attempt(c, pending))
            .await;
        let (mut out, split) = match ended {
            Ok(ended) => ended,
            Err(gave_up) => match gave_up.error {},
        };
        out.retries += u64::from(tally.retries());
        (out, split)
    }

    /// One call of a chunk. A resent chunk first takes fresh items from
    /// `pending` into the room the written ones left; after the call, the
    /// refused items beyond a few go back to `pending`, so the refused
    /// items, which are all on partitions at their limit, go back among
    /// other partitions' items rather than in a call of their own. Items
    /// whose retries are spent are given up here, each by its own budget.
    async fn chunk_attempt(&self, mut c: Chunk, pending: &Pending) -> ChunkAttempt {
        if c.resent {
            pending.top_up(&mut c.items);
        }
        let result = self.call(&c.items).await;
        if result.is_ok() {
            self.spent.store(false, Ordering::Relaxed);
        }
        let (mut left, refusal) = match self.answered(c.items, result, &mut c.out) {
            Answered::Finished(split) => return Attempt::Done((c.out, split)),
            Answered::Refused(left, refusal) => (left, refusal),
        };
        for s in &mut left {
            s.refusals += 1;
            if !refusal.progress {
                s.stalls.add(refusal.throttled);
            }
        }
        let step = backoff_step(&left, refusal.progress);
        let (mut kept, within) = self.keep_within_budget(left, &refusal, &mut c.out);
        if kept.is_empty() {
            return Attempt::Done((c.out, None));
        }
        pending.spread_out(&mut kept);
        tracing::debug!(table = %self.table, step, reason = %refusal.reason, "resending refused items");
        Attempt::Paced {
            work: Chunk {
                items: kept,
                out: c.out,
                resent: true,
            },
            step,
            within,
            throttled: refusal.throttled,
        }
    }

    /// What a call's answer leaves of the chunk: the items written are
    /// counted; done, or the items refused and why.
    fn answered(
        &self,
        chunk: Vec<Sending>,
        result: Result<Vec<usize>, CallError>,
        out: &mut WriteOutcome,
    ) -> Answered {
        match result {
            Ok(unprocessed) => {
                let (left, done) = split_indices(chunk, &unprocessed);
                for s in &done {
                    out.written += 1;
                    out.bytes += s.item.size as u64;
                    out.write_units += write_units(s.item.size);
                }
                if left.is_empty() {
                    return Answered::Finished(None);
                }
                out.throttled += 1;
                // Whether the call wrote some of its items: the table is
                // being written, the refused items wait their partition's turn.
                let refusal = Refusal {
                    reason: "DynamoDB kept returning the items as unprocessed".to_string(),
                    throttled: true,
                    progress: !done.is_empty(),
                };
                Answered::Refused(left, refusal)
            }
            Err(e) if e.retryable() => {
                let throttled = e.is_throttling();
                out.throttled += u64::from(throttled);
                let refusal = Refusal {
                    reason: e.message,
                    throttled,
                    progress: false,
                };
                Answered::Refused(chunk, refusal)
            }
            Err(e) => {
                let items = chunk.into_iter().map(|s| s.item);
                // Splitting the chunk isolates a bad item; it cannot help
                // when the table itself cannot be written.
                if items.len() > 1 && e.failure != Failure::TableFault {
                    tracing::debug!(table = %self.table, error = %e.message, "non-retryable error; writing the chunk item by item");
                    return Answered::Finished(Some(items.collect()));
                }
                out.rejected.extend(items.map(|m| (m, e.clone())));
                Answered::Finished(None)
            }
        }
    }

    /// The refused items that still have budget, and the longest wait
    /// before they go again (until the nearest end of one's budget: an item
    /// gets its last try when its budget ends); the others are given up
    /// into `out`.
    fn keep_within_budget(
        &self,
        chunk: Vec<Sending>,
        refusal: &Refusal,
        out: &mut WriteOutcome,
    ) -> (Vec<Sending>, Option<Duration>) {
        let mut within: Option<Duration> = None;
        let mut kept = Vec::with_capacity(chunk.len());
        // The items given up now, and whether one spent its own budget
        // (the others followed another's: said once, by that one).
        let (mut given_up, mut own) = (0, false);
        for s in chunk {
            match self.out_of_budget(&s, refusal.throttled, &refusal.reason) {
                Some((why, spent)) => {
                    given_up += 1;
                    own |= spent;
                    match refusal.throttled {
                        true => out.unwritten.push((s.item, why)),
                        false => {
                            out.failed.push((s.item, why));
                            out.failed_by = Some(Failure::Transient);
                        }
                    }
                }
                None => {
                    if let Some(budget) = self.policy.throttle_budget {
                        let left = budget.saturating_sub(s.since.elapsed());
                        within = Some(within.map_or(left, |w| w.min(left)));
                    }
                    kept.push(s)
                }
            }
        }
        if let Some((_, why)) = out.unwritten.last().or(out.failed.last()) {
            match own {
                true => {
                    tracing::warn!(table = %self.table, items = given_up, %why, "retry budget exhausted")
                }
                false if given_up > 0 => {
                    tracing::debug!(table = %self.table, items = given_up, %why, "given up")
                }
                false => {}
            }
        }
        (kept, within)
    }

    /// Why `s`, just refused (`throttled` or not) for `reason`, gets no
    /// further attempt, and whether that is its own budget: its attempts or
    /// its budget are spent (its own); or, refused by throttling, another
    /// item's budget ran out since it was first sent; or an earlier chunk
    /// spent its attempts and no call has succeeded since.
    fn out_of_budget(&self, s: &Sending, throttled: bool, reason: &str) -> Option<(String, bool)> {
        let refusals = s.refusals;
        let refused_out = || *self.refused_out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(spent) = self.policy.spent(&s.stalls, s.since.elapsed()) {
            match throttled {
                true => {
                    *self.refused_out.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(Instant::now());
                }
                false => self.spent.store(true, Ordering::Relaxed),
            }
            let why = match spent {
                Spent::Attempts(n) => format!("not written after {n} attempts: {reason}"),
                Spent::Budget(b) => format!(
                    "not written within the retry budget of {} ({refusals} attempts): {reason}",
                    duration_text(b)
                ),
            };
            return Some((why, true));
        }
        if throttled && refused_out().is_some_and(|at| s.since <= at) {
            return Some((format!(
                "not written: the table kept refusing writes past another item's retry budget ({refusals} attempts): {reason}"
            ), false));
        }
        self.spent.load(Ordering::Relaxed).then(|| {
            (format!(
                "not written: an earlier chunk spent its whole retry budget and no call has succeeded since ({refusals} attempts): {reason}"
            ), false)
        })
    }
}

/// The backoff after a partial answer grows with an item's refusals up to
/// this step's ceiling (400 ms with the default 50 ms base), not further:
/// the call wrote items, so the table is not throttling, and a longer wait
/// would leave the refused items' partition idle.
const PARTIAL_BACKOFF_STEPS: u32 = 4;

/// Splits a chunk into (unprocessed, processed) by the unprocessed indices.
fn split_indices(chunk: Vec<Sending>, unprocessed: &[usize]) -> (Vec<Sending>, Vec<Sending>) {
    let mut left = Vec::with_capacity(unprocessed.len());
    let mut done = Vec::with_capacity(chunk.len());
    for (i, m) in chunk.into_iter().enumerate() {
        if unprocessed.contains(&i) {
            left.push(m);
        } else {
            done.push(m);
        }
    }
    (left, done)
}

/// A chunk on its way through the retry engine: its items, what their
/// calls did so far, and whether it was refused before (it then takes
/// fresh items along before it goes again).
struct Chunk {
    items: Vec<Sending>,
    out: WriteOutcome,
    resent: bool,
}

/// What one call of a chunk came to: done (what the chunk's calls did, and
/// its items when a non-retryable error hit more than one of them), or the
/// chunk to resend. Nothing is given up as a whole: each item ends by its
/// own budget.
type ChunkAttempt =
    Attempt<(WriteOutcome, Option<Vec<EncodedItem>>), std::convert::Infallible, Chunk>;

/// What a call's answer leaves of a chunk.
enum Answered {
    /// Nothing left to send; with the chunk's items when a non-retryable
    /// error hit more than one of them (they go again one by one).
    Finished(Option<Vec<EncodedItem>>),
    /// These items were refused.
    Refused(Vec<Sending>, Refusal),
}

/// Why a chunk's items were refused.
struct Refusal {
    reason: String,
    /// The table said to slow down (or returned items unprocessed).
    throttled: bool,
    /// The call wrote some of its items.
    progress: bool,
}

/// The backoff step of the wait before a chunk goes again: it follows the
/// items refused most often; after a partial answer it stays short, so
/// that a partition at its limit always has items coming and writes at its
/// rate.
fn backoff_step(chunk: &[Sending], progress: bool) -> u32 {
    match progress {
        true => chunk
            .iter()
            .map(|s| s.refusals)
            .max()
            .unwrap_or(1)
            .min(PARTIAL_BACKOFF_STEPS),
        false => chunk.iter().map(|s| s.stalls.all).max().unwrap_or(1),
    }
}
