//! Each fault the proxy injects reaches the writer's calls as DynamoDB would send
//! it, and the writer's classification sees it for what it is.

mod support;

use std::time::Duration;

use sql2ddb_core::EncodedItem;
use sql2ddb_dynamo::{ensure_table, BatchWriteApi, CallError};
use sql2ddb_testkit::{FaultConfig, FaultProxy};
use support::{assert_same_items, calls, client, items, only, proxied, Upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_looks_like_dynamodb_to_the_writers_calls() {
    let (upstream, table, proxy) = proxied("kinds", FaultConfig::default()).await;
    let calls = calls(&proxy.url()).await;
    let batch = items(0, 10, 10);
    let refs: Vec<&EncodedItem> = batch.iter().collect();
    let keys = support::keys();
    let call = |config: FaultConfig| {
        proxy.set_config(config).unwrap();
        BatchWriteApi::batch_put(&calls, &table, &keys, &refs)
    };

    let failed = |r: Result<Vec<usize>, CallError>| r.expect_err("the call failed");
    let e = failed(call(only(|c| c.provisioned_throughput_exceeded = 1.0)).await);
    assert!(e.retryable() && e.is_throttling(), "{e:?}");
    assert!(
        e.message
            .starts_with("ProvisionedThroughputExceededException"),
        "{e:?}"
    );
    let e = failed(call(only(|c| c.throttling = 1.0)).await);
    assert!(e.retryable() && e.is_throttling(), "{e:?}");
    assert!(e.message.starts_with("ThrottlingException"), "{e:?}");
    let e = failed(call(only(|c| c.internal_error = 1.0)).await);
    assert!(e.retryable() && !e.is_throttling(), "{e:?}");
    let e = failed(call(only(|c| c.service_unavailable = 1.0)).await);
    assert!(e.retryable() && !e.is_throttling(), "{e:?}");
    let e = failed(call(only(|c| c.dropped_connection = 1.0)).await);
    assert!(e.retryable() && !e.is_throttling(), "{e:?}");
    let stats = proxy.stats();
    assert_eq!(
        (
            stats.provisioned_throughput_exceeded,
            stats.throttling,
            stats.internal_error,
            stats.service_unavailable,
            stats.dropped_before_forward + stats.dropped_after_forward,
        ),
        (1, 1, 1, 1, 1)
    );

    // A connection dropped after forwarding leaves the write done, unanswered.
    let mut expected = if stats.dropped_after_forward == 1 {
        batch.clone()
    } else {
        Vec::new()
    };
    assert_same_items(&upstream.scan(&table).await, &expected);

    // Unprocessed: part is written, the rest comes back, by index.
    let before = proxy.stats().items_forwarded;
    proxy.set_config(only(|c| c.unprocessed = 1.0)).unwrap();
    let other = items(100, 110, 10);
    let other_refs: Vec<&EncodedItem> = other.iter().collect();
    let unprocessed = BatchWriteApi::batch_put(&calls, &table, &support::keys(), &other_refs)
        .await
        .unwrap();
    assert!(
        !unprocessed.is_empty() && unprocessed.len() <= 10,
        "{unprocessed:?}"
    );
    let written: Vec<_> = other
        .iter()
        .enumerate()
        .filter(|(i, _)| !unprocessed.contains(i))
        .map(|(_, m)| m.clone())
        .collect();
    let stats = proxy.stats();
    assert_eq!(stats.unprocessed, 1);
    assert_eq!(stats.unprocessed_items, unprocessed.len() as u64);
    assert_eq!(stats.items_forwarded - before, written.len() as u64);
    expected.extend(written);
    assert_same_items(&upstream.scan(&table).await, &expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_chosen_operations_are_faulted() {
    let (_upstream, table, proxy) = proxied("ops", only(|c| c.throttling = 1.0)).await;
    let client = client(&proxy.url()).await;
    // DescribeTable goes through by default.
    ensure_table(&client, &table, &support::keys(), false)
        .await
        .unwrap();
    proxy
        .set_config(only(|c| {
            c.throttling = 1.0;
            c.operations = vec!["DescribeTable".into()];
        }))
        .unwrap();
    let err = ensure_table(&client, &table, &support::keys(), false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ThrottlingException"), "{err}");
    // Retried by the one policy of every call, then given up.
    let attempts = sql2ddb_dynamo::RetryPolicy::default().max_attempts;
    assert!(
        err.to_string()
            .contains(&format!("not done after {attempts} attempts")),
        "{err}"
    );
    assert_eq!(proxy.stats().throttling, u64::from(attempts));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_window_starts_when_the_configuration_is_applied() {
    let upstream = Upstream::start().await;
    let table = upstream.table("window").await;
    let window = |d: Duration| only(|c| c.throttle_all_for = Some(d));
    // A short window from the start: it has passed after the wait.
    let short = Duration::from_millis(200);
    let proxy = FaultProxy::start(upstream.local.url(), window(short))
        .await
        .unwrap();
    let calls = calls(&proxy.url()).await;
    let batch = items(0, 5, 10);
    let refs: Vec<&EncodedItem> = batch.iter().collect();
    tokio::time::sleep(short * 2).await;
    assert_eq!(
        BatchWriteApi::batch_put(&calls, &table, &support::keys(), &refs)
            .await
            .unwrap(),
        Vec::<usize>::new()
    );
    // A window applied now throttles from now, not from the start (an hour:
    // no call can outlast it).
    proxy.set_config(window(Duration::from_secs(3600))).unwrap();
    let during = BatchWriteApi::batch_put(&calls, &table, &support::keys(), &refs).await;
    assert!(during.unwrap_err().is_throttling());
    // And ends when its time is up.
    proxy.set_config(window(short)).unwrap();
    tokio::time::sleep(short * 2).await;
    let after = BatchWriteApi::batch_put(&calls, &table, &support::keys(), &refs).await;
    assert_eq!(after.unwrap(), Vec::<usize>::new());
    assert_same_items(&upstream.scan(&table).await, &batch);
    assert_eq!(proxy.stats().provisioned_throughput_exceeded, 1);
}

#[tokio::test]
async fn a_bad_configuration_or_upstream_is_refused() {
    let too_much = only(|c| {
        c.throttling = 0.8;
        c.internal_error = 0.8;
    });
    let err = FaultProxy::start("http://127.0.0.1:1", too_much)
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("add up to"), "{err}");
    let err = FaultProxy::start("https://example.com", FaultConfig::default())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("not an http:// URL"), "{err}");
}
