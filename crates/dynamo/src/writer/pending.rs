//! A batch's items on their way: the fresh ones not sent yet, and the ones
//! DynamoDB refused, waiting to go back among them.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use sql2ddb_aws::Refusals;
use sql2ddb_core::limits::{MAX_BATCH_BYTES, MAX_BATCH_ITEMS};
use sql2ddb_core::{write_units, AttrValue, EncodedItem};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::pacer::{KeyTurn, Pacer};

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
    pub since: Instant,
    /// Whether no other item of its batch has its partition key.
    pub alone: bool,
    /// Whether a partial answer gave it back to wait for its turn.
    pub given_back: bool,
    /// Whether it took its key's turn when its chunk was cut; if not, it
    /// takes it when its call goes ([`Pending::take_turns`]), and each
    /// call of it takes one again.
    pub turned: bool,
}

impl Sending {
    pub fn new(item: EncodedItem) -> Sending {
        Sending {
            item,
            refusals: 0,
            stalls: Refusals::default(),
            since: Instant::now(),
            alone: true,
            given_back: false,
            turned: false,
        }
    }

    pub fn refused_before(&self) -> bool {
        self.refusals > 0
    }
}

/// A batch's items not sent yet, in the order the batch chose, the items
/// refused that wait to go back among them, and those waiting for their
/// partition key's turn ([`Pacer::key_turn`]).
pub(crate) struct Pending {
    queues: Mutex<Queues>,
    /// Whether chunks are cut from it until every item is written (the
    /// items a call refused can be given back); else its chunks keep
    /// their refused items.
    streamed: bool,
    pacer: Option<Arc<Pacer>>,
    /// Told when items are given back or a chunk ends.
    changed: Notify,
}

struct Queues {
    fresh: VecDeque<EncodedItem>,
    /// The partition keys of more than one of the batch's items.
    shared: HashSet<AttrValue, foldhash::fast::RandomState>,
    refused: VecDeque<Sending>,
    /// Items waiting for their key's turn, and when to ask again.
    held: Vec<(Instant, Sending)>,
    /// Chunks cut and not ended: they may give items back.
    in_flight: usize,
}

impl Pending {
    /// The items of a batch, cut into chunks until each is written or
    /// given up, each item waiting for its key's turn on `pacer`.
    pub fn new(items: Vec<EncodedItem>, pacer: Arc<Pacer>) -> Pending {
        Pending::of(items, Some(pacer))
    }

    /// No items of its own: the chunks written with it keep theirs.
    pub fn alone() -> Pending {
        Pending::of(Vec::new(), None)
    }

    /// `items`, streamed through chunks when there is a `pacer` to wait for.
    fn of(items: Vec<EncodedItem>, pacer: Option<Arc<Pacer>>) -> Pending {
        let shared = shared_keys(&items);
        Pending {
            queues: Mutex::new(Queues {
                fresh: items.into(),
                shared,
                refused: VecDeque::new(),
                held: Vec::new(),
                in_flight: 0,
            }),
            streamed: pacer.is_some(),
            pacer,
            changed: Notify::new(),
        }
    }

