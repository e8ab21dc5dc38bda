//! Pacing by what the table admits: a write rate for the whole table and
//! one for each partition key the table refused, both learned from the
//! calls' answers, so that items wait before they are sent instead of being
//! sent, refused and sent again.
//!
//! DynamoDB holds each partition to its own rate (1,000 write units a
//! second at most) and the table to its capacity; items it cannot admit
//! come back unprocessed (or the whole call is throttled). A refused item
//! costs no write unit, but each refusal is a request on the wire and a
//! throttle event on the table's metrics, the alarms an operations team
//! watches on a live table. The pacer keeps them few:
//!
//! The pacer learns from partial answers (some items written, others
//! returned unprocessed), which is how a table at its limit answers. A call
//! refused whole counts only while partial answers show the table at a
//! limit ([`CUT_SHARE`] of the last second's units refused), or for a
//! paced key when the call carried its items alone (below): the adaptive
//! concurrency halves for it anyway, and a service that fails calls at
//! random refuses them whole too, which no rate would stop (cutting for it
//! starved the writer).
//!
//! - **The table's rate.** Before the first refusal nothing is paced. A
//!   partial answer refusing [`UNKNOWN_KEYS`] or more items that are each
//!   alone of their partition key in their batch (the table at its limit,
//!   not one partition) sets the rate a little below the write units the
//!   table admitted over the last second ([`FIRST_HEADROOM`] of it the
//!   first time, then [`HEADROOM`]), at most once a [`TICK`], never
//!   upwards, to no less than [`MAX_CUT`] of the rate, and only while the
//!   units refused over the last second are [`CUT_SHARE`] of those sent or
//!   more, of [`MIN_SAMPLE`] at least (fewer are faults); calls in flight
//!   when it was set do not set it again. While calls wait for the rate and
//!   nothing is refused, it grows by [`GROWTH`] every tick ([`PROBE`] near
//!   the rate last refused, for [`PROBE_FOR`] after a refusal).
//! - **A partition key's rate.** A key with more items in its batch whose
//!   items were refused is paced on its own from then on: its items wait
//!   their turn while other keys' items go. It starts at the rate the keys
//!   paced for [`SETTLED_AFTER`] and seen within it settled at (their
//!   median: the table's partitions are alike), or at [`KEY_START_RATE`],
//!   DynamoDB's limit for one partition, while no key has. Once keys have
//!   settled, a key with more items in its batch is paced at their rate
//!   from its first item, not from its first refusal: a collection sent
//!   unpaced takes its partition's banked second at once, and the keys
//!   sharing the partition are refused with it. A further partial refusal,
//!   or a call of its items alone refused whole (its partition had room
//!   for none of them; a paced key's calls carry an item or two as its
//!   turns come), sets it to what the table admitted of it over the last
//!   second (between [`KEY_FLOOR`] and [`KEY_CUT`] of its rate, at most
//!   once a tick); each tick its items waited unrefused grows it by
//!   [`KEY_GROWTH`], once more for each such tick in a row. A hot
//!   partition thus waits without holding back the rest. At most
//!   [`MAX_KEYS`] keys are remembered; the idle ones are forgotten first.
//!   The batch writer's items take their key's turn as their call goes,
//!   not when their chunk is cut (it may wait a while for its permit,
//!   and the key be paced meanwhile).
//!
//! Times are tokio's, so tests drive the pacer with a paused clock.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use sql2ddb_core::AttrValue;
use tokio::time::Instant;

use crate::limiter::book;

