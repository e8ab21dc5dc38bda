//! A worker's place in the fleets of the runs it writes: every worker of a
//! run beats into the run's progress table ([`ProgressStore::fleet_beat`])
//! and reads the others' beats, so that
//! - the fleet shares one write-capacity cap (`--max-wcu`, the mapping's
//!   `max_wcu`): each worker's limiter runs at the cap divided by the
//!   workers alive, and takes a gone worker's share at the next beat;
//! - the fleet backs off together: a worker the table refused whole (a
//!   throttled call, not a partition's partial answer) says when in its
//!   beat, and every other worker halves its calls in flight as if refused
//!   itself.
//!
//! Nothing new to run: the table the fleet records its batches in carries
//! the beats. A beat that fails is logged and skipped: the worker keeps its
//! last share, and its writes stay within the cap it was given alone.
//!
//! A `sql2ddb worker` process beats in the background ([`Beating`]); a
//! Lambda function, frozen between invocations, beats in-line as it writes
//! ([`InlineBeating`]). Both beat through [`Fleet::beat`], so the fleet of
//! a run may mix them.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sql2ddb_dynamo::progress::{FleetBeat, ProgressStore};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::ids::RunId;
use crate::sink::WriteLimits;

/// How often a worker beats.
pub const BEAT: Duration = Duration::from_secs(1);

/// The longest a worker waits for its beat into a run newly seen before it
/// writes the run's first batch.
pub(crate) const JOIN_WAIT: Duration = Duration::from_secs(5);

/// A member whose last beat is older than this is gone (a worker killed
/// before it could leave): its share goes to the others.
pub const GONE_AFTER: Duration = Duration::from_secs(5);

/// A worker's membership: its name, its limits, and what it saw last.
pub(crate) struct Fleet {
    store: ProgressStore,
    member: String,
    limits: WriteLimits,
    seen: Mutex<Seen>,
}

/// What the beats so far told a member.
#[derive(Default)]
struct Seen {
    /// Whole-call throttles of its own, counted at its last beat.
    own_throttles: u64,
    /// When this member was last throttled (its beats carry it).
    throttled_ms: u64,
    /// The latest throttle of another member it backed off for.
    others_throttled_ms: u64,
    /// Whether it has read the others' beats once: every newer throttle
    /// is news from then on (a member beating in-line reads them seconds
    /// apart, not every second).
    read_once: bool,
    /// Each run's members alive at the last beat into it.
    alive: HashMap<RunId, BTreeSet<String>>,
    /// The most members alive at once.
    most: usize,
}

/// What a run's beats say to `me` at `now_ms`: the members alive (`me`
/// always among them), and the latest time another member was throttled.
pub(crate) fn read_beats(beats: &[FleetBeat], me: &str, now_ms: u64) -> (BTreeSet<String>, u64) {
    let gone_before = now_ms.saturating_sub(GONE_AFTER.as_millis() as u64);
    let mut alive: BTreeSet<String> = beats
        .iter()
        .filter(|b| b.at_ms >= gone_before)
        .map(|b| b.member.clone())
        .collect();
    alive.insert(me.to_string());
    let others = beats
        .iter()
        .filter(|b| b.member != me)
        .map(|b| b.throttled_ms)
        .max()
        .unwrap_or(0);
    (alive, others)
}

