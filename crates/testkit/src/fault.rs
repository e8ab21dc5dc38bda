//! Which faults the proxy injects, how often, and the seeded draw that picks
//! one for each request.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What the proxy does to the requests of the affected operations. Rates are
/// probabilities per request; the fault kinds exclude each other (their
/// rates add up to at most 1), a delay comes on top of any of them. The
/// switches (`reencode`, `first_sight_unprocessed`, `expired_token`) are
/// not drawn: they apply to every affected request.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    /// Seed of the draws: the same seed gives the same sequence of decisions.
    pub seed: u64,
    /// Answer HTTP 400 `ProvisionedThroughputExceededException`.
    pub provisioned_throughput_exceeded: f64,
    /// Answer HTTP 400 `ThrottlingException`.
    pub throttling: f64,
    /// Answer HTTP 500 `InternalServerError`.
    pub internal_error: f64,
    /// Answer HTTP 503 `ServiceUnavailable`.
    pub service_unavailable: f64,
    /// `BatchWriteItem`: forward a random part of the request and answer the
    /// rest in `UnprocessedItems`; `BatchGetItem`: the same with its keys, in
    /// `UnprocessedKeys`. Other operations go through.
    pub unprocessed: f64,
    /// Close the connection without an answer, after forwarding the request
    /// or not (a coin flip): the client cannot tell whether it was written.
    pub dropped_connection: f64,
    /// Delay the request by a duration drawn from `delay_ms`.
    pub delay: f64,
    /// Range of the delays, in milliseconds (inclusive).
    pub delay_ms: (u64, u64),
    /// Answer HTTP 429 `TooManyRequestsException`.
    pub too_many_requests: f64,
    /// Answer HTTP 408 `RequestTimeoutException`.
    pub request_timeout: f64,
    /// Forward the request, then hold the answer for `slow_for` (longer than
    /// the client waits for an attempt): the request was applied, the client
    /// saw a timeout.
    pub slow: f64,
    /// How long a slow answer is held.
    pub slow_for: Duration,
    /// At most this many answers are held slow (each holds a connection of
    /// the client for `slow_for`); past it a slow draw goes through.
    pub slow_limit: Option<u64>,
    /// Items and keys answered as unprocessed come back re-encoded as
    /// DynamoDB may send them: attributes and set elements in another order,
    /// numbers in another spelling of the same value, a character of a
    /// string as a JSON `\u` escape.
    pub reencode: bool,
    /// `BatchWriteItem`: the first time the proxy sees an item (or a delete's
    /// key), it holds it back and answers it as unprocessed; the next time
    /// it goes through.
    pub first_sight_unprocessed: bool,
    /// Answer HTTP 400 `ExpiredTokenException` to the first request of each
    /// access key id (from the `Authorization` header), then let that
    /// credential through.
    pub expired_token: bool,
    /// Answer `ProvisionedThroughputExceededException` to every request for
    /// this long after the configuration is applied, then draw as usual.
    pub throttle_all_for: Option<Duration>,
    /// The operations (`BatchWriteItem`, `PutItem`, …) faults apply to; the
    /// others always go through. `*` stands for every operation.
    pub operations: Vec<String>,
}

impl Default for FaultConfig {
    /// No faults; `BatchWriteItem` is the affected operation.
    fn default() -> Self {
        FaultConfig {
            seed: 0,
            provisioned_throughput_exceeded: 0.0,
            throttling: 0.0,
            internal_error: 0.0,
            service_unavailable: 0.0,
            unprocessed: 0.0,
            dropped_connection: 0.0,
            delay: 0.0,
            delay_ms: (5, 50),
            too_many_requests: 0.0,
            request_timeout: 0.0,
            slow: 0.0,
            slow_for: DEFAULT_SLOW_FOR,
            slow_limit: None,
            reencode: false,
            first_sight_unprocessed: false,
            expired_token: false,
            throttle_all_for: None,
            operations: vec!["BatchWriteItem".to_string()],
        }
    }
}

/// How long a slow answer is held by default: past the 30 s a sql2ddb
/// client gives one attempt.
pub const DEFAULT_SLOW_FOR: Duration = Duration::from_secs(35);

/// The `operations` entry that stands for every operation.
pub const EVERY_OPERATION: &str = "*";

/// A configuration that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fault configuration: {0}")]
pub struct FaultConfigError(String);

impl FaultConfig {
    /// `rate` of the requests faulted, spread evenly over six fault kinds
    /// (throttling of both kinds, 500, 503, unprocessed items, dropped
    /// connections), and as many delayed. [`FaultConfig::every_fault`] adds
    /// the rest.
    pub fn mix(rate: f64, seed: u64) -> FaultConfig {
        let each = rate / 6.0;
        FaultConfig {
            seed,
            provisioned_throughput_exceeded: each,
            throttling: each,
            internal_error: each,
            service_unavailable: each,
            unprocessed: each,
            dropped_connection: each,
            delay: rate,
            ..FaultConfig::default()
        }
    }

