//! The one retry loop: the caller makes one attempt and says what it came
//! to ([`Attempt`]); the loop counts, waits and decides when to stop, by
//! one [`RetryPolicy`], on one clock, with one source of jitter.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::clock::{Clock, Jitter, Sleep, ThreadJitter, TokioClock};
use super::{Refusals, RetryPolicy, Spent};

/// What one attempt of a call came to. `W` is the work an attempt is given
/// (the whole request, or what is left of it); it is handed back to be
/// tried again.
#[derive(Debug)]
pub enum Attempt<T, E, W = ()> {
    /// Done: the loop returns `T`.
    Done(T),
    /// Nothing was done; `work` may be tried again (throttling, a 5xx, a
    /// timeout, a dropped connection). Counts as an attempt (with a
    /// throttle budget, throttling counts against the budget instead).
    Retry {
        /// What the next attempt is given (the same work, as a rule).
        work: W,
        /// Whether the service said to slow down.
        throttled: bool,
        /// Why: what the loop gives up with if this was the last chance.
        error: E,
    },
    /// Part of the work was done (items written, entries sent); `rest` is
    /// what is left, and only that is tried again. Progress: the backoff
    /// grows, but no attempt is counted (a budget still ends it).
    RetryPart {
        /// What is left, for the next attempt.
        rest: W,
        /// Whether the rest was refused by throttling.
        throttled: bool,
        /// Why the rest was refused.
        error: E,
    },
    /// Some or none of the work was done, and the work paces itself: each
    /// of its parts keeps its own refusals and budget (the attempt already
    /// gave up the parts whose retries are spent, so `work` is what still
    /// has some). The loop counts no attempt against its policy; it waits a
    /// backoff of step `step` (grown by the work's own refusals), no longer
    /// than `within` (the nearest end of a part's budget). The batch
    /// writer's chunks: refused items travel among fresh ones, each with
    /// its own history.
    Paced {
        /// What the next attempt is given.
        work: W,
        /// The backoff step of the wait before it (1-based).
        step: u32,
        /// The longest wait: the next attempt comes no later.
        within: Option<Duration>,
        /// Whether the service said to slow down.
        throttled: bool,
    },
    /// Trying again cannot help (the request is refused as it is): the
    /// loop stops at once.
    GiveUp(E),
}

impl<T, E, W> Attempt<T, E, W> {
    /// The same outcome, its error mapped by `f`.
    pub fn map_error<F>(self, f: impl FnOnce(E) -> F) -> Attempt<T, F, W> {
        match self {
            Attempt::Done(t) => Attempt::Done(t),
            Attempt::Retry {
                work,
                throttled,
                error,
            } => Attempt::Retry {
                work,
                throttled,
                error: f(error),
            },
            Attempt::RetryPart {
                rest,
                throttled,
                error,
            } => Attempt::RetryPart {
                rest,
                throttled,
                error: f(error),
            },
            Attempt::Paced {
                work,
                step,
                within,
                throttled,
            } => Attempt::Paced {
                work,
                step,
                within,
                throttled,
            },
            Attempt::GiveUp(error) => Attempt::GiveUp(f(error)),
        }
    }
}

impl<E> GaveUp<E> {
    fn after(error: E, spent: Option<Spent>, tally: &Tally) -> GaveUp<E> {
        GaveUp {
            error,
            spent,
            attempts: tally.attempts,
        }
    }
}

/// Why the loop stopped without a result, and after how many attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaveUp<E> {
    /// The last attempt's error.
    pub error: E,
    /// `None`: the error was not worth retrying ([`Attempt::GiveUp`]);
    /// else the retries that ran out.
    pub spent: Option<Spent>,
    /// Attempts made, the last included.
    pub attempts: u32,
}

/// What one run of the loop did, for the caller's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Attempts made, the first included.
    pub attempts: u32,
    /// Of those, attempts refused by throttling (whole or in part).
    pub throttled: u32,
    /// Time slept between attempts.
    pub waited: Duration,
}

impl Tally {
    /// Attempts beyond the first.
    pub fn retries(&self) -> u32 {
        self.attempts.saturating_sub(1)
    }
}

/// The retry engine: a [`RetryPolicy`], the clock it waits on and the
/// source of its jitter (tokio's clock and the thread's generator unless
/// replaced). Cheap to make and to clone.
#[derive(Clone)]
pub struct Retrier {
    policy: RetryPolicy,
    clock: Option<Arc<dyn Clock>>,
    jitter: Option<Arc<dyn Jitter>>,
}

impl fmt::Debug for Retrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retrier")
            .field("policy", &self.policy)
            .field("clock", &self.clock.as_ref().map_or("tokio", |_| "own"))
            .field("jitter", &self.jitter.as_ref().map_or("thread", |_| "own"))
            .finish()
    }
}

