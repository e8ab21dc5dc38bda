//! Reads through the capacity model: `Scan`, `Query`, `GetItem` and
//! `BatchGetItem` are metered in read units by DynamoDB's rules and
//! refused once their partition's read bucket is empty; sql2ddb's scanner
//! and batch reader retry until every item is read. Counts only: the
//! model's clock runs slowly where a test counts what a bucket admits.

mod support;

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::time::Duration;

use serde_json::json;
use sql2ddb_core::{AttrValue, Item};
use sql2ddb_dynamo::{batch_get, scan_segment, RetryPolicy, ScanSegment};
use sql2ddb_testkit::capacity::{key_hash, CapacityConfig};
use sql2ddb_testkit::sdk::types::{AttributeValue, KeysAndAttributes, ReturnConsumedCapacity};
use sql2ddb_testkit::{FaultConfig, FaultProxy};
use support::Upstream;

/// Partition keys `R#…` of partition `p` of 2, in order.
fn keys_of(p: u64, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("R#{i:05}"))
        .filter(|k| key_hash(&json!({ "S": k })).unwrap() % 2 == p)
        .take(n)
        .collect()
}

/// Writes an item of about 3 KB (under one 4 KB read block) for each key,
/// straight to the server.
async fn seed(upstream: &Upstream, table: &str, keys: &[String]) {
    for pk in keys {
        upstream
            .client
            .put_item()
            .table_name(table)
            .item("PK", AttributeValue::S(pk.clone()))
            .item("SK", AttributeValue::S("A".into()))
            .item("D", AttributeValue::S("x".repeat(3000)))
            .send()
            .await
            .unwrap();
    }
}

/// Two partitions of 10 RCU/s, no burst credit, `time_scale` model
/// seconds per real second.
async fn proxy(upstream: &Upstream, time_scale: f64) -> FaultProxy {
    let proxy = FaultProxy::start(upstream.local.url(), FaultConfig::default())
        .await
        .unwrap();
    let mut capacity = CapacityConfig {
        time_scale,
        burst: false,
        ..CapacityConfig::provisioned(1000, 2, 1000)
    };
    capacity.partition_rcu = 10;
    proxy.set_capacity(Some(capacity)).unwrap();
    proxy
}

fn key(pk: &str) -> std::collections::HashMap<String, AttributeValue> {
    [
        ("PK".to_string(), AttributeValue::S(pk.into())),
        ("SK".to_string(), AttributeValue::S("A".into())),
    ]
    .into()
}

#[tokio::test]
async fn reads_are_charged_by_four_kilobyte_blocks_and_refused_when_the_partition_is_spent() {
    let upstream = Upstream::start().await;
    let table = upstream.table("capacity-get").await;
    let (hot, cold) = (keys_of(0, 1), keys_of(1, 1));
    seed(&upstream, &table, &[hot[0].clone(), cold[0].clone()]).await;
    // A minute of real time is 0.6 model seconds: 6 units.
    let proxy = proxy(&upstream, 0.01).await;
    let sdk = sql2ddb_testkit::sdk::client(&proxy.url());
    let get = |pk: &str, consistent: bool| {
        sdk.get_item()
            .table_name(&table)
            .set_key(Some(key(pk)))
            .consistent_read(consistent)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
    };

    // 3 KB: one unit strongly consistent, half a unit eventually.
    let first = get(&hot[0], true).await.unwrap();
    assert!(first.item().is_some());
    assert_eq!(
        first.consumed_capacity().unwrap().capacity_units(),
        Some(1.0)
    );
    let second = get(&hot[0], false).await.unwrap();
    assert_eq!(
        second.consumed_capacity().unwrap().capacity_units(),
        Some(0.5)
    );
    // The partition's ten units: 1 + 0.5 + 8 more, then refused.
    for _ in 0..8 {
        get(&hot[0], true).await.unwrap();
    }
    let err = get(&hot[0], true).await.unwrap_err().into_service_error();
    assert!(
        err.is_provisioned_throughput_exceeded_exception(),
        "{err:?}"
    );
    // The other partition still reads.
    get(&cold[0], true).await.unwrap();

    let stats = proxy.capacity_stats().unwrap();
    assert_eq!(stats.read_calls, 12);
    assert_eq!(stats.refused_reads, 1);
    assert_eq!(stats.provisioned_throughput_exceeded, 1);
    let usage = &stats.tables[&table];
    // 9.5 units from the hot partition, 1 from the cold, in half units.
    assert_eq!(usage.read_half_units, 21);
    assert_eq!(usage.refused_reads, 1);
}

