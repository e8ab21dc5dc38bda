//! Pointer writes against an in-process DynamoDB-compatible server: racing
//! writers and replays leave exactly the true max (or min) with its row's
//! attributes.

mod common;

use aws_sdk_dynamodb::Client;

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use rand::seq::SliceRandom;
use sql2ddb_core::{AttrValue, Item, KeyAttr, PointerUpdate};
use sql2ddb_dynamo::{
    ensure_table, write_pointer, Dynamo, LocalDynamo, PointerOutcome, RetryPolicy,
};
use sql2ddb_testkit::support::unique_name;

fn key(name: &str) -> KeyAttr {
    KeyAttr {
        name: name.into(),
        kind: sql2ddb_core::KeyType::S,
    }
}

fn keys() -> Vec<KeyAttr> {
    vec![key("PK"), key("SK")]
}

async fn table() -> (LocalDynamo, Dynamo, Client, String) {
    let local = LocalDynamo::start(None).await.unwrap();
    let (dynamo, client) = common::both(local.url());
    let name = unique_name("pointer");
    ensure_table(&dynamo, &name, &keys(), true).await.unwrap();
    (local, dynamo, client, name)
}

/// A candidate for order `value` of the LAST_ORDER (or FIRST_ORDER) pointer.
fn candidate(value: &str, is_max: bool) -> PointerUpdate {
    let fixed = if is_max { "LAST_ORDER" } else { "FIRST_ORDER" };
    PointerUpdate {
        name: fixed.into(),
        pk: AttrValue::S(fixed.into()),
        sk: Some(AttrValue::S(fixed.into())),
        attribute: "orderId".into(),
        value: AttrValue::N(value.into()),
        is_max,
        attributes: Item::from([(
            "createdAt".to_string(),
            AttrValue::S(format!("created-{value}")),
        )]),
        cleared: Vec::new(),
    }
}

async fn pointer_item(
    client: &Client,
    table: &str,
    fixed: &str,
) -> HashMap<String, AttributeValue> {
    client
        .get_item()
        .table_name(table)
        .key("PK", AttributeValue::S(fixed.into()))
        .key("SK", AttributeValue::S(fixed.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item()
        .cloned()
        .expect("the pointer item exists")
}

/// Writes `candidates` from 8 concurrent tasks; returns (written, already newer).
async fn race(client: &Dynamo, table: &str, candidates: Vec<PointerUpdate>) -> (usize, usize) {
    let candidates = Arc::new(candidates);
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (client, table, candidates) = (client.clone(), table.to_string(), candidates.clone());
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for c in candidates.iter().skip(t).step_by(8) {
                outcomes.push(
                    write_pointer(&client, &table, &keys(), c, &RetryPolicy::default())
                        .await
                        .unwrap(),
                );
            }
            outcomes
        }));
    }
    let mut written = 0;
    let mut newer = 0;
    for task in tasks {
        for outcome in task.await.unwrap() {
            match outcome {
                PointerOutcome::Written => written += 1,
                PointerOutcome::AlreadyNewer => newer += 1,
            }
        }
    }
    (written, newer)
}

