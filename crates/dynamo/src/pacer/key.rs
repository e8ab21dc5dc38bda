//! One partition key's pace, and what the paced keys say together: the
//! rate they settled at, which a key the pacer meets next starts from.

use std::collections::HashMap;
use std::time::Duration;

use sql2ddb_core::AttrValue;
use tokio::time::Instant;

use super::window::Window;
use super::{
    Sent, KEY_CUT, KEY_FLOOR, KEY_GROWTH, KEY_START_RATE, MAX_KEYS, MAX_KEY_RATE, MIN_KEY_RATE,
    SETTLED_AFTER, TICK,
};

/// The paced keys, by partition key value.
pub(super) type Keys = HashMap<AttrValue, KeyPace, foldhash::fast::RandomState>;

/// What an item's partition key says when the item asks to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTurn {
    /// Its key is not paced: it may go at any time.
    Unpaced,
    /// Its key's turn had come, and the item took it.
    Taken,
    /// Its key's turn comes then (another item of the key may take it
    /// first).
    Later(Instant),
}

impl KeyTurn {
    /// When to ask again: `None` if the item may go now.
    pub fn later(self) -> Option<Instant> {
        match self {
            KeyTurn::Later(at) => Some(at),
            KeyTurn::Unpaced | KeyTurn::Taken => None,
        }
    }
}

/// One partition key's rate, and when its next item may go.
#[derive(Debug)]
pub(super) struct KeyPace {
    /// Seconds per write unit.
    pub interval: f64,
    /// When its next item may go.
    pub next_at: Instant,
    /// When it was last cut: items sent before do not cut it again.
    pub cut_at: Instant,
    /// When it last grew (or was cut), and whether an item waited since.
    grown_at: Instant,
    pub waited: bool,
    /// Ticks in a row it grew.
    clean: u32,
    /// Its units admitted over the last second, and since when it is paced.
    pub admitted: Window,
    since: Instant,
    pub last_seen: Instant,
}

impl KeyPace {
    /// A key paced from `now` at `rate` write units a second.
    pub fn new(now: Instant, rate: f64) -> KeyPace {
        KeyPace {
            interval: 1.0 / rate,
            next_at: now,
            // The calls in flight when it was first refused may cut it at once.
            cut_at: now.checked_sub(TICK).unwrap_or(now),
            grown_at: now,
            waited: false,
            clean: 0,
            admitted: Window::default(),
            since: now,
            last_seen: now,
        }
    }

    /// Refused: its rate goes down to what the table admitted of it over
    /// the last second (its share of its partition), to [`KEY_CUT`] of it
    /// at most and [`KEY_FLOOR`] of it at least.
    pub fn cut(&mut self, now: Instant, tick: u64) {
        let rate = 1.0 / self.interval;
        let paced_for = (now - self.since).clamp(TICK, Duration::from_secs(1));
        let measured = self.admitted.sum(tick) as f64 / paced_for.as_secs_f64();
        let cut = measured
            .clamp(rate * KEY_FLOOR, rate * KEY_CUT)
            .max(MIN_KEY_RATE);
        self.interval = 1.0 / cut;
        self.cut_at = now;
        self.grown_at = now;
        self.waited = false;
        self.clean = 0;
        self.next_at = self.next_at.max(now);
    }

    /// Grows by [`KEY_GROWTH`] for a tick in which its items waited and
    /// none was refused.
    pub fn grow(&mut self, now: Instant) {
        if now < self.grown_at + TICK {
            return;
        }
        match self.waited {
            true => {
                // Each clean tick in a row grows it faster: a key left
                // alone on its partition gets there in a few ticks.
                self.clean = (self.clean + 1).min(4);
                let by = KEY_GROWTH.powi(self.clean as i32);
                self.interval = (self.interval / by).max(1.0 / MAX_KEY_RATE);
            }
            false => self.clean = 0,
        }
        self.grown_at = now;
        self.waited = false;
    }