    /// Everything DynamoDB may do, on every operation at once: `rate` of the
    /// requests faulted, spread evenly over every fault kind (slow answers
    /// among them, at most `slow_limit` of them), as many delayed, the
    /// answered unprocessed items re-encoded, and the first request of each
    /// credential answered `ExpiredTokenException`.
    pub fn every_fault(rate: f64, seed: u64, slow_limit: u64) -> FaultConfig {
        let each = rate / 9.0;
        FaultConfig {
            seed,
            provisioned_throughput_exceeded: each,
            throttling: each,
            internal_error: each,
            service_unavailable: each,
            unprocessed: each,
            dropped_connection: each,
            too_many_requests: each,
            request_timeout: each,
            slow: each,
            slow_limit: Some(slow_limit),
            delay: rate,
            reencode: true,
            expired_token: true,
            operations: vec![EVERY_OPERATION.to_string()],
            ..FaultConfig::default()
        }
    }

    /// Checks that rates are probabilities and the fault kinds fit in 1.
    pub fn validate(&self) -> Result<(), FaultConfigError> {
        let rates = [
            (
                "provisioned_throughput_exceeded",
                self.provisioned_throughput_exceeded,
            ),
            ("throttling", self.throttling),
            ("internal_error", self.internal_error),
            ("service_unavailable", self.service_unavailable),
            ("unprocessed", self.unprocessed),
            ("dropped_connection", self.dropped_connection),
            ("delay", self.delay),
            ("too_many_requests", self.too_many_requests),
            ("request_timeout", self.request_timeout),
            ("slow", self.slow),
        ];
        for (name, rate) in rates {
            if !(0.0..=1.0).contains(&rate) {
                return Err(FaultConfigError(format!(
                    "{name} = {rate} is not within 0..1"
                )));
            }
        }
        let total = self.exclusive().iter().map(|(_, r)| r).sum::<f64>();
        if total > 1.0 + 1e-9 {
            return Err(FaultConfigError(format!(
                "the fault rates add up to {total}, more than 1"
            )));
        }
        if self.delay_ms.0 > self.delay_ms.1 {
            return Err(FaultConfigError(format!(
                "delay range {}..{} ms is reversed",
                self.delay_ms.0, self.delay_ms.1
            )));
        }
        Ok(())
    }

    /// The kinds that exclude each other, in the order the draw takes them
    /// (the later ones added last, so that older configurations draw as before).
    fn exclusive(&self) -> [(FaultKind, f64); 9] {
        [
            (
                FaultKind::ProvisionedThroughputExceeded,
                self.provisioned_throughput_exceeded,
            ),
            (FaultKind::Throttling, self.throttling),
            (FaultKind::InternalError, self.internal_error),
            (FaultKind::ServiceUnavailable, self.service_unavailable),
            (FaultKind::Unprocessed, self.unprocessed),
            (FaultKind::DroppedConnection, self.dropped_connection),
            (FaultKind::TooManyRequests, self.too_many_requests),
            (FaultKind::RequestTimeout, self.request_timeout),
            (FaultKind::Slow, self.slow),
        ]
    }

    /// Whether faults apply to `operation`.
    pub fn affects(&self, operation: &str) -> bool {
        self.operations
            .iter()
            .any(|o| o == EVERY_OPERATION || o == operation)
    }
}

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// HTTP 400 `ProvisionedThroughputExceededException`.
    ProvisionedThroughputExceeded,
    /// HTTP 400 `ThrottlingException`.
    Throttling,
    /// HTTP 500.
    InternalError,
    /// HTTP 503.
    ServiceUnavailable,
    /// Part of a `BatchWriteItem` or `BatchGetItem` answered as unprocessed.
    Unprocessed,
    /// The connection closed without an answer.
    DroppedConnection,
    /// HTTP 429.
    TooManyRequests,
    /// HTTP 408 `RequestTimeoutException`.
    RequestTimeout,
    /// Forwarded, answered after `slow_for`.
    Slow,
}

/// What to do with one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Wait this long first.
    pub delay: Option<Duration>,
    /// The fault to inject, if any.
    pub fault: Option<FaultKind>,
    /// For a dropped connection: whether the request is forwarded first.
    pub forward_before_drop: bool,
    /// Seed for choosing the unprocessed part of a batch.
    pub split_seed: u64,
}

/// The seeded source of decisions.
#[derive(Debug)]
pub struct FaultDraw {
    rng: StdRng,
}

