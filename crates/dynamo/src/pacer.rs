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
//! - **The table's rate.** Before the first refusal nothing is paced. A
//!   refusal of an item whose partition key was not being paced (the table,
//!   or a partition nobody knew was full) sets the rate to the write units
//!   the table admitted over the last second, its measured capacity; calls
//!   already in flight when it was set do not set it again. While calls
//!   wait for the rate and nothing is refused, it grows by
//!   [`GROWTH`] every [`TICK`], to find capacity the table gained.
//! - **A partition key's rate.** A key whose items were refused is paced on
//!   its own from then on: its items wait their turn (at first
//!   [`KEY_START_RATE`], DynamoDB's limit for one partition) while other
//!   keys' items go; each further refusal slows it by [`KEY_CUT`] (once per
//!   round trip) and each call that writes its items speeds it up by
//!   [`KEY_GROWTH`]. A hot partition thus waits without holding back the
//!   rest. At most [`MAX_KEYS`] keys are remembered; the idle ones are
//!   forgotten first.
//!
//! Times are tokio's, so tests drive the pacer with a paused clock.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use sql2ddb_core::AttrValue;
use tokio::time::Instant;

/// How often the table's rate may grow, and the slots of its window.
pub const TICK: Duration = Duration::from_millis(100);
/// How much the table's rate grows per [`TICK`] while calls wait for it and
/// nothing is refused.
pub const GROWTH: f64 = 1.03;
/// What a refusal sets the table's rate to, of what it admitted over the
/// last second: a little below it, so the partitions' buckets fill again
/// and the items the rate sends are not refused at once.
pub const HEADROOM: f64 = 0.95;
/// The lowest table rate, write units per second.
pub const MIN_RATE: f64 = 25.0;
/// A key's rate when it is first refused: DynamoDB's limit for one
/// partition, write units per second.
pub const KEY_START_RATE: f64 = 1_000.0;
/// What a refusal leaves of a key's rate.
pub const KEY_CUT: f64 = 0.7;
/// How much a key's rate grows per [`TICK`] while its items wait and none
/// is refused.
pub const KEY_GROWTH: f64 = 1.2;
/// The highest key rate, write units per second.
pub const MAX_KEY_RATE: f64 = 4_000.0;
/// The lowest key rate, write units per second.
pub const MIN_KEY_RATE: f64 = 1.0;
/// The most partition keys paced at once.
pub const MAX_KEYS: usize = 4_096;
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
    keys: HashMap<AttrValue, KeyPace, foldhash::fast::RandomState>,
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
    /// Units admitted per tick over the last [`SLOTS`] ticks.
    admitted: [u64; SLOTS],
    /// The tick of `admitted`'s newest slot.
    tick: u64,
}

#[derive(Debug)]
struct KeyPace {
    /// Seconds per write unit.
    interval: f64,
    /// When its next item may go.
    next_at: Instant,
    /// When it was last cut: items sent before do not cut it again.
    cut_at: Instant,
    /// When it last grew (or was cut), and whether an item waited since.
    grown_at: Instant,
    waited: bool,
    last_seen: Instant,
}

impl KeyPace {
    fn new(now: Instant) -> KeyPace {
        KeyPace {
            interval: 1.0 / KEY_START_RATE,
            next_at: now,
            cut_at: now,
            grown_at: now,
            waited: false,
            last_seen: now,
        }
    }