/// How often the table's rate may grow, and the slots of its window.
pub const TICK: Duration = Duration::from_millis(100);
/// How much the table's rate grows per [`TICK`] while calls wait for it and
/// nothing is refused.
pub const GROWTH: f64 = 1.03;
/// What a refusal sets the table's rate to, of what it admitted over the
/// last second: a little below it, so the partitions' buckets fill again
/// and the items the rate sends are not refused at once.
pub const HEADROOM: f64 = 0.95;
/// What the first refusal sets the table's rate to, of what it admitted
/// over the last second.
pub const FIRST_HEADROOM: f64 = 0.8;
/// Near the rate last refused (this fraction of it or more), a rate grows
/// by [`PROBE`] a tick only, for [`PROBE_FOR`].
pub const NEAR: f64 = 0.9;
/// The growth per tick near the rate last refused.
pub const PROBE: f64 = 1.005;
/// How long after a refusal a rate grows slowly near it.
pub const PROBE_FOR: Duration = Duration::from_secs(2);
/// Items alone of their key in their batch refused in one call that say
/// the table, not one partition, is at its limit.
pub const UNKNOWN_KEYS: usize = 2;
/// The share of the units sent over the last second that must have been
/// returned unprocessed for a refusal to cut the table's rate: below it,
/// refusals are faults (a service failing at random), not its limit, and
/// the pacer keeps the share at the limit about this low.
pub const CUT_SHARE: f64 = 0.05;
/// The fewest units sent over the last second for their refused share to
/// say anything: a few calls, one of them answered in part, are not a
/// limit (and a slow table's refusals are few).
pub const MIN_SAMPLE: f64 = 1_000.0;
/// Keys of a call refused whole, at the table's limit, that say it is the
/// table's limit rather than one partition's.
pub const WHOLE_KEYS: usize = 3;
/// The least one cut leaves of the table's rate.
pub const MAX_CUT: f64 = 0.7;
/// The lowest table rate, write units per second.
pub const MIN_RATE: f64 = 25.0;
/// A key's rate when it is first refused while no key has settled
/// ([`SETTLED_AFTER`]): DynamoDB's limit for one partition, write units
/// per second.
pub const KEY_START_RATE: f64 = 1_000.0;
/// The most a refusal leaves of a key's rate.
pub const KEY_CUT: f64 = 0.7;
/// The least a refusal leaves of a key's rate.
pub const KEY_FLOOR: f64 = 0.25;
/// How much a key's rate grows per [`TICK`] while its items wait and none
/// is refused.
pub const KEY_GROWTH: f64 = 1.2;
/// The highest key rate, write units per second.
pub const MAX_KEY_RATE: f64 = 4_000.0;
/// The lowest key rate, write units per second.
pub const MIN_KEY_RATE: f64 = 1.0;
/// The most partition keys paced at once.
pub const MAX_KEYS: usize = 4_096;
/// How long a key is paced, and how lately its items came, for its rate to
/// count as settled: its share of its partition, which a key met later
/// starts from.
pub const SETTLED_AFTER: Duration = Duration::from_secs(1);
/// The window the table's admitted rate is measured over: ten ticks.
const SLOTS: usize = 10;
/// The table's bucket: a tenth of a second of its rate.
const BURST: f64 = 0.1;

/// The learned rates, shared by the writers of a process.
#[derive(Debug)]
pub struct Pacer {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    origin: Instant,
    table: TablePace,
    keys: Keys,
    /// The rate the keys paced a while settled at.
    settled: SettledRate,
    stats: PacerSnapshot,
}

#[derive(Debug)]
struct TablePace {
    /// Write units per second; `None` until the table first refused.
    rate: Option<f64>,
    /// Units in the bucket at `at` (negative: owed; `at` may lie ahead).
    tokens: f64,
    at: Instant,
    /// When the rate was last set from a refusal: calls sent before do
    /// not set it again.
    cut_at: Option<Instant>,
    /// When it last grew (or was cut), and whether a caller waited since.
    grown_at: Instant,
    waited: bool,
    /// What the table admitted over the second before the last refusal:
    /// the rate grows slowly near it.
    ceiling: f64,
    /// Units admitted over the last second.
    admitted: Window,
    /// Units returned unprocessed over the last second.
    refused_units: Window,
    /// Items alone of their key refused over the last second, by calls of
    /// one item.
    lone: Window,
}

/// The pacer's figures, for the run report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PacerSnapshot {
    /// The table's rate now, write units per second (`None`: not learned).
    pub rate: Option<f64>,
    /// Times the table's rate was set from a refusal.
    pub cuts: u64,
    /// Items that waited for their partition key's turn.
    pub held: u64,
    /// Partition keys paced now.
    pub keys: usize,
    /// Time callers waited for the table's rate (summed over callers).
    pub waited: Duration,
}

/// One item of an answered call.
#[derive(Debug, Clone, Copy)]
pub struct Sent<'a> {
    /// Its partition key value.
    pub key: &'a AttrValue,
    /// Its write units.
    pub units: u64,
    /// Whether it is the only item of its partition key in its batch: a
    /// refusal of such items says the table is at its limit (a key with
    /// more items is paced on its own).
    pub alone: bool,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

