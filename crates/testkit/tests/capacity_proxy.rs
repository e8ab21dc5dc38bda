//! The capacity model in the proxy, in front of an in-process
//! DynamoDB-compatible server: the requests of an over-limit partition come
//! back unprocessed while the others are written, over-limit calls are
//! answered as DynamoDB answers them, the consumed units are reported, and
//! a writer that retries loses nothing. The model's clock runs slowly
//! (`time_scale` well under 1) where a test counts what one second of
//! capacity admits, so that the counts do not depend on how fast the test
//! runs.

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sql2ddb_core::EncodedItem;
use sql2ddb_dynamo::{BatchWriter, RetryPolicy};
use sql2ddb_testkit::capacity::{key_hash, CapacityConfig};
use sql2ddb_testkit::sdk::types::{
    AttributeValue, PutRequest, ReturnConsumedCapacity, WriteRequest,
};
use sql2ddb_testkit::{FaultConfig, FaultProxy};
use support::{assert_same_items, calls, items, write_all, Upstream};

/// The partition of `pk` in a table of `partitions`.
fn partition(pk: &str, partitions: u64) -> u64 {
    key_hash(&json!({ "S": pk })).unwrap() % partitions
}

/// Partition keys `U#…` of partition `p` of 2, in order.
fn keys_of(p: u64, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("U#{i:07}"))
        .filter(|k| partition(k, 2) == p)
        .take(n)
        .collect()
}

fn put(pk: &str) -> WriteRequest {
    let item = [
        ("PK".to_string(), AttributeValue::S(pk.to_string())),
        ("SK".to_string(), AttributeValue::S("A".into())),
    ];
    let put = PutRequest::builder()
        .set_item(Some(item.into_iter().collect()))
        .build()
        .unwrap();
    WriteRequest::builder().put_request(put).build()
}

