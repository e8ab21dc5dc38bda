//! The batch writer through the fault proxy, in front of an in-process
//! DynamoDB-compatible server: it stays correct and bounded whatever the
//! proxy does, and the proxy's own counts say so.

mod support;

use std::sync::Arc;
use std::time::Duration;

use sql2ddb_dynamo::{AdaptiveConcurrency, BatchWriter, RetryPolicy, WriteCapacityLimiter};
use sql2ddb_testkit::{FaultConfig, FaultProxy};
use support::{assert_same_items, by_key, calls, items, proxied, write_all, Upstream};

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(20),
        cap: Duration::from_millis(500),
        max_attempts,
        throttle_budget: None,
    }
}

/// A server with a table named after `prefix`, a proxy in front of it
/// configured by `faults`, and a writer through the proxy with `policy`.
async fn through_proxy(
    prefix: &str,
    faults: FaultConfig,
    policy: RetryPolicy,
) -> (
    Upstream,
    String,
    FaultProxy,
    BatchWriter<sql2ddb_dynamo::BatchCalls>,
) {
    let (upstream, table, proxy) = proxied(prefix, faults).await;
    let writer = BatchWriter::new(calls(&proxy.url()).await, &table, support::keys(), policy);
    (upstream, table, proxy, writer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_items_arrive_exactly_through_thirty_percent_faults() {
    let (upstream, table, proxy, writer) =
        through_proxy("faults", FaultConfig::mix(0.3, 7), policy(40)).await;
    let control = Arc::new(AdaptiveConcurrency::new(16));
    let writer = Arc::new(writer.with_concurrency(control.clone()));
    let expected = items(0, 100_000, 20);
    let out = write_all(writer, expected.clone(), 1000, 4).await;

    assert!(
        out.failed.is_empty(),
        "{} failed: {:?}",
        out.failed.len(),
        out.failed.first()
    );
    assert!(out.unwritten.is_empty(), "{:?}", out.unwritten.first());
    assert!(out.rejected.is_empty(), "{:?}", out.rejected.first());
    assert_eq!(out.written, 100_000);
    assert_same_items(&upstream.scan(&table).await, &expected);
    assert!(
        out.retries > 0 && out.throttled > 0,
        "the writer counted its retries"
    );
    let stats = proxy.stats();
    for (kind, n) in [
        (
            "ProvisionedThroughputExceeded",
            stats.provisioned_throughput_exceeded,
        ),
        ("Throttling", stats.throttling),
        ("500", stats.internal_error),
        ("503", stats.service_unavailable),
        ("unprocessed", stats.unprocessed),
        ("dropped before forwarding", stats.dropped_before_forward),
        ("dropped after forwarding", stats.dropped_after_forward),
        ("delayed", stats.delayed),
    ] {
        assert!(n > 0, "no {kind} injected: {stats:?}");
    }
    let share = stats.faults() as f64 / stats.requests as f64;
    assert!(
        (0.25..0.35).contains(&share),
        "{share} of the calls faulted"
    );
    assert!(
        out.retries >= stats.faults(),
        "every fault cost a retry: {} < {}",
        out.retries,
        stats.faults()
    );
    assert!(control.snapshot().decreases > 0, "{:?}", control.snapshot());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_start_lowers_concurrency_and_the_run_completes() {
    let config = FaultConfig {
        throttle_all_for: Some(Duration::from_secs(5)),
        ..FaultConfig::default()
    };
    let budget = policy(1000).with_throttle_budget(Duration::from_secs(120));
    let (upstream, table, proxy, writer) = through_proxy("throttled", config, budget).await;
    let control = Arc::new(AdaptiveConcurrency::new(16));
    let writer = Arc::new(writer.with_concurrency(control.clone()));
    let expected = items(0, 20_000, 20);
    let out = write_all(writer, expected.clone(), 1000, 4).await;

    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert_same_items(&upstream.scan(&table).await, &expected);
    let stats = proxy.stats();
    assert!(stats.provisioned_throughput_exceeded > 0);
    assert!(
        stats.write_units_per_second.iter().take(5).all(|u| *u == 0),
        "nothing went through while throttled: {:?}",
        stats.write_units_per_second
    );
    let s = control.snapshot();
    assert!(
        s.min_reached < 16 && s.decreases > 0,
        "concurrency fell: {s:?}"
    );
    assert!(
        s.increases > 0 && s.current > s.min_reached,
        "and rose again: {s:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_cap_holds_in_every_five_second_window_at_the_server() {
    let (upstream, table, proxy, writer) =
        through_proxy("capped", FaultConfig::default(), policy(10)).await;
    let writer = Arc::new(
        writer
            .with_concurrency(Arc::new(AdaptiveConcurrency::new(8)))
            .with_capacity_limit(Arc::new(WriteCapacityLimiter::new(500)), 1),
    );
    // About 1.5 KB each: 2 units. 3750 items, 7500 units: 15 s at 500 per second.
    let expected = items(0, 3750, 1500);
    assert!(expected
        .iter()
        .all(|m| sql2ddb_core::write_units(m.size) == 2));
    let out = write_all(writer, expected.clone(), 250, 4).await;

    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert_same_items(&upstream.scan(&table).await, &expected);
    let stats = proxy.stats();
    assert_eq!(stats.write_units(), 7500, "the proxy saw every unit once");
    let busiest = stats.busiest_window(5);
    assert!(
        busiest <= 500 * 5 * 11 / 10,
        "{busiest} units in 5 s; per second: {:?}",
        stats.write_units_per_second
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_always_fails_is_reported_with_its_keys_after_its_attempts() {
    let config = FaultConfig {
        internal_error: 1.0,
        ..FaultConfig::default()
    };
    let (upstream, table, proxy, writer) = through_proxy("failing", config, policy(4)).await;
    let writer = writer.with_concurrency(Arc::new(AdaptiveConcurrency::new(4)));
    let batch = items(0, 60, 10);
    let out = writer.write(batch.clone()).await;

    assert_eq!(out.written, 0);
    // Three chunks at once: one spends its four attempts; once it has, the
    // run's budget is spent and the others stop at their next retry.
    let calls = proxy.stats().internal_error;
    assert!((4..=3 * 4).contains(&calls), "{calls} calls");
    assert_eq!(out.retries, calls - 3, "every call but each chunk's first");
    let failed: Vec<_> = out.failed.iter().map(|(m, _)| m.clone()).collect();
    assert_eq!(failed.len(), 60);
    assert_eq!(by_key(&failed), by_key(&batch), "every item, with its key");
    assert!(
        out.failed
            .iter()
            .all(|(_, why)| why.contains("InternalServerError")),
        "{:?}",
        out.failed[0].1
    );
    assert!(
        out.failed
            .iter()
            .any(|(_, why)| why.contains("not written after 4 attempts")),
        "{:?}",
        out.failed[0].1
    );
    assert!(upstream.scan(&table).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_stays_throttled_is_left_unwritten_at_its_budget() {
    let config = FaultConfig {
        throttling: 1.0,
        ..FaultConfig::default()
    };
    let budget = policy(3).with_throttle_budget(Duration::from_secs(2));
    let (upstream, table, proxy, writer) = through_proxy("deadline", config, budget).await;
    let batch = items(0, 30, 10);
    let out = writer.write(batch.clone()).await;

    // Not failed, not rejected: left for the caller to write later.
    assert!(out.failed.is_empty() && out.rejected.is_empty());
    let unwritten: Vec<_> = out.unwritten.iter().map(|(m, _)| m.clone()).collect();
    assert_eq!(by_key(&unwritten), by_key(&batch));
    let why = &out.unwritten[0].1;
    assert!(
        why.contains("not written within the retry budget of 2s")
            && why.contains("ThrottlingException"),
        "{why}"
    );
    assert!(
        proxy.stats().throttling > 3,
        "it retried past its attempts before giving up"
    );
    assert!(upstream.scan(&table).await.is_empty());
}
