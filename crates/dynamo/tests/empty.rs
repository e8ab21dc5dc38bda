//! Counting a table's items within a bound, and emptying it item by item,
//! against an in-process DynamoDB-compatible server (which pages scans at
//! 1 MB as the service does) — through a fault proxy that throttles and
//! returns delete requests unprocessed, re-encoded, as the service may.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use aws_sdk_dynamodb::Client;
use sql2ddb_core::{KeyAttr, KeyType};
use sql2ddb_dynamo::empty::{COUNT_BOUND, COUNT_PAGES};
use sql2ddb_dynamo::{
    count_items, empty_table, ensure_table, Emptying, ItemCount, LocalDynamo, RetryPolicy,
};
use sql2ddb_testkit::support::unique_name as unique;
use sql2ddb_testkit::{FaultConfig, FaultProxy};

fn keys() -> Vec<KeyAttr> {
    vec![
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ]
}

/// Writes `n` items `PK = P#i`, `SK = S`, each with `pad` bytes of text.
async fn fill(client: &Client, table: &str, n: usize, pad: usize) {
    let items: Vec<WriteRequest> = (0..n)
        .map(|i| {
            let item = HashMap::from([
                ("PK".to_string(), AttributeValue::S(format!("P#{i}"))),
                ("SK".to_string(), AttributeValue::S("S".into())),
                ("pad".to_string(), AttributeValue::S("x".repeat(pad.max(1)))),
            ]);
            let put = PutRequest::builder().set_item(Some(item)).build().unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect();
    // Chunks well under the 16 MB of a request.
    let per_call = (8_000_000 / (pad + 64)).clamp(1, 25);
    for chunk in items.chunks(per_call) {
        let out = client
            .batch_write_item()
            .request_items(table, chunk.to_vec())
            .send()
            .await
            .unwrap();
        assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()));
    }
}

#[tokio::test]
async fn a_count_says_absent_empty_exact_or_at_least_past_its_bound() {
    let local = LocalDynamo::start(None).await.unwrap();
    let (dynamo, client) = common::both(local.url());
    let retry = RetryPolicy::default();
    let table = unique("count");
    assert_eq!(count_items(&dynamo, &table, &retry).await.unwrap(), None);

    ensure_table(&dynamo, &table, &keys(), true).await.unwrap();
    let empty = count_items(&dynamo, &table, &retry).await.unwrap().unwrap();
    assert!(empty.is_empty(), "{empty:?}");

    fill(&client, &table, 3, 10).await;
    let three = count_items(&dynamo, &table, &retry).await.unwrap();
    assert_eq!(
        three,
        Some(ItemCount {
            items: 3,
            complete: true
        })
    );
    assert_eq!(three.unwrap().describe(), "3 items");

    // Items of 200 KB: five to a 1 MB page, so the page bound is met long
    // before the item bound, and the count stops there.
    let large = unique("count_large");
    ensure_table(&dynamo, &large, &keys(), true).await.unwrap();
    let n = 5 * COUNT_PAGES as usize + 40;
    fill(&client, &large, n, 200_000).await;
    let bounded = count_items(&dynamo, &large, &retry).await.unwrap().unwrap();
    assert!(!bounded.complete, "{bounded:?}");
    assert!(
        bounded.items >= COUNT_PAGES as u64 && bounded.items < n as u64,
        "{bounded:?} of {n}"
    );
    assert!(bounded.items < COUNT_BOUND);
    assert_eq!(
        bounded.describe(),
        format!(
            "at least {} items",
            sql2ddb_core::shown::thousands(bounded.items)
        )
    );
    local.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_is_emptied_through_throttling_and_unprocessed_deletes() {
    let local = LocalDynamo::start(None).await.unwrap();
    let (_, client) = common::both(local.url());
    let table = unique("empty");
    let (direct, _) = common::both(local.url());
    ensure_table(&direct, &table, &keys(), true).await.unwrap();
    const ITEMS: usize = 3_000;
    fill(&client, &table, ITEMS, 100).await;

    let faults = FaultConfig {
        seed: 7,
        throttling: 0.1,
        provisioned_throughput_exceeded: 0.1,
        internal_error: 0.05,
        unprocessed: 0.4,
        reencode: true,
        operations: vec!["Scan".into(), "BatchWriteItem".into()],
        ..FaultConfig::default()
    };
    let proxy = FaultProxy::start(local.url(), faults).await.unwrap();
    let (through, _) = common::both(&proxy.url());
    let deleted = AtomicU64::new(0);
    let keys = keys();
    let done = empty_table(
        &through,
        Emptying {
            table: &table,
            keys: &keys,
            segments: 4,
            // As every job empties: throttling and unprocessed deletes are
            // retried within a budget, not counted in the attempts (with
            // 40% of deletes refused, the last of a batch may be refused
            // a dozen times in a row).
            retry: RetryPolicy::default().with_throttle_budget(Duration::from_secs(120)),
            limiter: None,
            units_per_delete: 1,
        },
        &deleted,
    )
    .await
    .unwrap();
    assert_eq!(done, ITEMS as u64);
    assert_eq!(deleted.load(Ordering::Relaxed), ITEMS as u64);
    let stats = proxy.stats();
    assert!(stats.unprocessed > 0 && stats.throttling > 0, "{stats:?}");

    // Emptied, not dropped: the table is there, with no item.
    let left = count_items(&direct, &table, &RetryPolicy::default())
        .await
        .unwrap();
    assert_eq!(
        left,
        Some(ItemCount {
            items: 0,
            complete: true
        })
    );
    local.stop().await;
}
