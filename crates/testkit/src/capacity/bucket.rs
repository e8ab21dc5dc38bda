//! A token bucket on the model's clock: `rate` units per model second, at
//! most `capacity` banked.

/// A token bucket whose time is the model's (seconds, passed in by the
/// caller): the same calls at the same times give the same answers.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: f64,
}

/// Slack for the float sums of refills (a thousand refills of 0.001 s).
const EPSILON: f64 = 1e-6;

impl TokenBucket {
    /// A bucket filling at `rate` units per second up to `capacity`, holding
    /// `initial` units at model time `now`.
    pub fn new(rate: f64, capacity: f64, initial: f64, now: f64) -> TokenBucket {
        TokenBucket {
            rate,
            capacity,
            tokens: initial.min(capacity),
            last: now,
        }
    }

    /// Units per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Changes the rate from `now` on (what was banked stays; the capacity
    /// scales with the rate, as it is so many seconds of it).
    pub fn set_rate(&mut self, rate: f64, now: f64) {
        self.refill(now);
        if self.rate > 0.0 {
            self.capacity *= rate / self.rate;
        }
        self.rate = rate;
    }

    /// The units banked at `now`.
    pub fn available(&mut self, now: f64) -> f64 {
        self.refill(now);
        self.tokens
    }

    /// Whether `units` may be taken at `now`: there are that many, or the
    /// bucket is full (a request larger than the bucket goes through once
    /// it is full and leaves it in debt, as DynamoDB lets a large item
    /// through and then refuses until the debt is paid).
    pub fn allows(&mut self, now: f64, units: f64) -> bool {
        self.refill(now);
        self.tokens + EPSILON >= units.min(self.capacity)
    }

    /// Takes `units` (the bucket may go into debt).
    pub fn take(&mut self, now: f64, units: f64) {
        self.refill(now);
        self.tokens -= units;
    }

    fn refill(&mut self, now: f64) {
        if now > self.last {
            self.tokens = (self.tokens + self.rate * (now - self.last)).min(self.capacity);
            self.last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes one unit at a time at `now` until refused; how many it took.
    fn drain(bucket: &mut TokenBucket, now: f64) -> u32 {
        let mut n = 0;
        while bucket.allows(now, 1.0) {
            bucket.take(now, 1.0);
            n += 1;
        }
        n
    }

    #[test]
    fn a_full_bucket_then_its_rate() {
        // 250 units/s, one second banked, full at 0.
        let mut b = TokenBucket::new(250.0, 250.0, 250.0, 0.0);
        assert_eq!(drain(&mut b, 0.0), 250);
        assert_eq!(drain(&mut b, 0.5), 125);
        assert_eq!(drain(&mut b, 1.0), 125);
        assert_eq!(drain(&mut b, 1.004), 1);
        // Idle for 10 s: no more than the capacity is banked.
        assert_eq!(drain(&mut b, 11.0), 250);
    }

    #[test]
    fn burst_credit_banks_unused_capacity() {
        // 10 units/s with 300 s of credit, starting with one second.
        let mut b = TokenBucket::new(10.0, 3000.0, 10.0, 0.0);
        assert_eq!(drain(&mut b, 0.0), 10);
        // Unused for 100 s: 1,000 banked.
        assert_eq!(drain(&mut b, 100.0), 1000);
        // Unused for 1,000 s: capped at 300 s of it.
        assert_eq!(drain(&mut b, 1100.0), 3000);
    }

    #[test]
    fn a_request_larger_than_the_bucket_goes_through_when_full_and_leaves_debt() {
        let mut b = TokenBucket::new(100.0, 100.0, 100.0, 0.0);
        assert!(b.allows(0.0, 400.0));
        b.take(0.0, 400.0);
        assert!((b.available(0.0) + 300.0).abs() < 1e-9);
        // The debt is paid at the rate: 3 s, then one second to fill.
        assert_eq!(drain(&mut b, 3.0), 0);
        assert_eq!(drain(&mut b, 3.5), 50);
        assert!(!b.allows(3.9, 100.0));
        assert!(b.allows(5.0, 100.0));
    }

    #[test]
    fn a_new_rate_keeps_what_is_banked() {
        let mut b = TokenBucket::new(100.0, 100.0, 0.0, 0.0);
        b.set_rate(200.0, 0.5); // 50 banked at 0.5
        assert_eq!(drain(&mut b, 0.5), 50);
        assert_eq!(drain(&mut b, 1.0), 100);
        assert_eq!(drain(&mut b, 5.0), 200);
    }
}