#[tokio::test]
async fn a_batch_get_returns_the_spent_partitions_keys_unprocessed() {
    let upstream = Upstream::start().await;
    let table = upstream.table("capacity-batch-get").await;
    let (hot, cold) = (keys_of(0, 14), keys_of(1, 4));
    let all: Vec<String> = hot.iter().chain(&cold).cloned().collect();
    seed(&upstream, &table, &all).await;
    let proxy = proxy(&upstream, 0.01).await;
    let sdk = sql2ddb_testkit::sdk::client(&proxy.url());

    let keys = KeysAndAttributes::builder()
        .set_keys(Some(all.iter().map(|k| key(k)).collect()))
        .consistent_read(true)
        .build()
        .unwrap();
    let out = sdk
        .batch_get_item()
        .request_items(&table, keys)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .unwrap();
    let pk = |item: &std::collections::HashMap<String, AttributeValue>| match &item["PK"] {
        AttributeValue::S(s) => s.clone(),
        other => panic!("{other:?}"),
    };
    let got: BTreeSet<String> = out.responses().unwrap()[&table].iter().map(pk).collect();
    let left: BTreeSet<String> = out.unprocessed_keys().unwrap()[&table]
        .keys()
        .iter()
        .map(pk)
        .collect();
    // Ten one-unit items of the hot partition read, four returned; every
    // item of the cold one read.
    assert_eq!(got.len(), 14);
    assert_eq!(left.len(), 4);
    assert!(left.iter().all(|k| hot.contains(k)), "{left:?}");
    assert!(cold.iter().all(|k| got.contains(k)));
    assert_eq!(got.union(&left).count(), all.len());
    assert!(out.unprocessed_keys().unwrap()[&table].consistent_read() == Some(true));
    assert_eq!(out.consumed_capacity()[0].capacity_units(), Some(14.0));

    // Only the spent partition's keys: nothing may be read, the call fails.
    let again = KeysAndAttributes::builder()
        .set_keys(Some(left.iter().map(|k| key(k)).collect()))
        .consistent_read(true)
        .build()
        .unwrap();
    let err = sdk
        .batch_get_item()
        .request_items(&table, again)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert!(
        err.is_provisioned_throughput_exceeded_exception(),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql2ddbs_scanner_and_batch_reader_retry_until_every_item_is_read() {
    let upstream = Upstream::start().await;
    let table = upstream.table("capacity-scan").await;
    let keys: Vec<String> = keys_of(0, 30).into_iter().chain(keys_of(1, 30)).collect();
    seed(&upstream, &table, &keys).await;
    // 10 RCU/s per partition, 5 model seconds per real second: a scan page
    // of 60 items of 3 KB is 22.5 units, so pages and gets are refused often.
    let proxy = proxy(&upstream, 5.0).await;
    let dynamo = support::client(&proxy.url()).await;
    let retry = RetryPolicy {
        base: Duration::from_millis(20),
        cap: Duration::from_millis(200),
        max_attempts: 1000,
        throttle_budget: None,
    };

    let mut scanned = BTreeSet::new();
    for round in 0..3 {
        scan_segment(
            &dynamo,
            ScanSegment {
                table: &table,
                segment: 0,
                total: 1,
                limiter: None,
                retry,
            },
            |page| {
                for item in page {
                    if let AttrValue::S(pk) = &item["PK"] {
                        scanned.insert((round, pk.clone()));
                    }
                }
                ControlFlow::Continue(())
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(scanned.len(), 3 * keys.len());

    let wanted: Vec<Item> = keys
        .iter()
        .map(|k| {
            [
                ("PK".to_string(), AttrValue::S(k.clone())),
                ("SK".to_string(), AttrValue::S("A".into())),
            ]
            .into_iter()
            .collect()
        })
        .collect();
    let found = batch_get(&dynamo, &table, &wanted, None, retry)
        .await
        .unwrap();
    assert_eq!(found.len(), keys.len());

    let stats = proxy.capacity_stats().unwrap();
    assert!(
        stats.refused_reads > 0,
        "the model never refused a read: {stats:?}"
    );
    let usage = &stats.tables[&table];
    // Refused reads cost nothing: three scans of one page of 60 items of
    // 3,013 bytes (180,780 bytes: 45 blocks of 4 KB, half a unit each,
    // eventually consistent) and 60 consistent gets of one unit.
    assert_eq!(usage.read_half_units, 3 * 45 + 60 * 2, "{usage:?}");
}