impl From<RetryPolicy> for Retrier {
    fn from(policy: RetryPolicy) -> Retrier {
        Retrier::new(policy)
    }
}

impl Retrier {
    /// The engine of `policy`, on tokio's clock, with the thread's jitter.
    pub const fn new(policy: RetryPolicy) -> Retrier {
        Retrier {
            policy,
            clock: None,
            jitter: None,
        }
    }

    /// The same engine waiting on `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Retrier {
        self.clock = Some(clock);
        self
    }

    /// The same engine drawing its jitter from `jitter`.
    pub fn with_jitter(mut self, jitter: Arc<dyn Jitter>) -> Retrier {
        self.jitter = Some(jitter);
        self
    }

    /// The same engine with `policy`.
    pub fn with_policy(mut self, policy: RetryPolicy) -> Retrier {
        self.policy = policy;
        self
    }

    /// Its policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Now, on its clock.
    pub fn now(&self) -> Instant {
        match &self.clock {
            Some(c) => c.now(),
            None => TokioClock.now(),
        }
    }

    /// A wait of `delay` on its clock.
    pub fn sleep(&self, delay: Duration) -> Sleep {
        match &self.clock {
            Some(c) => c.sleep(delay),
            None => TokioClock.sleep(delay),
        }
    }

    /// Its source of jitter.
    pub fn jitter(&self) -> &dyn Jitter {
        match &self.jitter {
            Some(j) => j.as_ref(),
            None => &ThreadJitter,
        }
    }

    /// A full-jitter delay before retry number `retry` (1-based).
    pub fn delay(&self, retry: u32) -> Duration {
        self.policy.delay(retry, self.jitter())
    }

    /// [`Retrier::run_counted`] without the counts.
    pub async fn run<W, T, E, F, Fut>(
        &self,
        what: &str,
        work: W,
        attempt: F,
    ) -> Result<T, GaveUp<E>>
    where
        F: FnMut(W) -> Fut,
        Fut: Future<Output = Attempt<T, E, W>>,
    {
        self.run_counted(what, work, attempt).await.0
    }

    /// Makes `attempt` with `work`, then again with what it hands back,
    /// until it is done, gives up, or its retries are spent (see
    /// [`RetryPolicy::spent`]: `max_attempts` attempts that did nothing,
    /// throttling not counted when the policy has a throttle budget, which
    /// then ends its retries). Before each retry it waits a full-jitter
    /// backoff that grows with every refusal, whole or in part, and ends no
    /// later than the budget. `what` names the call in the log.
    pub async fn run_counted<W, T, E, F, Fut>(
        &self,
        what: &str,
        work: W,
        mut attempt: F,
    ) -> (Result<T, GaveUp<E>>, Tally)
    where
        F: FnMut(W) -> Fut,
        Fut: Future<Output = Attempt<T, E, W>>,
    {
        let started = self.now();
        let mut tally = Tally::default();
        // Refusals that did nothing (what the policy counts), and every
        // refusal (what the backoff grows with).
        let mut stalls = Refusals::default();
        let mut refusals = 0u32;
        let mut work = work;
        loop {
            tally.attempts += 1;
            let (next, throttled, error) = match attempt(work).await {
                Attempt::Done(t) => return (Ok(t), tally),
                Attempt::GiveUp(error) => return (Err(GaveUp::after(error, None, &tally)), tally),
                Attempt::Retry {
                    work,
                    throttled,
                    error,
                } => {
                    stalls.add(throttled);
                    (work, throttled, error)
                }
                Attempt::RetryPart {
                    rest,
                    throttled,
                    error,
                } => (rest, throttled, error),
                Attempt::Paced {
                    work: next,
                    step,
                    within,
                    throttled,
                } => {
                    tally.throttled += u32::from(throttled);
                    let delay = self.delay(step);
                    let delay = within.map_or(delay, |w| delay.min(w));
                    self.wait(what, &mut tally, throttled, delay).await;
                    work = next;
                    continue;
                }
            };
            tally.throttled += u32::from(throttled);
            refusals += 1;
            let elapsed = self.now().saturating_duration_since(started);
            if let Some(spent) = self.policy.spent(&stalls, elapsed) {
                return (Err(GaveUp::after(error, Some(spent), &tally)), tally);
            }
            let delay = self.policy.within_budget(self.delay(refusals), elapsed);
            self.wait(what, &mut tally, throttled, delay).await;
            work = next;
        }
    }

    /// The wait of `delay` before the next attempt, logged and tallied.
    async fn wait(&self, what: &str, tally: &mut Tally, throttled: bool, delay: Duration) {
        tracing::debug!(
            what,
            attempts = tally.attempts,
            throttled,
            ?delay,
            "retrying"
        );
        self.sleep(delay).await;
        tally.waited += delay;
    }
}