/// The share of `cap` of one of `members` workers.
pub(crate) fn share(cap: u64, members: usize) -> f64 {
    cap as f64 / members.max(1) as f64
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Fleet {
    /// A new member (named after its process and a random suffix) writing
    /// with `limits`, beating into `store`.
    pub fn new(store: ProgressStore, limits: WriteLimits) -> Fleet {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Fleet {
            store,
            member: format!("{}-{}", std::process::id(), &suffix[..8]),
            limits,
            seen: Mutex::default(),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether beating can change anything: a cap to share, or calls in
    /// flight that adapt.
    fn changes_anything(&self) -> bool {
        self.limits.cap.is_some() || self.limits.controller.snapshot().adaptive
    }

    /// This member's name (its `FLEET#` record's).
    pub fn member(&self) -> &str {
        &self.member
    }

    /// One beat into each of `runs`: says this member is alive (and when
    /// it was last throttled), then sets its share of the cap by the
    /// members alive across them, and backs off once for each newer
    /// throttle of another member.
    pub async fn beat(&self, runs: &BTreeSet<RunId>) {
        let now = now_ms();
        let beat = {
            let mut seen = self.seen();
            let snapshot = self.limits.controller.snapshot();
            let whole = snapshot.throttled.saturating_sub(snapshot.partial);
            if whole > seen.own_throttles {
                seen.own_throttles = whole;
                seen.throttled_ms = now;
            }
            FleetBeat {
                member: self.member.clone(),
                at_ms: now,
                throttled_ms: seen.throttled_ms,
            }
        };
        for run in runs {
            match self.store.fleet_beat(run, &beat).await {
                Ok(beats) => {
                    let (alive, others) = read_beats(&beats, &self.member, now);
                    let mut seen = self.seen();
                    seen.alive.insert(run.clone(), alive);
                    if others > seen.others_throttled_ms {
                        // The first beat learns the past; only news counts.
                        if seen.read_once || others + BEAT.as_millis() as u64 >= now {
                            self.limits.controller.back_off();
                            tracing::debug!(run = %run, "another worker was throttled: backing off");
                        }
                        seen.others_throttled_ms = others;
                    }
                    seen.read_once = true;
                }
                Err(e) => {
                    tracing::warn!(run = %run, error = %e, "fleet beat failed; keeping the last share")
                }
            }
        }
        let members = self.count_members();
        self.apply_share(members);
    }

    /// [`Fleet::beat`] before a batch of `run` is written, waited for at
    /// most [`JOIN_WAIT`]: a progress table slow to answer does not hold
    /// the writes back, they keep the last share.
    async fn beat_before_writing(&self, runs: &BTreeSet<RunId>, run: &RunId) {
        if tokio::time::timeout(JOIN_WAIT, self.beat(runs))
            .await
            .is_err()
        {
            tracing::warn!(run = %run, "the fleet's beat is slow; writing with the last share");
        }
    }

    /// Stops counting the members of `runs` (runs it no longer beats into:
    /// the others count it gone there too).
    fn forget(&self, runs: &[RunId]) {
        let mut seen = self.seen();
        for run in runs {
            seen.alive.remove(run);
        }
    }

    /// The members alive in the runs beaten into, at the last beats (and
    /// the most so far, counted).
    fn count_members(&self) -> usize {
        let mut seen = self.seen();
        let all: BTreeSet<&String> = seen.alive.values().flatten().collect();
        let members = all.len().max(1);
        seen.most = seen.most.max(members);
        members
    }

    /// The most members alive at once, so far.
    pub fn most(&self) -> usize {
        self.seen().most.max(1)
    }

    /// Sets the limiter to this member's share of the cap, one of
    /// `members`.
    fn apply_share(&self, members: usize) {
        let (Some(limiter), Some(cap)) = (&self.limits.limiter, self.limits.cap) else {
            return;
        };
        let rate = share(cap, members);
        if (limiter.rate() - rate).abs() > f64::EPSILON {
            tracing::debug!(rate, members, "write-capacity share");
            limiter.set_rate(rate, tokio::time::Instant::now());
        }
    }

    /// Leaves each of `runs`' fleets, so the others take its share at once.
    pub async fn leave(&self, runs: &BTreeSet<RunId>) {
        for run in runs {
            if let Err(e) = self.store.fleet_leave(run, &self.member).await {
                tracing::warn!(run = %run, error = %e, "could not leave the fleet; the others take its share once its beats stop");
            }
        }
    }
}

/// A member beating in the background, every [`BEAT`], into the runs it
/// writes; once [`Beating::stop`]ped it leaves their fleets.
pub(crate) struct Beating {
    fleet: Arc<Fleet>,
    runs: watch::Sender<BTreeSet<RunId>>,
    task: JoinHandle<()>,
}

impl Beating {
    /// Starts beating into `runs` (at once, when there are some), as long
    /// as beating can change anything: a cap to share, or calls in flight
    /// that adapt. `None` otherwise.
    pub async fn start(fleet: Fleet, runs: BTreeSet<RunId>) -> Option<Beating> {
        if !fleet.changes_anything() {
            return None;
        }
        let fleet = Arc::new(fleet);
        if !runs.is_empty() {
            fleet.beat(&runs).await;
        }
        let (tx, mut rx) = watch::channel(runs);
        let beating = fleet.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(BEAT).await;
                let runs = rx.borrow_and_update().clone();
                if !runs.is_empty() {
                    beating.beat(&runs).await;
                }
            }
        });
        Some(Beating {
            fleet,
            runs: tx,
            task,
        })
    }

    /// A batch of `run` came: when the run is new to this member, it beats
    /// into its fleet before writing, so its first writes already keep to
    /// its share.
    pub async fn join(&self, run: &RunId) {
        let mut added = false;
        self.runs.send_if_modified(|runs| {
            added = runs.insert(run.clone());
            added
        });
        if added {
            let runs = self.runs.borrow().clone();
            // Slow, it writes within the share it had, and the ticker beats on.
            self.fleet.beat_before_writing(&runs, run).await;
        }
    }

    /// Stops beating and leaves the fleets; returns the most members it
    /// saw at once.
    pub async fn stop(self) -> usize {
        self.task.abort();
        let runs = self.runs.borrow().clone();
        self.fleet.leave(&runs).await;
        self.fleet.most()
    }
}