    /// Grows by [`KEY_GROWTH`] for a tick in which its items waited and
    /// none was refused.
    fn grow(&mut self, now: Instant) {
        if now < self.grown_at + TICK {
            return;
        }
        if self.waited {
            self.interval = (self.interval / KEY_GROWTH).max(1.0 / MAX_KEY_RATE);
        }
        self.grown_at = now;
        self.waited = false;
    }
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

/// One item of an answered call: its partition key value and write units.
pub type Sent<'a> = (&'a AttrValue, u64);

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
                    grown_at: now,
                    waited: false,
                    admitted: [0; SLOTS],
                    tick: 0,
                },
                keys: HashMap::default(),
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
        let start = now.max(t.at);
        let tokens = (t.tokens + (start - t.at).as_secs_f64() * rate).min(burst);
        let needed = (units as f64).min(burst);
        let wait = Duration::from_secs_f64(((needed - tokens) / rate).max(0.0));
        let at = start + wait;
        t.tokens = tokens + wait.as_secs_f64() * rate - units as f64;
        t.at = at;
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
        let mut s = self.state();
        let pace = s.keys.get_mut(key)?;
        pace.last_seen = now;
        pace.grow(now);
        if pace.next_at > now {
            pace.waited = true;
            let at = pace.next_at;
            s.stats.held += 1;
            return Some(at);
        }
        pace.next_at = now + Duration::from_secs_f64(pace.interval * units as f64);
        None
    }

    /// Learns from a call sent at `sent`: the items it wrote, the items it
    /// returned unprocessed, and whether it was throttled whole (an error
    /// answer, every item refused).
    pub fn answered(&self, sent: Instant, written: &[Sent<'_>], refused: &[Sent<'_>], whole: bool) {
        let now = Instant::now();
        let mut s = self.state();
        let State {
            origin,
            table,
            keys,
            stats,
        } = &mut *s;
        let tick = ((now - *origin).as_nanos() / TICK.as_nanos()) as u64;
        table.roll(tick);
        table.admitted[(tick % SLOTS as u64) as usize] += written.iter().map(|(_, u)| u).sum::<u64>();
        let mut seen: Vec<&AttrValue> = Vec::new();
        let mut unknown = whole && refused.is_empty();
        seen.clear();
        for (key, _) in refused {
            if seen.contains(key) {
                continue;
            }
            seen.push(key);
            match keys.get_mut(*key) {
                Some(pace) => {
                    if sent >= pace.cut_at && now >= pace.cut_at + TICK {
                        pace.interval = (pace.interval / KEY_CUT).min(1.0 / MIN_KEY_RATE);
                        pace.cut_at = now;
                        pace.grown_at = now;
                        pace.waited = false;
                        pace.next_at = pace.next_at.max(now);
                    }
                    pace.last_seen = now;
                }
                None => {
                    unknown = true;
                    if keys.len() >= MAX_KEYS {
                        forget_idle(keys);
                    }
                    keys.insert((*key).clone(), KeyPace::new(now));
                }
            }
        }
        stats.keys = keys.len();
        if (unknown || whole) && table.cut_at.is_none_or(|at| sent >= at) {
            let measured = table.admitted.iter().sum::<u64>() as f64;
            table.rate = Some((measured * HEADROOM).max(MIN_RATE));
            table.cut_at = Some(now);
            table.grown_at = now;
            table.waited = false;
            stats.cuts += 1;
        }
        stats.rate = table.rate;
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
    /// The rate at `now`: grown by [`GROWTH`] for each tick since it last
    /// grew in which callers waited for it and nothing was refused.
    fn grow(&mut self, rate: f64, now: Instant) -> f64 {
        if now < self.grown_at + TICK {
            return rate;
        }
        let rate = match self.waited {
            true => rate * GROWTH,
            false => rate,
        };
        self.rate = Some(rate);
        self.grown_at = now;
        self.waited = false;
        rate
    }

    /// Moves the window to `tick`, emptying the slots of the ticks passed.
    fn roll(&mut self, tick: u64) {
        if tick <= self.tick {
            return;
        }
        for t in (self.tick + 1)..=tick.min(self.tick + SLOTS as u64) {
            self.admitted[(t % SLOTS as u64) as usize] = 0;
        }
        self.tick = tick;
    }
}

/// Forgets the half of the paced keys seen longest ago.
fn forget_idle(keys: &mut HashMap<AttrValue, KeyPace, foldhash::fast::RandomState>) {
    let mut seen: Vec<Instant> = keys.values().map(|p| p.last_seen).collect();
    seen.sort_unstable();
    let cut = seen[seen.len() / 2];
    keys.retain(|_, p| p.last_seen > cut);
}

#[cfg(test)]
mod tests;
