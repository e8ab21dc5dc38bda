//! How many `BatchWriteItem` calls may be in flight: a fixed number, or a
//! number that adapts to the table (AIMD, as TCP and Vector's adaptive
//! request concurrency do).
//!
//! Adaptive: after `limit` clean calls in a row that kept the limit busy, the
//! limit grows by one; when the table throttles (a call refused whole) it
//! halves. Calls that were already in flight when the limit halved saw the
//! old load, so their throttles do not halve it again: a burst of throttled
//! calls halves the limit once per round trip, not once per call. The limit
//! stays within `[1, max]` and starts at `max`, so a clean table is written
//! as fast as with a fixed concurrency.
//!
//! A partial answer (some items written, the others returned unprocessed)
//! is told apart from a throttle: the table had room, one of its partitions
//! did not. DynamoDB holds each partition to its own rate whatever the
//! table's, so fewer calls for the whole table would not make that
//! partition faster, only every other one slower. A partial answer neither
//! halves the limit nor counts as clean: the limit holds while partitions
//! refuse, instead of halving and growing back in turn.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

/// Bounds the calls in flight and moves the bound with the calls' outcomes.
#[derive(Debug)]
pub struct AdaptiveConcurrency {
    max: usize,
    adaptive: bool,
    state: Mutex<State>,
    released: Notify,
}

#[derive(Debug)]
struct State {
    limit: usize,
    in_flight: usize,
    /// Clean calls since the limit last changed.
    clean: usize,
    /// Whether calls filled the limit since it last changed: growing a limit
    /// nobody uses would only make the next decrease slower.
    saturated: bool,
    /// Bumped at every decrease; permits from an older epoch cannot decrease again.
    epoch: u64,
    min_reached: usize,
    max_reached: usize,
    increases: u64,
    decreases: u64,
    /// Calls reported throttled or partial, whether or not they moved the limit.
    throttled: u64,
    /// Calls reported partial.
    partial: u64,
}

/// The controller's figures, for the run report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrencySnapshot {
    /// Whether the limit adapts (`false`: fixed).
    pub adaptive: bool,
    /// The configured upper bound (the fixed value when not adaptive).
    pub max: usize,
    /// The limit now.
    pub current: usize,
    /// Calls in flight now.
    pub in_flight: usize,
    /// The lowest limit so far.
    pub min_reached: usize,
    /// The highest limit so far.
    pub max_reached: usize,
    /// Times the limit grew.
    pub increases: u64,
    /// Times the limit halved.
    pub decreases: u64,
    /// Calls reported throttled (or with unprocessed items) so far.
    pub throttled: u64,
    /// Of those, calls answered in part (some items written, others
    /// unprocessed): they did not move the limit.
    pub partial: u64,
}

impl AdaptiveConcurrency {
    /// An adaptive limit within `[1, max]`, starting at `max` (`0` counts as 1).
    pub fn new(max: usize) -> AdaptiveConcurrency {
        AdaptiveConcurrency::build(max, true)
    }

    /// A limit that never moves (`0` counts as 1).
    pub fn fixed(n: usize) -> AdaptiveConcurrency {
        AdaptiveConcurrency::build(n, false)
    }