    /// Whether it has been paced for [`SETTLED_AFTER`] and had items within
    /// the last [`SETTLED_AFTER`]: its rate is its share of its partition.
    fn settled(&self, now: Instant) -> bool {
        now - self.since >= SETTLED_AFTER && now - self.last_seen < SETTLED_AFTER
    }
}

/// The median rate of the settled keys, write units per second, worked
/// out at most once a [`TICK`] (a new key asks for it at its first item).
#[derive(Debug)]
pub(super) struct SettledRate {
    /// When it was last worked out, and what it came to (`None`: no key
    /// settled).
    at: Option<Instant>,
    rate: Option<f64>,
}

impl SettledRate {
    /// Not worked out yet.
    pub fn new() -> SettledRate {
        SettledRate {
            at: None,
            rate: None,
        }
    }

    /// The median rate of `keys` settled at `now`, if any.
    pub fn of(&mut self, keys: &Keys, now: Instant) -> Option<f64> {
        if self.at.is_some_and(|at| now < at + TICK) {
            return self.rate;
        }
        let mut rates: Vec<f64> = keys
            .values()
            .filter(|p| p.settled(now))
            .map(|p| 1.0 / p.interval)
            .collect();
        self.at = Some(now);
        self.rate = match rates.is_empty() {
            true => None,
            false => {
                let mid = rates.len() / 2;
                Some(*rates.select_nth_unstable_by(mid, |a, b| a.total_cmp(b)).1)
            }
        };
        self.rate
    }
}

/// Forgets the half of the paced keys seen longest ago.
pub(super) fn forget_idle(keys: &mut Keys) {
    let mut seen: Vec<Instant> = keys.values().map(|p| p.last_seen).collect();
    seen.sort_unstable();
    let cut = seen[seen.len() / 2];
    keys.retain(|_, p| p.last_seen > cut);
}

/// An answer as the keys it refused learn from it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answer {
    /// When its call was sent, and when it came back.
    pub sent: Instant,
    pub now: Instant,
    /// The tick of `now` in the pacer's windows.
    pub tick: u64,
    /// Whether it was refused whole (an error answer).
    pub whole: bool,
    /// Whether partial answers show the table at a limit.
    pub at_limit: bool,
}

/// Learns from the items of `refused` whose key has more items in their
/// batch: a paced key is cut (at most once a tick, by calls sent since its
/// last cut; a call refused whole only while the table is at a limit or
/// when all its items were of that one key: its partition had room for
/// none of them, as a paced key's calls of an item or two find it), a
/// key not paced yet is paced from now, at the rate the paced keys settled
/// at or [`KEY_START_RATE`]. Returns the keys refused, each once.
pub(super) fn refused<'a>(
    keys: &mut Keys,
    settled: &mut SettledRate,
    refused: &[Sent<'a>],
    answer: Answer,
) -> Vec<&'a AttrValue> {
    let Answer {
        sent,
        now,
        tick,
        whole,
        at_limit,
    } = answer;
    // A call of one key refused whole is that key's partition's news.
    let one_key = refused.iter().all(|r| r.key == refused[0].key);
    let mut seen: Vec<&AttrValue> = Vec::new();
    for r in refused.iter().filter(|r| !r.alone) {
        if seen.contains(&r.key) {
            continue;
        }
        seen.push(r.key);
        match keys.get_mut(r.key) {
            Some(pace) => {
                // Refused whole, a call of several keys says no more of
                // one key's share than of the table's.
                if (!whole || at_limit || one_key)
                    && sent >= pace.cut_at
                    && now >= pace.cut_at + TICK
                {
                    pace.cut(now, tick);
                }
                pace.last_seen = now;
            }
            None => {
                if keys.len() >= MAX_KEYS {
                    forget_idle(keys);
                }
                // The table's partitions are alike: where keys settled at
                // their share, one more starts there.
                let start = settled.of(keys, now).unwrap_or(KEY_START_RATE);
                keys.insert(r.key.clone(), KeyPace::new(now, start));
            }
        }
    }
    seen
}