fn pk_of(request: &WriteRequest) -> String {
    match &request.put_request().unwrap().item()["PK"] {
        AttributeValue::S(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

/// Two partitions of 10 WCU/s, a table of 1,000, no burst credit, a clock
/// that barely moves (a real minute is 0.6 model seconds: 6 units).
fn frozen_two_partitions() -> CapacityConfig {
    CapacityConfig {
        time_scale: 0.01,
        burst: false,
        ..CapacityConfig::provisioned(1000, 2, 10)
    }
}

async fn proxy_with(upstream: &Upstream, capacity: CapacityConfig) -> FaultProxy {
    let proxy = FaultProxy::start(upstream.local.url(), FaultConfig::default())
        .await
        .unwrap();
    proxy.set_capacity(Some(capacity)).unwrap();
    proxy
}

#[tokio::test]
async fn the_hot_partitions_items_come_back_unprocessed_and_the_others_are_written() {
    let upstream = Upstream::start().await;
    let table = upstream.table("capacity-batch").await;
    // No partition key configured: the proxy asks DescribeTable itself.
    let proxy = proxy_with(&upstream, frozen_two_partitions()).await;
    let sdk = sql2ddb_testkit::sdk::client(&proxy.url());
    let (hot, cold) = (keys_of(0, 20), keys_of(1, 5));
    // Hot and cold interleaved: 4 hot, 1 cold, …
    let mut batch = Vec::new();
    for (i, chunk) in hot.chunks(4).enumerate() {
        batch.extend(chunk.iter().map(|k| put(k)));
        batch.push(put(&cold[i]));
    }
    let out = sdk
        .batch_write_item()
        .request_items(&table, batch)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .unwrap();

    // Partition 0 had one second of 10 units: its first 10 items written,
    // its last 10 returned, in the order they were sent; partition 1's
    // five all written.
    let returned: Vec<String> = out.unprocessed_items().unwrap()[&table]
        .iter()
        .map(pk_of)
        .collect();
    assert_eq!(returned, hot[10..].to_vec());
    let stored = upstream.scan(&table).await;
    let mut expected: Vec<String> = hot[..10].iter().chain(&cold).cloned().collect();
    expected.sort();
    assert_eq!(stored.keys().cloned().collect::<Vec<_>>(), expected);
    let consumed = &out.consumed_capacity()[0];
    assert_eq!(consumed.table_name(), Some(table.as_str()));
    assert_eq!(consumed.capacity_units(), Some(15.0));

    // Only partition 0's items: none can be written, the call is refused.
    let again: Vec<WriteRequest> = returned.iter().map(|k| put(k)).collect();
    let err = sdk
        .batch_write_item()
        .request_items(&table, again)
        .send()
        .await
        .unwrap_err();
    let err = err.into_service_error();
    assert!(
        err.is_provisioned_throughput_exceeded_exception(),
        "{err:?}"
    );
    // A single put: refused on partition 0, written on partition 1.
    let single = |pk: &str| {
        sdk.put_item()
            .table_name(&table)
            .item("PK", AttributeValue::S(pk.into()))
            .item("SK", AttributeValue::S("B".into()))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
    };
    let err = single(&hot[0]).await.unwrap_err().into_service_error();
    assert!(
        err.is_provisioned_throughput_exceeded_exception(),
        "{err:?}"
    );
    let ok = single(&keys_of(1, 6)[5]).await.unwrap();
    let consumed = ok.consumed_capacity().unwrap();
    assert_eq!(consumed.capacity_units(), Some(1.0));
    assert_eq!(consumed.table().unwrap().capacity_units(), Some(1.0));

    let stats = proxy.capacity_stats().unwrap();
    assert_eq!(stats.calls, 4);
    assert_eq!(stats.partial_calls, 1);
    assert_eq!(stats.provisioned_throughput_exceeded, 2);
    assert_eq!(stats.throttled_calls(), 2);
    assert_eq!(stats.unprocessed_items, 10);
    assert_eq!(stats.refused_items, 10 + 10 + 1);
    let usage = &stats.tables[&table];
    assert_eq!(usage.partition_write_units, vec![10, 6]);
    assert_eq!(usage.partition_refused_writes, vec![21, 0]);
    assert_eq!(usage.write_units, 16);
}

#[tokio::test]
async fn an_on_demand_table_over_its_warm_throughput_answers_throttling() {
    let upstream = Upstream::start().await;
    let table = upstream.table("capacity-on-demand").await;
    let capacity = CapacityConfig {
        time_scale: 0.01,
        burst: false,
        ..CapacityConfig::on_demand(3, 4)
    };
    let proxy = proxy_with(&upstream, capacity).await;
    let sdk = sql2ddb_testkit::sdk::client(&proxy.url());
    let mut outcomes = Vec::new();
    for pk in ["a", "b", "c", "d", "e"] {
        let out = sdk
            .put_item()
            .table_name(&table)
            .item("PK", AttributeValue::S(pk.into()))
            .item("SK", AttributeValue::S("A".into()))
            .send()
            .await;
        outcomes.push(match out {
            Ok(_) => "written".to_string(),
            Err(e) => e
                .into_service_error()
                .meta()
                .code()
                .unwrap_or("?")
                .to_string(),
        });
    }
    // Three units of warm throughput, then the table refuses: 4 partitions
    // of 1,000 never do.
    assert_eq!(
        outcomes,
        [
            "written",
            "written",
            "written",
            "ThrottlingException",
            "ThrottlingException"
        ]
    );
    let stats = proxy.capacity_stats().unwrap();
    assert_eq!(stats.throttling, 2);
    assert_eq!(stats.tables[&table].refused_by_table, 2);
    assert_eq!(upstream.scan(&table).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_retries_the_hot_partitions_items_until_every_item_is_written() {
    let upstream = Upstream::start().await;
    let table = upstream.table("capacity-writer").await;
    // 100 WCU/s per partition, in real time: the hot partition's 400
    // items need 4 s of its capacity, far longer than the writer takes to
    // send them even on a loaded machine (at 4 model seconds per real
    // second, a slow run let the bucket refill and nothing was refused).
    let capacity = CapacityConfig {
        time_scale: 1.0,
        burst: false,
        ..CapacityConfig::provisioned(1000, 2, 100)
    };
    let proxy = proxy_with(&upstream, capacity).await;
    // 400 one-unit items in partition 0, 80 in partition 1: the cold
    // partition's second of capacity holds all of them.
    let all = items(0, 3000, 20);
    let pk = |m: &EncodedItem| {
        let item = m.decode().unwrap();
        match &item["PK"] {
            sql2ddb_core::AttrValue::S(s) => s.clone(),
            other => panic!("{other:?}"),
        }
    };
    let hot: Vec<EncodedItem> = all
        .iter()
        .filter(|m| partition(&pk(m), 2) == 0)
        .take(400)
        .cloned()
        .collect();
    let cold: Vec<EncodedItem> = all
        .iter()
        .filter(|m| partition(&pk(m), 2) == 1)
        .take(80)
        .cloned()
        .collect();
    let expected: Vec<EncodedItem> = hot.iter().chain(&cold).cloned().collect();
    let policy = RetryPolicy {
        base: Duration::from_millis(20),
        cap: Duration::from_millis(200),
        max_attempts: 1000,
        throttle_budget: Some(Duration::from_secs(120)),
    };
    let writer = BatchWriter::new(calls(&proxy.url()).await, &table, support::keys(), policy);
    let out = write_all(Arc::new(writer), expected.clone(), 100, 2).await;

    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert!(out.unwritten.is_empty(), "{:?}", out.unwritten.first());
    assert!(out.rejected.is_empty(), "{:?}", out.rejected.first());
    assert_eq!(out.written, 480);
    assert_same_items(&upstream.scan(&table).await, &expected);
    let stats = proxy.capacity_stats().unwrap();
    let usage = &stats.tables[&table];
    // Every item charged once: refused requests cost nothing.
    assert_eq!(usage.partition_write_units, vec![400, 80]);
    assert_eq!(usage.admitted_writes, 480);
    // Only the hot partition refused, and each refusal was sent again.
    assert!(usage.partition_refused_writes[0] > 0, "{usage:?}");
    assert_eq!(usage.partition_refused_writes[1], 0, "{usage:?}");
    assert_eq!(usage.refused_by_table, 0);
    assert_eq!(stats.refused_items, usage.refused_writes);
}

#[tokio::test]
async fn the_proxy_process_takes_the_model_from_a_file_and_counts_index_writes() {
    let upstream = Upstream::start().await;
    let table = upstream.table("capacity-process").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("capacity.toml");
    std::fs::write(
        &file,
        r#"
        time_scale = 0.01
        partitions = 2
        partition_wcu = 10
        burst = false
        partition_key = "PK"
        [table]
        mode = "provisioned"
        wcu = 1000
        [[gsi]]
        name = "ByStatus"
        partition_key = "status"
        projection = "KEYS_ONLY"
        "#,
    )
    .unwrap();
    let mut proxy = support::TestkitProcess::start(&[
        "proxy",
        "--upstream",
        upstream.local.url(),
        "--capacity",
        file.to_str().unwrap(),
    ])
    .await;
    let sdk = sql2ddb_testkit::sdk::client(&proxy.url);
    let cold = keys_of(1, 1);
    let out = sdk
        .put_item()
        .table_name(&table)
        .item("PK", AttributeValue::S(cold[0].clone()))
        .item("SK", AttributeValue::S("A".into()))
        .item("status", AttributeValue::S("new".into()))
        .item("body", AttributeValue::S("x".repeat(2000)))
        .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
        .send()
        .await
        .unwrap();
    // Two units for the item, one for its keys in the index.
    let consumed = out.consumed_capacity().unwrap();
    assert_eq!(consumed.capacity_units(), Some(3.0));
    assert_eq!(consumed.table().unwrap().capacity_units(), Some(2.0));
    let index = &consumed.global_secondary_indexes().unwrap()["ByStatus"];
    assert_eq!(index.capacity_units(), Some(1.0));

    proxy.terminate();
    let mut text = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut proxy.stdout, &mut text)
        .await
        .unwrap();
    let stats: serde_json::Value = serde_json::from_str(&text).unwrap();
    let usage = &stats["capacity"]["tables"][&table];
    assert_eq!(usage["write_units"], 3);
    assert_eq!(usage["index_write_units"], 1);
    assert_eq!(usage["partition_write_units"], json!([0, 2]));
    assert_eq!(stats["requests"], 1, "{text}");
}

#[tokio::test]
async fn the_key_schema_and_indexes_are_learnt_from_a_create_table_through_the_proxy() {
    use sql2ddb_testkit::sdk::types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
        Projection, ProjectionType, ScalarAttributeType,
    };
    let upstream = Upstream::start().await;
    let proxy = proxy_with(&upstream, frozen_two_partitions()).await;
    let sdk = sql2ddb_testkit::sdk::client(&proxy.url());
    let table = support::unique("capacity-learnt");
    let key = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .unwrap()
    };
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let index = |name: &str, pk: &str, projection| {
        GlobalSecondaryIndex::builder()
            .index_name(name)
            .key_schema(key(pk, KeyType::Hash))
            .projection(Projection::builder().projection_type(projection).build())
            .build()
            .unwrap()
    };
    sdk.create_table()
        .table_name(&table)
        .key_schema(key("Id", KeyType::Hash))
        .attribute_definitions(attr("Id"))
        .attribute_definitions(attr("G1"))
        .attribute_definitions(attr("G2"))
        .global_secondary_indexes(index("Everything", "G1", ProjectionType::All))
        .global_secondary_indexes(index("Keys", "G2", ProjectionType::KeysOnly))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .unwrap();
    let requests_after_create = proxy.stats().requests;
    // A 2 KB item with both index keys: 2 units, 2 for the ALL index, 1
    // for the KEYS_ONLY one.
    let out = sdk
        .put_item()
        .table_name(&table)
        .item("Id", AttributeValue::S(keys_of(1, 1)[0].clone()))
        .item("G1", AttributeValue::S("a".into()))
        .item("G2", AttributeValue::S("b".into()))
        .item("body", AttributeValue::S("x".repeat(1500)))
        .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
        .send()
        .await
        .unwrap();
    let consumed = out.consumed_capacity().unwrap();
    assert_eq!(consumed.capacity_units(), Some(5.0));
    let indexes = consumed.global_secondary_indexes().unwrap();
    assert_eq!(indexes["Everything"].capacity_units(), Some(2.0));
    assert_eq!(indexes["Keys"].capacity_units(), Some(1.0));
    // Learnt from the answer that passed through: no DescribeTable of its own.
    let stats = proxy.stats();
    assert_eq!(stats.requests, requests_after_create + 1);
    assert_eq!(stats.forwarded, stats.requests);
    let usage = &proxy.capacity_stats().unwrap().tables[&table];
    assert_eq!(usage.partition_write_units, vec![0, 2]);
}
