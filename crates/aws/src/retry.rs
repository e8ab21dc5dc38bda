//! Retry parameters of a loop that owns its retries: capped exponential
//! backoff with full jitter.

use std::time::Duration;

use rand::Rng;

/// Backoff parameters: the delay before retry `n` (1-based) is uniform in
/// `[0, min(cap, base · 2^(n-1))]` (full jitter), and at most `max_attempts`
/// attempts are made, the first included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// First retry's ceiling.
    pub base: Duration,
    /// Largest ceiling.
    pub cap: Duration,
    /// Attempts before giving up, the first included.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    /// 50 ms base, 5 s cap, 12 attempts: the DynamoDB batch writer's.
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_millis(50),
            cap: Duration::from_secs(5),
            max_attempts: 12,
        }
    }
}

impl RetryPolicy {
    /// The ceiling of the delay before retry number `retry` (1-based).
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A full-jitter delay before retry number `retry` (1-based).
    pub fn delay(&self, retry: u32, rng: &mut impl Rng) -> Duration {
        self.ceiling(retry).mul_f64(rng.random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_double_from_base_up_to_cap() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(700),
            max_attempts: 5,
        };
        let ms = |n| p.ceiling(n).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(40)],
            [100, 200, 400, 700, 700]
        );
        let mut rng = rand::rng();
        for _ in 0..200 {
            assert!(p.delay(3, &mut rng) <= Duration::from_millis(400));
        }
    }
}