/// A member beating in-line, as its batches are written: a Lambda
/// function's execution environment, frozen between invocations, where no
/// task in the background can be relied on. Before a batch of a run it
/// beats into that run when its last beat there is older than [`BEAT`] (a
/// run new to it is joined so), and beats on every [`BEAT`] while the batch
/// is written. Frozen, it stops beating, and the others take its share
/// [`GONE_AFTER`] later; it never leaves otherwise.
pub(crate) struct InlineBeating {
    fleet: Fleet,
    /// When it last beat (or tried to) into each run.
    last: Mutex<HashMap<RunId, Instant>>,
    /// One beat at a time: the batches of an invocation, due at once, wait
    /// for the beat one of them makes.
    turn: tokio::sync::Mutex<()>,
}

impl InlineBeating {
    /// Beats for `fleet` as long as beating can change anything (a cap to
    /// share, or calls in flight that adapt); `None` otherwise.
    pub fn new(fleet: Fleet) -> Option<InlineBeating> {
        fleet.changes_anything().then(|| InlineBeating {
            fleet,
            last: Mutex::default(),
            turn: tokio::sync::Mutex::const_new(()),
        })
    }

    /// The member it beats as.
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    fn last(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Instant>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether its last beat into `run` (if any) is older than [`BEAT`].
    fn due(&self, run: &RunId) -> bool {
        self.last().get(run).is_none_or(|at| at.elapsed() >= BEAT)
    }

    /// Beats into `run` (and reads the others' beats) when due.
    pub async fn beat_if_due(&self, run: &RunId) {
        if !self.due(run) {
            return;
        }
        let _turn = self.turn.lock().await;
        if !self.due(run) {
            // Another batch of the run beat meanwhile.
            return;
        }
        let gone: Vec<RunId> = {
            let mut last = self.last();
            last.insert(run.clone(), Instant::now());
            let gone: Vec<RunId> = last
                .iter()
                .filter(|(_, at)| at.elapsed() >= GONE_AFTER)
                .map(|(r, _)| r.clone())
                .collect();
            last.retain(|r, _| !gone.contains(r));
            gone
        };
        self.fleet.forget(&gone);
        self.fleet
            .beat_before_writing(&BTreeSet::from([run.clone()]), run)
            .await;
    }

    /// Runs `write` (writing a batch of `run`): beats first when due, and
    /// on every [`BEAT`] while it lasts, so a long batch keeps its member
    /// alive.
    pub async fn around<F: Future>(&self, run: &RunId, write: F) -> F::Output {
        self.beat_if_due(run).await;
        let beats = async {
            loop {
                tokio::time::sleep(BEAT).await;
                self.beat_if_due(run).await;
            }
        };
        tokio::select! {
            out = write => out,
            _ = beats => unreachable!("beats until the write is done"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(member: &str, at_ms: u64, throttled_ms: u64) -> FleetBeat {
        FleetBeat {
            member: member.into(),
            at_ms,
            throttled_ms,
        }
    }

    #[test]
    fn members_alive_share_the_cap_and_a_gone_one_leaves_its_share() {
        let now = 100_000;
        let beats = [
            beat("a", now, 0),
            beat("b", now - 1_000, 0),
            beat("c", now - 4_999, 0),
            // Killed six seconds ago.
            beat("d", now - 6_000, 0),
        ];
        let (alive, _) = read_beats(&beats, "a", now);
        assert_eq!(alive.into_iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(share(900, 3), 300.0);
        // Its own beat not read back yet: still one of them.
        let (alive, _) = read_beats(&beats[1..], "a", now);
        assert_eq!(alive.len(), 3);
        assert_eq!(share(900, 0), 900.0);
    }

    #[test]
    fn another_members_throttle_is_read_and_ones_own_is_not() {
        let beats = [beat("a", 10, 9_000), beat("b", 10, 7_000), beat("c", 10, 0)];
        assert_eq!(read_beats(&beats, "a", 10).1, 7_000);
        assert_eq!(read_beats(&beats, "c", 10).1, 9_000);
        assert_eq!(read_beats(&beats[2..], "c", 10).1, 0);
    }
}
