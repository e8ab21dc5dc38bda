//! A batch's items on their way: the fresh ones not sent yet, and the ones
//! DynamoDB refused, waiting to go back among them.

use std::collections::VecDeque;
use std::sync::Mutex;

use sql2ddb_aws::Refusals;
use sql2ddb_core::limits::{MAX_BATCH_BYTES, MAX_BATCH_ITEMS};
use sql2ddb_core::EncodedItem;

/// Most items refused before that one call carries while the batch still
/// has fresh items: the rest of a chunk's refused items wait for the next
/// calls, so items a partition keeps refusing travel a few at a time with
/// other partitions' items instead of piling up in one chunk, refused whole
/// call after call while its fresh items are written.
pub const RESENDS_PER_CALL: usize = 5;

/// Room in a request body beyond its put requests: the envelope and the
/// table name (at most 255 bytes, escaped).
pub(crate) const BODY_OVERHEAD: usize = 64 + 2 * 255;

/// The bytes one item adds to a request body: its text in a put request.
pub(crate) fn put_bytes(m: &EncodedItem) -> usize {
    m.item.get().len() + r#"{"PutRequest":{"Item":}},"#.len()
}

/// An item on its way, and when it was first sent (its budget counts from
/// there).
pub(crate) struct Sending {
    pub item: EncodedItem,
    /// Calls that carried it without writing it: what the backoff grows
    /// with after a partial answer.
    pub refusals: u32,
    /// Of those, calls that wrote none of their items, and how many of
    /// them were throttling (the table at its limit, every item returned):
    /// what the retry policy counts as attempts (with a time budget, only
    /// those that were not throttling) and what the backoff grows with
    /// after a call refused whole. A refusal in a partial answer is the
    /// item waiting for its partition while the table is written, and a
    /// partition at its limit may refuse an item many times before its
    /// turn: counting those would fail rows of a hot partition however
    /// steadily the migration progressed.
    pub stalls: Refusals,
    pub since: tokio::time::Instant,
}

impl Sending {
    pub fn new(item: EncodedItem) -> Sending {
        Sending {
            item,
            refusals: 0,
            stalls: Refusals::default(),
            since: tokio::time::Instant::now(),
        }
    }

    fn refused_before(&self) -> bool {
        self.refusals > 0
    }
}

/// A batch's items not sent yet, in the order the batch chose, and the
/// items refused that wait to go back among them.
pub(crate) struct Pending(Mutex<Queues>);

struct Queues {
    fresh: VecDeque<EncodedItem>,
    refused: VecDeque<Sending>,
}

impl Pending {
    pub fn new(items: Vec<EncodedItem>) -> Pending {
        Pending(Mutex::new(Queues {
            fresh: items.into(),
            refused: VecDeque::new(),
        }))
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, Queues> {
        // Plain data, consistent after every statement.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next chunk, `None` once every item was taken.
    pub fn next_chunk(&self) -> Option<Vec<Sending>> {
        let mut chunk = Vec::new();
        self.top_up(&mut chunk);
        (!chunk.is_empty()).then_some(chunk)
    }

    /// After a refusal, while fresh items remain: `chunk` (its refused
    /// items) keeps [`RESENDS_PER_CALL`] of them and hands the others back
    /// to wait for the next calls, which each take a few along with fresh
    /// items. Once no fresh item is left, the chunk keeps them all: there
    /// is nothing left to send them among.
    pub fn spread_out(&self, chunk: &mut Vec<Sending>) {
        let mut q = self.queues();
        if q.fresh.is_empty() || chunk.len() <= RESENDS_PER_CALL {
            return;
        }
        q.refused.extend(chunk.drain(RESENDS_PER_CALL..));
    }

    /// Moves items into `chunk` until it holds 25, or the next would take
    /// its request body over DynamoDB's 16 MB: refused items first, while
    /// the chunk carries fewer than [`RESENDS_PER_CALL`] of them (any
    /// number once no fresh item is left), then fresh ones.
    pub fn top_up(&self, chunk: &mut Vec<Sending>) {
        if chunk.len() >= MAX_BATCH_ITEMS {
            return;
        }
        let mut bytes: usize = chunk.iter().map(|s| put_bytes(&s.item)).sum();
        let mut resent = chunk.iter().filter(|s| s.refused_before()).count();
        let fits = |bytes: usize, chunk: &[Sending], item: &EncodedItem| {
            chunk.is_empty() || bytes + put_bytes(item) + BODY_OVERHEAD <= MAX_BATCH_BYTES
        };
        let mut q = self.queues();
        while chunk.len() < MAX_BATCH_ITEMS {
            let resend = resent < RESENDS_PER_CALL || q.fresh.is_empty();
            if resend {
                if let Some(s) = q.refused.front() {
                    if !fits(bytes, chunk, &s.item) {
                        break;
                    }
                    bytes += put_bytes(&s.item);
                    resent += 1;
                    chunk.extend(q.refused.pop_front());
                    continue;
                }
            }
            let Some(item) = q.fresh.front() else {
                break;
            };
            if !fits(bytes, chunk, item) {
                break;
            }
            bytes += put_bytes(item);
            chunk.extend(q.fresh.pop_front().map(Sending::new));
        }
    }
}