impl FaultDraw {
    /// Draws seeded with `seed`.
    pub fn new(seed: u64) -> FaultDraw {
        FaultDraw {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Decides for one request. Every call takes the same number of draws,
    /// so the sequence of decisions depends on the seed alone.
    pub fn decide(&mut self, config: &FaultConfig, throttle_all: bool) -> Decision {
        let delay_roll: f64 = self.rng.random();
        let delay_ms = self.rng.random_range(config.delay_ms.0..=config.delay_ms.1);
        let fault_roll: f64 = self.rng.random();
        let forward_before_drop: bool = self.rng.random();
        let split_seed: u64 = self.rng.random();
        let fault = if throttle_all {
            Some(FaultKind::ProvisionedThroughputExceeded)
        } else {
            let mut edge = 0.0;
            config.exclusive().into_iter().find_map(|(kind, rate)| {
                edge += rate;
                (fault_roll < edge).then_some(kind)
            })
        };
        Decision {
            delay: (delay_roll < config.delay).then(|| Duration::from_millis(delay_ms)),
            fault,
            forward_before_drop,
            split_seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_decisions() {
        let config = FaultConfig::mix(0.3, 42);
        let run = |seed| {
            let mut draw = FaultDraw::new(seed);
            (0..200)
                .map(|_| draw.decide(&config, false))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn rates_are_honoured_and_every_kind_occurs() {
        let config = FaultConfig::mix(0.3, 1);
        let mut draw = FaultDraw::new(1);
        let decisions: Vec<Decision> = (0..20_000).map(|_| draw.decide(&config, false)).collect();
        let faulted = decisions.iter().filter(|d| d.fault.is_some()).count() as f64 / 20_000.0;
        assert!((faulted - 0.3).abs() < 0.02, "faulted {faulted}");
        for (kind, rate) in config.exclusive() {
            let n = decisions.iter().filter(|d| d.fault == Some(kind)).count();
            if rate > 0.0 {
                assert!((700..1300).contains(&n), "{kind:?}: {n}");
            } else {
                assert_eq!(n, 0, "{kind:?} is not in the mix");
            }
        }
        let delayed: Vec<Duration> = decisions.iter().filter_map(|d| d.delay).collect();
        assert!(delayed
            .iter()
            .all(|d| (Duration::from_millis(5)..=Duration::from_millis(50)).contains(d)));
        let none = FaultConfig::default();
        assert!((0..1000).all(|_| {
            let d = draw.decide(&none, false);
            d.fault.is_none() && d.delay.is_none()
        }));
    }

    #[test]
    fn every_fault_draws_each_of_the_nine_kinds_on_every_operation() {
        let config = FaultConfig::every_fault(0.45, 3, 2);
        assert!(config.validate().is_ok());
        assert!(["PutItem", "Scan", "DescribeTable", "BatchWriteItem"]
            .iter()
            .all(|op| config.affects(op)));
        assert!(config.reencode && config.expired_token);
        let mut draw = FaultDraw::new(3);
        let decisions: Vec<Decision> = (0..18_000).map(|_| draw.decide(&config, false)).collect();
        for (kind, _) in config.exclusive() {
            let n = decisions.iter().filter(|d| d.fault == Some(kind)).count();
            // 0.05 of 18,000 each.
            assert!((700..1100).contains(&n), "{kind:?}: {n}");
        }
        let mix = FaultConfig::mix(0.3, 3);
        assert!(!mix.affects("PutItem") && mix.affects("BatchWriteItem"));
    }

    #[test]
    fn throttle_all_overrides_the_draw() {
        let mut draw = FaultDraw::new(0);
        let d = draw.decide(&FaultConfig::default(), true);
        assert_eq!(d.fault, Some(FaultKind::ProvisionedThroughputExceeded));
        assert_eq!(draw.decide(&FaultConfig::default(), false).fault, None);
    }

    #[test]
    fn invalid_rates_are_refused() {
        assert!(FaultConfig::mix(0.3, 0).validate().is_ok());
        let too_much = FaultConfig {
            throttling: 0.7,
            internal_error: 0.5,
            ..FaultConfig::default()
        };
        assert!(too_much
            .validate()
            .unwrap_err()
            .to_string()
            .contains("add up to"));
        let negative = FaultConfig {
            delay: -0.1,
            ..FaultConfig::default()
        };
        assert!(negative.validate().is_err());
        let reversed = FaultConfig {
            delay_ms: (50, 5),
            ..FaultConfig::default()
        };
        assert!(reversed.validate().is_err());
        let slow_too_often = FaultConfig {
            slow: 1.5,
            ..FaultConfig::default()
        };
        assert!(slow_too_often.validate().is_err());
    }
}
