//! The one retry engine of sql2ddb ([`Retrier`]) and its parameters
//! ([`RetryPolicy`]): capped exponential backoff with full jitter, at most
//! so many attempts, and for throttling a time budget instead of a count.
//! Every retry of a DynamoDB call, of an SQS receive, of the entries a
//! `SendMessageBatch` failed and of the wait for a slot's copy goes through
//! [`Retrier::run`]; the caller only says what each attempt came to
//! ([`Attempt`]).

mod clock;
mod engine;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use clock::{Clock, Jitter, SeededJitter, Sleep, ThreadJitter, TokioClock};
pub use engine::{Attempt, GaveUp, Retrier, Tally};

/// How long throttling is retried when the user says nothing (`--retry-budget`,
/// `[writer] retry_seconds`): throttling alone should not end a migration
/// quickly; ten minutes of refusals of one item say the table cannot take
/// the load now.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(600);

/// Backoff parameters: the delay before retry `n` (1-based) is uniform in
/// `[0, min(cap, base · 2^(n-1))]` (full jitter), and at most `max_attempts`
/// attempts are made, the first included. With a `throttle_budget`,
/// throttling is retried until the budget is spent, whatever the count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// First retry's ceiling.
    pub base: Duration,
    /// Largest ceiling.
    pub cap: Duration,
    /// Attempts before giving up, the first included.
    pub max_attempts: u32,
    /// How long a call (or an item) is retried, from its first attempt.
    /// With a budget, throttling (a partition or the table at its limit,
    /// items returned unprocessed) does not count in `max_attempts`: a hot
    /// partition may refuse an item many times before its turn, and only
    /// the budget ends its retries. `None`: throttling counts in
    /// `max_attempts` like any other failure, as for calls whose caller
    /// gives no budget (table admin, the progress table).
    pub throttle_budget: Option<Duration>,
}

impl Default for RetryPolicy {
    /// 50 ms base, 5 s cap, 12 attempts: the DynamoDB batch writer's; no
    /// throttle budget (the jobs that write set one, see
    /// [`DEFAULT_RETRY_BUDGET`]).
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_millis(50),
            cap: Duration::from_secs(5),
            max_attempts: 12,
            throttle_budget: None,
        }
    }
}

/// The refusals one call (or one item) met so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    /// Every refusal: what the backoff grows with.
    pub all: u32,
    /// Of those, throttling: the service said to slow down.
    pub throttled: u32,
}

impl Refusals {
    /// Counts one more refusal, throttling or not.
    pub fn add(&mut self, throttled: bool) {
        self.all += 1;
        self.throttled += u32::from(throttled);
    }
}

/// Why the retries of a call or an item end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    /// `max_attempts` attempts failed (this many in all, throttled ones
    /// included).
    Attempts(u32),
    /// The throttle budget ran out.
    Budget(Duration),
}

impl RetryPolicy {
    /// The ceiling of the delay before retry number `retry` (1-based).
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A full-jitter delay before retry number `retry` (1-based), its
    /// fraction of the ceiling drawn from `jitter`.
    pub fn delay(&self, retry: u32, jitter: &dyn Jitter) -> Duration {
        self.ceiling(retry)
            .mul_f64(jitter.fraction().clamp(0.0, 1.0))
    }

    /// The policy with `budget` for throttling.
    pub fn with_throttle_budget(self, budget: Duration) -> RetryPolicy {
        RetryPolicy {
            throttle_budget: Some(budget),
            ..self
        }
    }

    /// Whether the retries of a call refused as `refusals` say, first tried
    /// `elapsed` ago, are over: its attempts spent (throttled ones not
    /// counted when there is a budget), or its budget.
    pub fn spent(&self, refusals: &Refusals, elapsed: Duration) -> Option<Spent> {
        let counted = match self.throttle_budget {
            Some(_) => refusals.all - refusals.throttled,
            None => refusals.all,
        };
        if counted >= self.max_attempts.max(1) {
            return Some(Spent::Attempts(refusals.all));
        }
        self.throttle_budget
            .filter(|b| elapsed >= *b)
            .map(Spent::Budget)
    }

    /// `delay`, shortened so that the next attempt comes no later than the
    /// end of the budget: a call gets its last try when the budget ends.
    pub fn within_budget(&self, delay: Duration, elapsed: Duration) -> Duration {
        match self.throttle_budget {
            Some(b) => delay.min(b.saturating_sub(elapsed)),
            None => delay,
        }
    }

    /// After a refusal (counted into `refusals`) of a call first tried
    /// `elapsed` ago: the wait before the next attempt, or why there is
    /// none.
    pub fn next(
        &self,
        refusals: &mut Refusals,
        throttled: bool,
        elapsed: Duration,
        jitter: &dyn Jitter,
    ) -> Result<Duration, Spent> {
        refusals.add(throttled);
        if let Some(spent) = self.spent(refusals, elapsed) {
            return Err(spent);
        }
        Ok(self.within_budget(self.delay(refusals.all, jitter), elapsed))
    }
}
