//! One chunk of a batch through the one retry engine: each call of it is
//! an attempt that keeps its items' own budgets, gives up those spent,
//! spreads the refused ones back among fresh items, and tells the engine
//! the backoff step and the latest wait the rest call for.

use std::sync::atomic::Ordering;
use std::time::Duration;

use sql2ddb_aws::{Attempt, Spent};
use sql2ddb_core::{duration_text, write_units, EncodedItem};
use tokio::time::Instant;

use super::pending::{Pending, Sending};
use super::{BatchWriteApi, BatchWriter, CallError, WriteOutcome};
use crate::failure::Failure;

impl<C: BatchWriteApi> BatchWriter<C> {
    /// Writes one chunk until done or out of budget, through the one retry
    /// engine: each attempt ([`BatchWriter::chunk_attempt`]) says the
    /// backoff step its items call for and the nearest end of their
    /// budgets, and the engine waits. Returns what happened, and the chunk
    /// back when a non-retryable error hit more than one item.
    pub(super) async fn write_chunk(
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
        if pending.streamed() {
            pending.chunk_ended();
        }
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
        self.waited_out(&mut c.items, &mut c.out);
        if c.items.is_empty() {
            return Attempt::Done((c.out, None));
        }
        let Some(result) = self.call(&mut c.items, pending).await else {
            // Every item waits for its key's turn, among the batch's others.
            return Attempt::Done((c.out, None));
        };
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
        if refusal.throttled && refusal.progress && pending.streamed() {
            // A partial answer: the pacer has learned it, and the items go
            // again at their keys' turns and the table's rate, among the
            // others. A call refused whole waits its backoff, as before.
            c.out.retries += 1;
            pending.give_back(kept);
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

    /// Gives up, unwritten, the items a partial answer gave back whose
    /// throttle budget ran out while they waited for their turn: the pacer
    /// held them for the rate the table admits, which is the table refusing
    /// them all the same. (A chunk refused whole keeps its items through
    /// the retry engine's backoff, its last try at the budget's end.)
    fn waited_out(&self, chunk: &mut Vec<Sending>, out: &mut WriteOutcome) {
        let Some(budget) = self.policy.throttle_budget else {
            return;
        };
        let over = |s: &Sending| s.given_back && s.since.elapsed() >= budget;
        if !chunk.iter().any(over) {
            return;
        }
        let (gone, kept): (Vec<Sending>, Vec<Sending>) = chunk.drain(..).partition(over);
        *chunk = kept;
        let why = format!(
            "not written within the retry budget of {}: DynamoDB kept returning the items as unprocessed, and they waited for the rate the table admits",
            duration_text(budget)
        );
        tracing::warn!(table = %self.table, items = gone.len(), %why, "retry budget exhausted");
        out.unwritten
            .extend(gone.into_iter().map(|s| (s.item, why.clone())));
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
