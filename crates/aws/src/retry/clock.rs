//! What the retry engine takes from outside: the time (now, and a sleep)
//! and the randomness of its jitter. Both default to the real ones; a test
//! pauses tokio's clock and seeds the jitter to see every delay.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// A sleep of a [`Clock`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where the engine reads the time and waits.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Instant;
    /// A wait of `delay`.
    fn sleep(&self, delay: Duration) -> Sleep;
}

/// tokio's clock: what every caller uses, and what `tokio::time::pause()`
/// stops and advances in a test.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, delay: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(delay))
    }
}

/// Where full jitter takes its fractions from.
pub trait Jitter: Send + Sync {
    /// A fraction in `[0, 1)`: the part of a delay's ceiling waited.
    fn fraction(&self) -> f64;
}

/// The thread's random generator, seeded by the system: the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadJitter;

impl Jitter for ThreadJitter {
    fn fraction(&self) -> f64 {
        rand::rng().random::<f64>()
    }
}

/// A generator seeded by the caller: the same seed, the same delays.
pub struct SeededJitter(Mutex<StdRng>);

impl SeededJitter {
    /// Jitter drawn from a generator seeded with `seed`.
    pub fn new(seed: u64) -> SeededJitter {
        SeededJitter(Mutex::new(StdRng::seed_from_u64(seed)))
    }
}

impl Jitter for SeededJitter {
    fn fraction(&self) -> f64 {
        // The generator is consistent after every draw.
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        rng.random::<f64>()
    }
}

impl fmt::Debug for SeededJitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SeededJitter")
    }
}
