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

mod chunk;
mod pending;

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
pub use sql2ddb_aws::RetryPolicy;
use sql2ddb_aws::{Jitter, Retrier};
use sql2ddb_core::limits::{MAX_BATCH_BYTES, MAX_ITEM_BYTES};
use sql2ddb_core::{write_units, AttrValue, EncodedItem, ItemProblem, KeyAttr};
use tokio::time::Instant;

use crate::concurrency::AdaptiveConcurrency;
use crate::failure::Failure;
use crate::limiter::WriteCapacityLimiter;
use crate::pacer::{Pacer, Sent};
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
    /// The rates the table admits, learned from the answers (shared by the
    /// writers of a process, or this writer's own).
    pacer: Arc<Pacer>,
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
            pacer: Arc::new(Pacer::new()),
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

    /// Calls wait for the rates `pacer` learned from the table's answers
    /// (shared by all the writers of the process, as the table is): the
    /// table's, and each refused partition key's.
    pub fn with_pacer(mut self, pacer: Arc<Pacer>) -> Self {
        self.pacer = pacer;
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
        let fresh = Pending::new(spread(items), self.pacer.clone());
        // The permits bound the calls in flight; this only bounds the futures.
        let width = self.concurrency.as_ref().map_or(1, |c| c.max());
        // Each chunk is cut when its call is about to start, so a chunk
        // that resends refused items can take fresh ones along first; the
        // chunks go on while items are held for their key's turn or on
        // their way (a call may give them back).
        let mut split_up = Vec::new();
        let mut running = futures::stream::FuturesUnordered::new();
        let mut cut_all = false;
        loop {
            tokio::select! {
                chunk = fresh.next_chunk(), if !cut_all && running.len() < width => match chunk {
                    Some(chunk) => running.push(self.write_chunk(chunk, &fresh)),
                    None => cut_all = true,
                },
                Some((part, split)) = running.next(), if !running.is_empty() => {
                    out.absorb(part);
                    split_up.extend(split.into_iter().flatten());
                }
                else => break,
            }
        }
        // A non-retryable error on several items: isolate the bad one, each
        // item in a call of its own.
        let alone = Pending::alone();
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

    /// One call for `chunk`, within the concurrency and capacity limits;
    /// `None` when none of its items may go yet: each takes its key's turn
    /// once the call has its permit, if it did not when the chunk was cut,
    /// and those whose turn has not come wait in `pending`.
    async fn call(
        &self,
        chunk: &mut Vec<Sending>,
        pending: &Pending,
    ) -> Option<Result<Vec<usize>, CallError>> {
        let permit = match &self.concurrency {
            Some(c) => Some(c.acquire().await),
            None => None,
        };
        pending.take_turns(chunk);
        if chunk.is_empty() {
            return None;
        }
        let chunk = &*chunk;
        // After the permit, so the units are spent when the call goes out.
        let units: u64 = chunk.iter().map(|s| write_units(s.item.size)).sum();
        let multiplier = self.capacity.as_ref().map_or(1, |(_, m)| *m);
        self.pacer.admit(units * multiplier).await;
        if let Some((limiter, _)) = &self.capacity {
            limiter.acquire(units * multiplier).await;
        }
        let refs: Vec<&EncodedItem> = chunk.iter().map(|s| &s.item).collect();
        let sent = Instant::now();
        let result = self.client.batch_put(&self.table, &self.keys, &refs).await;
        self.learn(sent, chunk, &result);
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
        Some(result)
    }

    /// Tells the pacer what a call sent at `sent` came to.
    fn learn(&self, sent: Instant, chunk: &[Sending], result: &Result<Vec<usize>, CallError>) {
        fn of(s: &Sending) -> Option<Sent<'_>> {
            s.item.key.first().map(|key| Sent {
                key,
                units: write_units(s.item.size),
                alone: s.alone,
            })
        }
        match result {
            Ok(unprocessed) => {
                let (mut written, mut refused) = (Vec::new(), Vec::new());
                for (i, s) in chunk.iter().enumerate() {
                    let side = match unprocessed.contains(&i) {
                        true => &mut refused,
                        false => &mut written,
                    };
                    side.extend(of(s));
                }
                self.pacer.answered(sent, &written, &refused, false);
            }
            Err(e) if e.is_throttling() => {
                let refused: Vec<_> = chunk.iter().filter_map(of).collect();
                self.pacer.answered(sent, &[], &refused, true);
            }
            Err(_) => {}
        }
    }
}
