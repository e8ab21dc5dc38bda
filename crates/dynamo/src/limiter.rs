//! A cap on the write units per second this process spends (`--max-wcu`), so
//! a migration into a live table leaves room for production traffic.
//!
//! Units are counted as DynamoDB bills them: each item rounded up to 1 KB, times
//! one plus the number of global secondary indexes it lands in. Every attempt
//! is counted, including ones DynamoDB then throttles, so the cap is an upper
//! bound on what is billed.
//!
//! The cap is per process; the workers of one run share theirs: each sets
//! its limiter to its share of the cap ([`WriteCapacityLimiter::set_rate`])
//! as the fleet's records in the progress table say how many work.
//!
//! A token bucket holding at most [`BURST`] of a second's units: small, so
//! that no few seconds of a run can go much above the cap even right after a
//! pause. Callers are served in the order they asked. A call needing more units
//! than the bucket holds still goes through once the bucket is full, leaving
//! a debt that later calls wait off: a huge item cannot deadlock.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// The bucket's size, as a fraction of one second's units.
pub const BURST: f64 = 0.1;

/// Hands out write units at a fixed rate.
#[derive(Debug)]
pub struct WriteCapacityLimiter {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Units per second, and the most the bucket holds.
    rate: f64,
    burst: f64,
    /// Units available at `at` (negative: a debt). `at` may lie in the
    /// future: it is the moment the last caller in line is served.
    tokens: f64,
    at: Instant,
    granted: u64,
    waited: Duration,
}

/// The limiter's figures, for the run report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacitySnapshot {
    /// The cap, in write units per second.
    pub wcu_per_second: u64,
    /// Units handed out so far.
    pub granted_units: u64,
    /// Total time callers spent waiting for units (summed over concurrent callers).
    pub waited: Duration,
}

impl WriteCapacityLimiter {
    /// A cap of `wcu_per_second` write units per second.
    ///
    /// # Panics
    /// When `wcu_per_second` is 0 (validate user input before).
    pub fn new(wcu_per_second: u64) -> WriteCapacityLimiter {
        assert!(wcu_per_second > 0, "a write capacity cap must be positive");
        let rate = wcu_per_second as f64;
        let burst = (rate * BURST).max(1.0);
        WriteCapacityLimiter {
            bucket: Mutex::new(Bucket {
                rate,
                burst,
                tokens: burst,
                at: Instant::now(),
                granted: 0,
                waited: Duration::ZERO,
            }),
        }
    }

    fn bucket(&self) -> MutexGuard<'_, Bucket> {
        // Plain numbers, consistent after every statement.
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `units` write units may be spent, and spends them. The
    /// units are booked when the call starts: a cancelled wait still spends them.
    pub async fn acquire(&self, units: u64) {
        let served_at = self.reserve(units, Instant::now());
        tokio::time::sleep_until(served_at).await;
    }

    /// Books `units` for the first moment they are available, at or after
    /// `now` and after every earlier caller, and returns that moment.
    fn reserve(&self, units: u64, now: Instant) -> Instant {
        let mut guard = self.bucket();
        let b = &mut *guard;
        let (rate, burst) = (b.rate, b.burst);
        let served_at = book(&mut b.tokens, &mut b.at, (rate, burst), units, now);
        b.granted += units;
        b.waited += served_at - now;
        served_at
    }

    /// Changes the cap to `wcu_per_second` (at least 1) from `now` on: what
    /// the bucket holds is settled at the old rate first, and callers in
    /// line are served at the new one.
    pub fn set_rate(&self, wcu_per_second: f64, now: Instant) {
        let rate = wcu_per_second.max(1.0);
        let mut b = self.bucket();
        if now > b.at {
            let refill = (now - b.at).as_secs_f64() * b.rate;
            b.tokens = (b.tokens + refill).min(b.burst);
            b.at = now;
        }
        b.rate = rate;
        b.burst = (rate * BURST).max(1.0);
        b.tokens = b.tokens.min(b.burst);
    }

    /// The cap now, in write units per second.
    pub fn rate(&self) -> f64 {
        self.bucket().rate
    }

    /// The figures so far.
    pub fn snapshot(&self) -> CapacitySnapshot {
        let b = self.bucket();
        CapacitySnapshot {
            wcu_per_second: b.rate as u64,
            granted_units: b.granted,
            waited: b.waited,
        }
    }
}