/// Values whose text order differs from their numeric order (9 < 10 < 100),
/// negatives and fractions, some listed twice, shuffled.
fn shuffled_values() -> Vec<String> {
    let mut values: Vec<String> = (1..=120).map(|i| i.to_string()).collect();
    values.extend(["-7", "-7.5", "0.25", "99.5", "120", "9", "-7.5"].map(String::from));
    values.extend((1..=120).step_by(7).map(|i| i.to_string()));
    values.shuffle(&mut rand::rng());
    values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_writers_leave_the_true_max_and_replays_change_nothing() {
    let (local, dynamo, client, table) = table().await;
    let candidates: Vec<PointerUpdate> = shuffled_values()
        .iter()
        .map(|v| candidate(v, true))
        .collect();
    let total = candidates.len();
    let (written, newer) = race(&dynamo, &table, candidates.clone()).await;
    assert_eq!(written + newer, total);
    assert!(
        written >= 1 && written < total,
        "written {written} of {total}"
    );
    let item = pointer_item(&client, &table, "LAST_ORDER").await;
    assert_eq!(item["orderId"], AttributeValue::N("120".into()));
    assert_eq!(item["createdAt"], AttributeValue::S("created-120".into()));

    // Replaying every candidate (a redelivered batch) moves nothing.
    let (written, newer) = race(&dynamo, &table, candidates).await;
    assert_eq!((written, newer), (0, total));
    assert_eq!(pointer_item(&client, &table, "LAST_ORDER").await, item);
    local.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn min_pointer_keeps_the_smallest() {
    let (local, dynamo, client, table) = table().await;
    let candidates: Vec<PointerUpdate> = shuffled_values()
        .iter()
        .map(|v| candidate(v, false))
        .collect();
    let (written, _) = race(&dynamo, &table, candidates.clone()).await;
    assert!(written >= 1);
    let item = pointer_item(&client, &table, "FIRST_ORDER").await;
    assert_eq!(item["orderId"], AttributeValue::N("-7.5".into()));
    assert_eq!(item["createdAt"], AttributeValue::S("created--7.5".into()));
    let (written, _) = race(&dynamo, &table, candidates).await;
    assert_eq!(written, 0);
    local.stop().await;
}

#[tokio::test]
async fn pointer_leaves_other_attributes_alone_and_needs_the_full_key() {
    let (local, dynamo, client, table) = table().await;
    client
        .put_item()
        .table_name(&table)
        .item("PK", AttributeValue::S("LAST_ORDER".into()))
        .item("SK", AttributeValue::S("LAST_ORDER".into()))
        .item("orderId", AttributeValue::N("5".into()))
        .item("owner", AttributeValue::S("ops".into()))
        .send()
        .await
        .unwrap();
    let policy = RetryPolicy::default();
    let older = candidate("4", true);
    assert_eq!(
        write_pointer(&dynamo, &table, &keys(), &older, &policy)
            .await
            .unwrap(),
        PointerOutcome::AlreadyNewer
    );
    let same = candidate("5", true);
    assert_eq!(
        write_pointer(&dynamo, &table, &keys(), &same, &policy)
            .await
            .unwrap(),
        PointerOutcome::AlreadyNewer
    );
    let newer = candidate("6", true);
    assert_eq!(
        write_pointer(&dynamo, &table, &keys(), &newer, &policy)
            .await
            .unwrap(),
        PointerOutcome::Written
    );
    let item = pointer_item(&client, &table, "LAST_ORDER").await;
    assert_eq!(item["orderId"], AttributeValue::N("6".into()));
    assert_eq!(item["owner"], AttributeValue::S("ops".into()));
    assert_eq!(item["createdAt"], AttributeValue::S("created-6".into()));

    let mut no_sk = candidate("7", true);
    no_sk.sk = None;
    let e = write_pointer(&dynamo, &table, &keys(), &no_sk, &policy)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("sort key SK has no value"), "{e}");
    local.stop().await;
}

#[tokio::test]
async fn a_cleared_attribute_is_removed_with_the_move_and_an_older_candidate_removes_nothing() {
    let (local, dynamo, client, table) = table().await;
    let policy = RetryPolicy::default();
    let first = candidate("1", true);
    write_pointer(&dynamo, &table, &keys(), &first, &policy)
        .await
        .unwrap();
    // The newest row holds NULL in createdAt: the item keeps no older value.
    let mut newest = candidate("2", true);
    newest.attributes.clear();
    newest.cleared = vec!["createdAt".to_string()];
    assert_eq!(
        write_pointer(&dynamo, &table, &keys(), &newest, &policy)
            .await
            .unwrap(),
        PointerOutcome::Written
    );
    let item = pointer_item(&client, &table, "LAST_ORDER").await;
    assert_eq!(item["orderId"], AttributeValue::N("2".into()));
    assert!(!item.contains_key("createdAt"), "{item:?}");
    // An older candidate that clears removes nothing: its condition fails.
    let mut older = candidate("1", true);
    older.cleared = vec!["orderId".to_string(), "PK".to_string()];
    older.attributes.clear();
    assert_eq!(
        write_pointer(&dynamo, &table, &keys(), &older, &policy)
            .await
            .unwrap(),
        PointerOutcome::AlreadyNewer
    );
    assert_eq!(pointer_item(&client, &table, "LAST_ORDER").await, item);
    local.stop().await;
}