    /// Whether a chunk's refused items can be given back.
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, Queues> {
        // Plain data, consistent after every statement.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next chunk; it waits while every item left is held for its
    /// key's turn or on its way in a chunk (which may give it back).
    /// `None` once every item was taken and every chunk ended.
    pub async fn next_chunk(&self) -> Option<Vec<Sending>> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let mut chunk = Vec::new();
            self.top_up(&mut chunk);
            let next_turn = {
                let mut q = self.queues();
                if !chunk.is_empty() {
                    q.in_flight += 1;
                    return Some(chunk);
                }
                if q.held.is_empty() && q.in_flight == 0 {
                    return None;
                }
                q.held.iter().map(|(at, _)| *at).min()
            };
            match next_turn {
                Some(at) => {
                    tokio::select! {
                        _ = changed => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// A chunk cut by [`Pending::next_chunk`] ended.
    pub fn chunk_ended(&self) {
        self.queues().in_flight -= 1;
        self.changed.notify_waiters();
    }

    /// Items a call refused, to go again in the next chunks, each at its
    /// key's turn.
    pub fn give_back(&self, items: Vec<Sending>) {
        let items = items.into_iter().map(|s| Sending {
            given_back: true,
            ..s
        });
        self.queues().refused.extend(items);
        self.changed.notify_waiters();
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
    /// its request body over DynamoDB's 16 MB: items whose key's turn has
    /// come first, then refused items while the chunk carries fewer than
    /// [`RESENDS_PER_CALL`] of them (any number once no fresh item is
    /// left), then fresh ones. A refused or fresh item whose key is paced
    /// and whose turn has not come is held for it.
    pub fn top_up(&self, chunk: &mut Vec<Sending>) {
        if chunk.len() >= MAX_BATCH_ITEMS {
            return;
        }
        let mut bytes: usize = chunk.iter().map(|s| put_bytes(&s.item)).sum();
        let mut resent = chunk.iter().filter(|s| s.refused_before()).count();
        let fits = |bytes: usize, chunk: &[Sending], item: &EncodedItem| {
            chunk.is_empty() || bytes + put_bytes(item) + BODY_OVERHEAD <= MAX_BATCH_BYTES
        };
        let now = Instant::now();
        let mut q = self.queues();
        let q = &mut *q;
        let mut i = 0;
        while i < q.held.len() && chunk.len() < MAX_BATCH_ITEMS {
            let (at, s) = &mut q.held[i];
            if *at > now || !fits(bytes, chunk, &s.item) {
                i += 1;
                continue;
            }
            let turn = self.key_turn(s, now);
            if let KeyTurn::Later(later) = turn {
                *at = later;
                i += 1;
                continue;
            }
            let (_, mut s) = q.held.swap_remove(i);
            s.turned = turn == KeyTurn::Taken;
            bytes += put_bytes(&s.item);
            resent += usize::from(s.refused_before());
            chunk.push(s);
        }
        while chunk.len() < MAX_BATCH_ITEMS {
            let resend = resent < RESENDS_PER_CALL || q.fresh.is_empty();
            let next = match q.refused.front() {
                Some(s) if resend => &s.item,
                _ => match q.fresh.front() {
                    Some(item) => item,
                    None => break,
                },
            };
            if !fits(bytes, chunk, next) {
                break;
            }
            let s = match q.refused.front() {
                Some(_) if resend => q.refused.pop_front(),
                _ => q.fresh.pop_front().map(|m| {
                    let alone = m.key.first().is_none_or(|k| !q.shared.contains(k));
                    Sending {
                        alone,
                        ..Sending::new(m)
                    }
                }),
            };
            let Some(mut s) = s else { break };
            let turn = self.key_turn(&s, now);
            if let KeyTurn::Later(at) = turn {
                q.held.push((at, s));
                continue;
            }
            s.turned = turn == KeyTurn::Taken;
            bytes += put_bytes(&s.item);
            resent += usize::from(s.refused_before());
            chunk.push(s);
        }
    }

    /// As its call goes: each of `chunk`'s items that did not take its
    /// key's turn when the chunk was cut takes it now, or is held for it.
    /// A chunk may wait a while for its call's permit, and its key may be
    /// paced by then (an answer refused it, or another item of it was the
    /// first of a shared key): the chunks cut before would send the key's
    /// items unpaced, a collection's many at once.
    pub fn take_turns(&self, chunk: &mut Vec<Sending>) {
        if !self.streamed {
            return;
        }
        let now = Instant::now();
        let mut held = Vec::new();
        for mut s in std::mem::take(chunk) {
            let later = match s.turned {
                true => None,
                false => self.key_turn(&s, now).later(),
            };
            s.turned = false;
            match later {
                Some(at) => held.push((at, s)),
                None => chunk.push(s),
            }
        }
        if !held.is_empty() {
            self.queues().held.extend(held);
            self.changed.notify_waiters();
        }
    }

    /// What `s`'s key's pace says now (its turn taken if it came).
    fn key_turn(&self, s: &Sending, now: Instant) -> KeyTurn {
        let (Some(pacer), Some(key)) = (self.pacer.as_ref(), s.item.key.first()) else {
            return KeyTurn::Unpaced;
        };
        pacer.item_turn(key, write_units(s.item.size), !s.alone, now)
    }
}

/// The partition keys of more than one of `items`.
fn shared_keys(items: &[EncodedItem]) -> HashSet<AttrValue, foldhash::fast::RandomState> {
    let mut seen: HashSet<&AttrValue, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(items.len(), Default::default());
    let mut shared = HashSet::default();
    for pk in items.iter().filter_map(|m| m.key.first()) {
        if !seen.insert(pk) && !shared.contains(pk) {
            shared.insert(pk.clone());
        }
    }
    shared
}