    fn build(max: usize, adaptive: bool) -> AdaptiveConcurrency {
        let max = max.max(1);
        AdaptiveConcurrency {
            max,
            adaptive,
            state: Mutex::new(State {
                limit: max,
                in_flight: 0,
                clean: 0,
                saturated: false,
                epoch: 0,
                min_reached: max,
                max_reached: max,
                increases: 0,
                decreases: 0,
                throttled: 0,
                partial: 0,
            }),
            released: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is plain counters, consistent after every statement.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a call may start. Report the call's outcome on the permit.
    pub async fn acquire(&self) -> Permit<'_> {
        loop {
            // Register for wake-ups before looking, so a release between the
            // look and the wait is not missed.
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            {
                let mut s = self.state();
                if s.in_flight < s.limit {
                    s.in_flight += 1;
                    if s.in_flight == s.limit {
                        s.saturated = true;
                    }
                    return Permit {
                        controller: self,
                        epoch: s.epoch,
                        outcome: Outcome::Neutral,
                    };
                }
            }
            released.await;
        }
    }

    /// The upper bound (the fixed value when not adaptive).
    pub fn max(&self) -> usize {
        self.max
    }

    /// The figures so far.
    pub fn snapshot(&self) -> ConcurrencySnapshot {
        let s = self.state();
        ConcurrencySnapshot {
            adaptive: self.adaptive,
            max: self.max,
            current: s.limit,
            in_flight: s.in_flight,
            min_reached: s.min_reached,
            max_reached: s.max_reached,
            increases: s.increases,
            decreases: s.decreases,
            throttled: s.throttled,
            partial: s.partial,
        }
    }

    /// Another worker of the fleet was throttled: the limit halves as for
    /// a call of this process refused whole (a throttle is the table's,
    /// whoever met it), once per signal.
    pub fn back_off(&self) {
        if self.adaptive {
            halve(&mut self.state());
        }
    }

    fn release(&self, epoch: u64, outcome: Outcome) {
        let mut s = self.state();
        s.in_flight -= 1;
        let limit_before = s.limit;
        match outcome {
            Outcome::Throttled => s.throttled += 1,
            Outcome::Partial => {
                s.throttled += 1;
                s.partial += 1;
            }
            Outcome::Success | Outcome::Neutral => {}
        }
        if self.adaptive {
            match outcome {
                Outcome::Success => {
                    s.clean += 1;
                    if s.clean >= s.limit && s.saturated && s.limit < self.max {
                        s.limit += 1;
                        s.increases += 1;
                        s.max_reached = s.max_reached.max(s.limit);
                        s.clean = 0;
                        s.saturated = false;
                    }
                }
                Outcome::Throttled if epoch == s.epoch => halve(&mut s),
                // A clean run is clean calls in a row: growing while
                // partitions refuse would only bring the next throttle sooner.
                Outcome::Partial => s.clean = 0,
                Outcome::Throttled | Outcome::Neutral => {}
            }
        }
        // One waiter per slot this release frees (two when the limit grew
        // with it; none while a halved limit is still over-full): waking
        // every waiter would make each of them take the lock and wait again
        // for one slot, which on a busy writer (eight batches of twenty
        // calls waiting on eight slots) cost more than the calls' own
        // bookkeeping. A waiter woken but gone (its call cancelled) hands
        // the wake-up to the next one (`Notify::notify_one`), and the
        // waiters are woken in the order they came.
        let grew = s.limit > limit_before;
        let free = s.limit.saturating_sub(s.in_flight);
        let wake = free.min(1 + usize::from(grew));
        drop(s);
        for _ in 0..wake {
            self.released.notify_one();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Success,
    Throttled,
    Partial,
    Neutral,
}

/// Halves the limit (not below 1) and starts a new epoch: the calls in
/// flight when it halved do not halve it again.
fn halve(s: &mut State) {
    let halved = (s.limit / 2).max(1);
    if halved < s.limit {
        s.limit = halved;
        s.decreases += 1;
        s.min_reached = s.min_reached.min(halved);
    }
    s.epoch += 1;
    s.clean = 0;
    s.saturated = false;
}

/// The right to make one call. Dropping it without reporting (a call that
/// failed for another reason than throttling, or was cancelled) frees the
/// slot without moving the limit.
#[derive(Debug)]
pub struct Permit<'a> {
    controller: &'a AdaptiveConcurrency,
    epoch: u64,
    outcome: Outcome,
}

impl Permit<'_> {
    /// The call succeeded with nothing left unprocessed.
    pub fn success(mut self) {
        self.outcome = Outcome::Success;
    }

    /// The table throttled the call: refused as a whole.
    pub fn throttled(mut self) {
        self.outcome = Outcome::Throttled;
    }

    /// The call was answered in part: some of its items were written, the
    /// others returned unprocessed (a partition at its limit, not the
    /// table). Counted, without moving the limit.
    pub fn partial(mut self) {
        self.outcome = Outcome::Partial;
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.controller.release(self.epoch, self.outcome);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// Runs `n` calls at once and reports each with `throttled`.
    async fn round(c: &AdaptiveConcurrency, n: usize, throttled: bool) {
        let permits: Vec<Permit<'_>> = {
            let mut v = Vec::new();
            for _ in 0..n {
                v.push(c.acquire().await);
            }
            v
        };
        for p in permits {
            if throttled {
                p.throttled()
            } else {
                p.success()
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_throttles_halves_once_then_clean_rounds_add_one_each() {
        let c = AdaptiveConcurrency::new(8);
        assert_eq!(c.snapshot().current, 8);
        // Eight calls in flight, all throttled: one halving, not eight.
        round(&c, 8, true).await;
        assert_eq!(c.snapshot().current, 4);
        assert_eq!(c.snapshot().decreases, 1);
        // The next window is throttled too: halves again.
        round(&c, 4, true).await;
        round(&c, 2, true).await;
        round(&c, 1, true).await;
        let s = c.snapshot();
        assert_eq!((s.current, s.min_reached, s.decreases), (1, 1, 3));
        // At the floor a throttle changes nothing.
        round(&c, 1, true).await;
        assert_eq!(c.snapshot().decreases, 3);
        // Every throttled call counts, though a window halves only once.
        assert_eq!(c.snapshot().throttled, 8 + 4 + 2 + 1 + 1);
        // Clean rounds that fill the limit: +1 per `limit` successes.
        for expected in [2, 3, 4, 5, 6, 7, 8, 8] {
            let limit = c.snapshot().current;
            round(&c, limit, false).await;
            assert_eq!(c.snapshot().current, expected);
        }
        let s = c.snapshot();
        assert_eq!((s.increases, s.max_reached, s.min_reached), (7, 8, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn partial_answers_hold_the_limit_and_a_whole_refusal_halves_it() {
        let c = AdaptiveConcurrency::new(8);
        // Round after round of partial answers (one hot partition): the
        // limit neither falls nor grows, and every call is counted.
        for _ in 0..20 {
            let permits: Vec<Permit<'_>> = {
                let mut v = Vec::new();
                for _ in 0..8 {
                    v.push(c.acquire().await);
                }
                v
            };
            permits.into_iter().for_each(Permit::partial);
        }
        let s = c.snapshot();
        assert_eq!((s.current, s.decreases, s.increases), (8, 0, 0));
        assert_eq!((s.throttled, s.partial), (160, 160));
        // The table refuses whole calls: that halves it.
        round(&c, 8, true).await;
        assert_eq!(c.snapshot().current, 4);
        // Clean calls grow it only when `limit` of them come in a row: a
        // partial answer in between starts the count again.
        for _ in 0..10 {
            let (a, b, d) = (c.acquire().await, c.acquire().await, c.acquire().await);
            let e = c.acquire().await;
            a.success();
            b.success();
            d.success();
            e.partial();
        }
        assert_eq!(c.snapshot().current, 4);
        round(&c, 4, false).await;
        assert_eq!(c.snapshot().current, 5);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unused_limit_does_not_grow() {
        let c = AdaptiveConcurrency::new(8);
        round(&c, 8, true).await;
        assert_eq!(c.snapshot().current, 4);
        // One call at a time never fills a limit of 4.
        for _ in 0..50 {
            round(&c, 1, false).await;
        }
        assert_eq!(c.snapshot().current, 4);
        assert_eq!(c.snapshot().increases, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn neutral_outcomes_and_fixed_limits_do_not_move() {
        let c = AdaptiveConcurrency::new(4);
        round(&c, 4, true).await;
        for _ in 0..10 {
            let p = c.acquire().await;
            let q = c.acquire().await;
            drop((p, q));
        }
        assert_eq!(c.snapshot().current, 2);
        let f = AdaptiveConcurrency::fixed(3);
        round(&f, 3, true).await;
        round(&f, 3, false).await;
        let s = f.snapshot();
        assert_eq!(
            (s.adaptive, s.current, s.decreases, s.increases),
            (false, 3, 0, 0)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn acquire_waits_for_a_free_slot() {
        let c = Arc::new(AdaptiveConcurrency::fixed(2));
        let a = c.acquire().await;
        let _b = c.acquire().await;
        assert_eq!(c.snapshot().in_flight, 2);
        let waiting = {
            let c = c.clone();
            tokio::spawn(async move {
                let _p = c.acquire().await;
                tokio::time::Instant::now()
            })
        };
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(
            !waiting.is_finished(),
            "a third call started with a limit of 2"
        );
        let freed_at = tokio::time::Instant::now();
        a.success();
        assert_eq!(waiting.await.unwrap(), freed_at);
        assert_eq!(c.snapshot().in_flight, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_cancelled_after_its_wake_up_passes_it_on() {
        let c = Arc::new(AdaptiveConcurrency::fixed(1));
        let held = c.acquire().await;
        let spawn_waiter = |c: Arc<AdaptiveConcurrency>| {
            tokio::spawn(async move {
                let _p = c.acquire().await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            })
        };
        let first = spawn_waiter(c.clone());
        tokio::time::sleep(Duration::from_millis(10)).await;
        let second = spawn_waiter(c.clone());
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The slot is freed and the first waiter, the one woken, is gone
        // before it could take it: the second must not wait for ever.
        held.success();
        first.abort();
        tokio::time::timeout(Duration::from_secs(60), second)
            .await
            .expect("the second waiter got the slot")
            .unwrap();
        assert_eq!(c.snapshot().in_flight, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_waiters_all_get_through_and_never_exceed_the_limit() {
        let c = Arc::new(AdaptiveConcurrency::new(8));
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..64 {
            let (c, peak) = (c.clone(), peak.clone());
            tasks.spawn(async move {
                for j in 0..20 {
                    let p = c.acquire().await;
                    let now = c.snapshot().in_flight;
                    peak.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    // One call in 97 is throttled: the limit halves now
                    // and then and clean rounds grow it again, each growth
                    // freeing two slots at one release.
                    if (i * 20 + j) % 97 == 0 {
                        p.throttled()
                    } else {
                        p.success()
                    }
                }
            });
        }
        let all = async {
            while let Some(done) = tasks.join_next().await {
                done.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(60), all)
            .await
            .expect("every waiter got a slot");
        let s = c.snapshot();
        assert_eq!(s.in_flight, 0);
        assert!(s.decreases > 0, "the test throttles now and then");
        assert!(s.increases > 0, "the limit grew back after a halving");
        assert!(peak.load(std::sync::atomic::Ordering::Relaxed) <= 8);
    }

    #[tokio::test(start_paused = true)]
    async fn a_halved_limit_holds_back_new_calls_until_in_flight_ones_finish() {
        let c = Arc::new(AdaptiveConcurrency::new(4));
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(c.acquire().await);
        }
        held.pop().unwrap().throttled();
        assert_eq!(c.snapshot().current, 2);
        // Three still in flight, limit 2: a new call waits for two to finish.
        let waiting = {
            let c = c.clone();
            tokio::spawn(async move { drop(c.acquire().await) })
        };
        held.pop().unwrap().success();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished());
        held.pop().unwrap().success();
        waiting.await.unwrap();
    }

    #[tokio::test]
    async fn another_workers_throttle_halves_an_adaptive_limit_and_leaves_a_fixed_one() {
        let c = AdaptiveConcurrency::new(16);
        c.back_off();
        c.back_off();
        let s = c.snapshot();
        assert_eq!((s.current, s.decreases, s.throttled), (4, 2, 0));
        // A call in flight before the fleet's signal does not halve it again.
        let permit = c.acquire().await;
        c.back_off();
        permit.throttled();
        assert_eq!(c.snapshot().current, 2);
        let fixed = AdaptiveConcurrency::fixed(8);
        fixed.back_off();
        assert_eq!(fixed.snapshot().current, 8);
    }
}