/// Books `units` in a token bucket filling at `rate` units a second up to
/// `burst`, holding `tokens` at `at` (negative: owed; `at` may lie ahead):
/// the first moment they are available at or after `now` and after every
/// earlier booking. More than the bucket holds waits for a full bucket and
/// owes the rest.
pub(crate) fn book(
    tokens: &mut f64,
    at: &mut Instant,
    (rate, burst): (f64, f64),
    units: u64,
    now: Instant,
) -> Instant {
    let start = now.max(*at);
    let refill = (start - *at).as_secs_f64() * rate;
    let held = (*tokens + refill).min(burst);
    let needed = (units as f64).min(burst);
    let wait = Duration::from_secs_f64(((needed - held) / rate).max(0.0));
    let served_at = start + wait;
    *tokens = held + wait.as_secs_f64() * rate - units as f64;
    *at = served_at;
    served_at
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// `tasks` callers each asking for `units` per call, `calls` times, in
    /// real (paused) time; returns (instant, units) of every grant.
    async fn grants(
        limiter: Arc<WriteCapacityLimiter>,
        tasks: usize,
        calls: usize,
        units: impl Fn(usize) -> u64 + Send + Sync + Clone + 'static,
    ) -> Vec<(Instant, u64)> {
        let mut set = tokio::task::JoinSet::new();
        for t in 0..tasks {
            let limiter = limiter.clone();
            let units = units.clone();
            set.spawn(async move {
                let mut out = Vec::new();
                for i in 0..calls {
                    let u = units(t * calls + i);
                    limiter.acquire(u).await;
                    out.push((Instant::now(), u));
                }
                out
            });
        }
        let mut all = Vec::new();
        while let Some(r) = set.join_next().await {
            all.extend(r.unwrap());
        }
        all.sort();
        all
    }

    /// The most units granted in any window of `len` starting at a grant.
    fn busiest_window(grants: &[(Instant, u64)], len: Duration) -> u64 {
        grants
            .iter()
            .map(|(start, _)| {
                grants
                    .iter()
                    .filter(|(t, _)| *t >= *start && *t < *start + len)
                    .map(|(_, u)| u)
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0)
    }

    #[tokio::test(start_paused = true)]
    async fn no_five_second_window_exceeds_the_cap_and_the_rate_converges() {
        let limiter = Arc::new(WriteCapacityLimiter::new(500));
        let start = Instant::now();
        // 8 callers asking for 1..=25 units per call: 30 s worth at 500/s.
        let g = grants(limiter.clone(), 8, 115, |i| (i % 25 + 1) as u64).await;
        let total: u64 = g.iter().map(|(_, u)| u).sum();
        let elapsed = g.last().unwrap().0 - start;
        let window = busiest_window(&g, Duration::from_secs(5));
        assert!(window <= 500 * 5 * 11 / 10, "busiest 5 s window: {window}");
        assert!(
            window >= 500 * 5 * 9 / 10,
            "the cap is used, not wasted: {window}"
        );
        let rate = total as f64 / elapsed.as_secs_f64();
        assert!((rate - 500.0).abs() < 500.0 * 0.02, "long-run rate {rate}");
        assert_eq!(limiter.snapshot().granted_units, total);
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_pause_the_burst_is_small() {
        let limiter = Arc::new(WriteCapacityLimiter::new(1000));
        tokio::time::sleep(Duration::from_secs(60)).await;
        let g = grants(limiter, 4, 500, |_| 10).await;
        let first_second = busiest_window(&g, Duration::from_secs(1));
        assert!(
            first_second <= 1000 + 100,
            "one second after a pause: {first_second}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_larger_than_the_bucket_passes_and_is_paid_off() {
        // Bucket of 10 units; calls of 400 units each.
        let limiter = Arc::new(WriteCapacityLimiter::new(100));
        let start = Instant::now();
        let g = grants(limiter, 1, 5, |_| 400).await;
        assert_eq!(g.len(), 5, "oversized calls are not stuck");
        // The first goes at once (full bucket); each next one waits off its
        // predecessor's debt: 400 units at 100/s.
        let at: Vec<u64> = g
            .iter()
            .map(|(t, _)| (*t - start).as_millis() as u64)
            .collect();
        assert_eq!(at, vec![0, 4000, 8000, 12000, 16000]);
    }

    #[test]
    fn reservations_are_served_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let limiter = WriteCapacityLimiter::new(10);
            let now = Instant::now();
            // Bucket of 1 unit, full: the first unit is free, each next costs 100 ms.
            let served: Vec<u128> = (0..4)
                .map(|_| (limiter.reserve(1, now) - now).as_millis())
                .collect();
            assert_eq!(served, vec![0, 100, 200, 300]);
            assert_eq!(limiter.snapshot().waited, Duration::from_millis(600));
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_rate_governs_from_then_on() {
        // A worker's share: 1,000 units a second alone, 250 once four share.
        let limiter = Arc::new(WriteCapacityLimiter::new(1000));
        let start = Instant::now();
        let alone = grants(limiter.clone(), 4, 250, |_| 10).await;
        let first = alone.last().unwrap().0 - start;
        assert!((first.as_secs_f64() - 10.0).abs() < 0.2, "{first:?}");
        limiter.set_rate(250.0, Instant::now());
        assert_eq!(limiter.rate(), 250.0);
        let from = Instant::now();
        let shared = grants(limiter.clone(), 4, 250, |_| 10).await;
        let then = shared.last().unwrap().0 - from;
        // 10,000 units at 250 a second.
        assert!((then.as_secs_f64() - 40.0).abs() < 0.5, "{then:?}");
        assert!(busiest_window(&shared, Duration::from_secs(1)) <= 250 + 25);
        assert_eq!(limiter.snapshot().wcu_per_second, 250);
    }
}