impl Pacer {
    /// A pacer that has learned nothing: nothing waits until the table refuses.
    pub fn new() -> Pacer {
        let now = Instant::now();
        Pacer {
            state: Mutex::new(State {
                origin: now,
                table: TablePace {
                    rate: None,
                    tokens: 0.0,
                    at: now,
                    cut_at: None,
                    ceiling: 0.0,
                    grown_at: now,
                    waited: false,
                    admitted: Window::default(),
                    refused_units: Window::default(),
                    lone: Window::default(),
                },
                keys: Keys::default(),
                settled: SettledRate::new(),
                stats: PacerSnapshot::default(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Plain numbers, consistent after every statement.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `units` write units may be sent at the table's rate,
    /// and spends them.
    pub async fn admit(&self, units: u64) {
        let at = self.reserve(units, Instant::now());
        tokio::time::sleep_until(at).await;
    }

    /// Books `units` at the table's rate, at or after `now` and after every
    /// earlier caller, and returns when they may go.
    fn reserve(&self, units: u64, now: Instant) -> Instant {
        let mut s = self.state();
        let waited_before = s.stats.waited;
        let t = &mut s.table;
        let Some(rate) = t.rate else {
            return now;
        };
        let rate = t.grow(rate, now);
        let burst = (rate * BURST).max(1.0);
        let at = book(&mut t.tokens, &mut t.at, (rate, burst), units, now);
        if at > now {
            t.waited = true;
        }
        s.stats.waited = waited_before + (at - now);
        at
    }

    /// Whether an item of partition key `key` with `units` write units may
    /// go now: `None` if so (its key is not paced, or its turn has come:
    /// the turn is taken), else the earliest moment to ask again (another
    /// item of the key may take that turn first).
    pub fn key_turn(&self, key: &AttrValue, units: u64, now: Instant) -> Option<Instant> {
        self.item_turn(key, units, false, now).later()
    }

    /// [`Pacer::key_turn`], told whether its key is paced, for an item
    /// whose key has more items in its batch (`shared`) or not. A shared
    /// key not paced yet is paced from its first item at the rate the keys
    /// paced a while settled at, if any: the table's partitions are alike,
    /// and a collection sent unpaced until its partition refuses it takes
    /// the partition's whole second at once, refused with the keys that
    /// share it.
    pub fn item_turn(&self, key: &AttrValue, units: u64, shared: bool, now: Instant) -> KeyTurn {
        let mut s = self.state();
        let State { keys, settled, .. } = &mut *s;
        if shared && !keys.contains_key(key) {
            let Some(rate) = settled.of(keys, now) else {
                return KeyTurn::Unpaced;
            };
            if keys.len() >= MAX_KEYS {
                forget_idle(keys);
            }
            keys.insert(key.clone(), KeyPace::new(now, rate));
        }
        let Some(pace) = s.keys.get_mut(key) else {
            return KeyTurn::Unpaced;
        };
        pace.last_seen = now;
        pace.grow(now);
        if pace.next_at > now {
            pace.waited = true;
            let at = pace.next_at;
            s.stats.held += 1;
            return KeyTurn::Later(at);
        }
        pace.next_at = now + Duration::from_secs_f64(pace.interval * units as f64);
        KeyTurn::Taken
    }

    /// Waits for the turn of an item of partition key `key` with `units`
    /// write units (its key's, if the key is paced, or `shared` and paced
    /// from its first item as [`Pacer::item_turn`] says) and then for the
    /// table's rate, and spends both.
    pub async fn turn(&self, key: &AttrValue, units: u64, shared: bool) {
        while let KeyTurn::Later(at) = self.item_turn(key, units, shared, Instant::now()) {
            tokio::time::sleep_until(at).await;
        }
        self.admit(units).await;
    }

    /// Learns from a call sent at `sent`: the items it wrote, the items it
    /// returned unprocessed, and whether it was throttled whole (an error
    /// answer, every item refused).
    pub fn answered(&self, sent: Instant, written: &[Sent<'_>], refused: &[Sent<'_>], whole: bool) {
        let alone = refused.iter().filter(|r| r.alone).count();
        self.learn(sent, written, refused, whole, alone);
    }

    /// Learns from a call of one item sent at `sent` (`UpdateItem`,
    /// `DeleteItem`), `refused` if it was throttled. Such calls refuse
    /// their item whole and one at a time, and a throttle counts as a
    /// partial answer's refusal: the items `alone` refused over the last
    /// second, not in one call, say the table is at its limit; a key with
    /// more items is paced on its own.
    pub fn answered_one(&self, sent: Instant, item: Sent<'_>, refused: bool) {
        let alone = match (refused, item.alone) {
            (true, true) => {
                let mut s = self.state();
                let tick = Window::tick_of(s.origin, Instant::now());
                s.table.lone.add(tick, 1);
                s.table.lone.sum(tick) as usize
            }
            _ => 0,
        };
        let one = [item];
        match refused {
            true => self.learn(sent, &[], &one, false, alone),
            false => self.learn(sent, &one, &[], false, 0),
        }
    }

    /// Learns from an answer whose refused items alone of their key, as
    /// the answer tells them, are `alone`.
    fn learn(
        &self,
        sent: Instant,
        written: &[Sent<'_>],
        refused: &[Sent<'_>],
        whole: bool,
        alone: usize,
    ) {
        let now = Instant::now();
        let mut s = self.state();
        let State {
            origin,
            table,
            keys,
            settled,
            stats,
        } = &mut *s;
        let tick = Window::tick_of(*origin, now);
        table
            .admitted
            .add(tick, written.iter().map(|w| w.units).sum());
        if !whole {
            table
                .refused_units
                .add(tick, refused.iter().map(|r| r.units).sum());
        }
        for w in written.iter().filter(|w| !w.alone) {
            if let Some(pace) = keys.get_mut(w.key) {
                pace.admitted.add(tick, w.units);
                pace.last_seen = now;
            }
        }
        // Partial answers refusing a share of the last second's units say
        // the table is at a limit; below it, refusals are faults.
        let at_limit = table.refused_share(tick) >= CUT_SHARE;
        // Items refused that are alone of their key in their batch: one
        // is its partition's news, several the table's. A key with more
        // items is paced on its own.
        let answer = key::Answer {
            sent,
            now,
            tick,
            whole,
            at_limit,
        };
        let seen = key::refused(keys, settled, refused, answer);
        // A call refused whole counts only while partial answers show the
        // table at a limit (a service failing calls at random refuses them
        // whole too), and then as the table's unless it carried a key or
        // two of one partition.
        let table_wide = at_limit
            && match whole {
                false => alone >= UNKNOWN_KEYS,
                true => alone > 0 || seen.len() >= WHOLE_KEYS,
            };
        let fresh = table.cut_at.is_none_or(|at| sent >= at && now >= at + TICK);
        if table_wide && fresh {
            table.cut(now, tick);
            stats.cuts += 1;
        }
    }

    /// The rate `key` is paced at, write units per second (`None`: not paced).
    pub fn key_rate(&self, key: &AttrValue) -> Option<f64> {
        self.state().keys.get(key).map(|p| 1.0 / p.interval)
    }

    /// The figures so far.
    pub fn snapshot(&self) -> PacerSnapshot {
        let s = self.state();
        PacerSnapshot {
            rate: s.table.rate,
            keys: s.keys.len(),
            ..s.stats
        }
    }
}

impl TablePace {
    /// Refused at the table's limit: the rate goes a little below what the
    /// table admitted over the last second; never up, and at most once a
    /// tick to no less than [`MAX_CUT`] of it, so refusals a cut does not
    /// stop (a service failing at random) lower it slowly and it grows back
    /// between them.
    fn cut(&mut self, now: Instant, tick: u64) {
        let measured = self.admitted.sum(tick) as f64;
        // The first refusal ends a start at full speed that emptied the
        // partitions' buckets: further below, so they fill again.
        let headroom = match self.rate {
            Some(_) => HEADROOM,
            None => FIRST_HEADROOM,
        };
        self.ceiling = measured;
        let rate = (measured * headroom).max(MIN_RATE);
        self.rate = Some(self.rate.map_or(rate, |r| r.min(rate).max(r * MAX_CUT)));
        self.cut_at = Some(now);
        self.grown_at = now;
        self.waited = false;
    }

    /// The share of the units of partial answers over the last second
    /// that were returned unprocessed.
    fn refused_share(&mut self, tick: u64) -> f64 {
        let refused = self.refused_units.sum(tick) as f64;
        let all = refused + self.admitted.sum(tick) as f64;
        match all >= MIN_SAMPLE {
            true => refused / all,
            false => 0.0,
        }
    }

    /// The rate at `now`: grown by [`GROWTH`] for each tick since it last
    /// grew in which callers waited for it and nothing was refused.
    fn grow(&mut self, rate: f64, now: Instant) -> f64 {
        if now < self.grown_at + TICK {
            return rate;
        }
        let rate = match self.waited {
            true => grown(rate, self.ceiling, self.cut_at, now, (GROWTH, PROBE)),
            false => rate,
        };
        self.rate = Some(rate);
        self.grown_at = now;
        self.waited = false;
        rate
    }
}

/// A rate after a tick of growth: by `fast` while well below the rate last
/// refused (`ceiling`), but to no more than [`NEAR`] of it; near or above
/// it by `probe` for [`PROBE_FOR`] after the refusal; then by `fast` again
/// (the table or the partition may have gained capacity).
fn grown(
    rate: f64,
    ceiling: f64,
    cut_at: Option<Instant>,
    now: Instant,
    (fast, probe): (f64, f64),
) -> f64 {
    let lately = cut_at.is_some_and(|at| now < at + PROBE_FOR);
    let near = ceiling * NEAR;
    match lately {
        false => rate * fast,
        true if rate >= near => rate * probe,
        true => (rate * fast).min(near),
    }
}

mod key;
mod window;

pub use key::KeyTurn;
use key::{forget_idle, KeyPace, Keys, SettledRate};
use window::Window;

#[cfg(test)]
mod tests;
