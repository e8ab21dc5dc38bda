//! What the service may do beyond throttling, as the proxy does it: items
//! and keys answered unprocessed in another spelling of the same values, the
//! first sight of each item held back, errors on any operation (429, 408,
//! 5xx), an expired token once per credential, an answer held past the
//! client's patience after the request was applied.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value as Json};
use sql2ddb_core::Item;
use sql2ddb_testkit::sdk::error::ProvideErrorMetadata;
use sql2ddb_testkit::sdk::types::{AttributeValue, KeysAndAttributes, PutRequest, WriteRequest};
use sql2ddb_testkit::support::item_by_value;
use sql2ddb_testkit::{FaultConfig, FaultProxy, EVERY_OPERATION};
use support::{only, post, proxied, refused, TestkitProcess, Upstream};

/// Longest wait for something that must come (nothing here measures speed).
const PATIENCE: Duration = Duration::from_secs(60);

/// Item `i` in DynamoDB's JSON, with every kind of value the service can
/// spell in more than one way.
fn raw_item(i: usize) -> Json {
    json!({
        "PK": {"S": format!("U#{i:03} été")},
        "SK": {"S": "X"},
        "n": {"N": format!("{}", i * 10)},
        "price": {"N": format!("{i}.25")},
        "ns": {"NS": ["1", "2.5", "-3"]},
        "tags": {"SS": ["a", "b", "c"]},
        "blob": {"B": "AAEC"},
        "m": {"M": {"x": {"N": "1.5"}, "flag": {"BOOL": true}, "nothing": {"NULL": true}}},
        "l": {"L": [{"N": "7"}, {"S": "seven"}]}
    })
}

fn json_by_value(json: &Json) -> Item {
    item_by_value(&Item::deserialize(json).expect("an item in DynamoDB's JSON"))
}

fn pk(item: &Json) -> String {
    item["PK"]["S"]
        .as_str()
        .expect("PK is a string")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprocessed_items_come_back_as_the_same_values_in_another_text() {
    let (upstream, table, proxy) = proxied(
        "reencoded",
        only(|c| {
            c.seed = 4;
            c.unprocessed = 1.0;
            c.reencode = true;
        }),
    )
    .await;
    let sent: BTreeMap<String, Json> = (0..10).map(|i| (pk(&raw_item(i)), raw_item(i))).collect();
    let requests: Vec<Json> = sent
        .values()
        .map(|item| json!({"PutRequest": {"Item": item}}))
        .collect();
    let (status, text) = post(
        &proxy.url(),
        "BatchWriteItem",
        &json!({"RequestItems": {&table: requests}}),
        "local",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let answer: Json = serde_json::from_str(&text).unwrap();
    let returned = answer["UnprocessedItems"][&table].as_array().unwrap();
    assert!(!returned.is_empty() && returned.len() <= 10, "{text}");
    assert!(text.contains("\\u"), "a character as an escape: {text}");
    for req in returned {
        let got = &req["PutRequest"]["Item"];
        let want = &sent[&pk(got)];
        assert_eq!(json_by_value(got), json_by_value(want), "the same item");
        assert_ne!(got, want, "not the same JSON: {got}");
        assert_ne!(got["n"], want["n"], "the number spelled another way");
        assert!(!text.contains(&want.to_string()), "not the text sent");
        let names = |i: &Json| i.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_ne!(names(got), names(want), "attributes in another order");
    }
    // The rest went through, as sent.
    let held: BTreeSet<String> = returned
        .iter()
        .map(|r| pk(&r["PutRequest"]["Item"]))
        .collect();
    let stored = upstream.scan(&table).await;
    let expected: BTreeSet<String> = sent
        .keys()
        .filter(|k| !held.contains(*k))
        .cloned()
        .collect();
    assert_eq!(stored.keys().cloned().collect::<BTreeSet<_>>(), expected);
    let stats = proxy.stats();
    assert_eq!(stats.unprocessed, 1);
    assert_eq!(stats.unprocessed_items, held.len() as u64);
    assert_eq!(stats.reencoded_items, held.len() as u64);
    assert_eq!(stats.items_forwarded, expected.len() as u64);
}

/// One `BatchWriteItem` of `requests` to `table`, which must be answered.
async fn batch_write(
    client: &sql2ddb_testkit::sdk::Client,
    table: &str,
    requests: Vec<WriteRequest>,
) -> sql2ddb_testkit::sdk::operation::batch_write_item::BatchWriteItemOutput {
    client
        .batch_write_item()
        .request_items(table, requests)
        .send()
        .await
        .unwrap()
}

/// `items` as the SDK's write requests.
fn put_requests(items: &[Json]) -> Vec<WriteRequest> {
    items
        .iter()
        .map(|it| {
            let item = Item::deserialize(it).unwrap();
            let put = PutRequest::builder()
                .set_item(Some(sql2ddb_testkit::sdk::item_to_sdk(&item)))
                .build()
                .unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_sight_of_each_item_is_held_back_and_the_next_goes_through() {
    let (upstream, table, proxy) = proxied(
        "firstsight",
        only(|c| {
            c.first_sight_unprocessed = true;
            c.reencode = true;
        }),
    )
    .await;
    let client = sql2ddb_testkit::sdk::client(&proxy.url());
    let items: Vec<Json> = (0..10).map(raw_item).collect();
    let first = batch_write(&client, &table, put_requests(&items)).await;
    let returned = first.unprocessed_items().unwrap()[&table].clone();
    assert_eq!(returned.len(), 10, "every item is new");
    assert!(upstream.scan(&table).await.is_empty());

    // Sent again as the service returned them (another spelling): seen.
    let again = batch_write(&client, &table, returned).await;
    assert!(again.unprocessed_items().is_none_or(|u| u.is_empty()));
    let stored = upstream.scan(&table).await;
    assert_eq!(stored.len(), 10);
    for want in &items {
        let got = &stored[&pk(want)];
        let got = item_by_value(got);
        assert_eq!(got, json_by_value(want));
    }

    // Five seen, five new: the new ones are held.
    let mixed: Vec<Json> = (5..15).map(raw_item).collect();
    let third = batch_write(&client, &table, put_requests(&mixed)).await;
    let held: BTreeSet<String> = third.unprocessed_items().unwrap()[&table]
        .iter()
        .map(|r| match &r.put_request().unwrap().item()["PK"] {
            AttributeValue::S(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let new: BTreeSet<String> = (10..15).map(|i| pk(&raw_item(i))).collect();
    assert_eq!(held, new);
    let stats = proxy.stats();
    assert_eq!(
        (
            stats.unprocessed,
            stats.first_sight_items,
            stats.reencoded_items
        ),
        (2, 15, 15)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_gets_each_error_as_dynamodb_sends_it() {
    let (upstream, table, proxy) = proxied("everyop", FaultConfig::default()).await;
    let key = json!({"PK": {"S": "a"}, "SK": {"S": "b"}});
    let calls: [(&str, Json); 10] = [
        ("PutItem", json!({"TableName": table, "Item": key})),
        ("GetItem", json!({"TableName": table, "Key": key})),
        ("UpdateItem", json!({"TableName": table, "Key": key})),
        ("DeleteItem", json!({"TableName": table, "Key": key})),
        ("Query", json!({"TableName": table})),
        ("Scan", json!({"TableName": table})),
        ("DescribeTable", json!({"TableName": table})),
        ("CreateTable", json!({"TableName": "other"})),
        (
            "BatchGetItem",
            json!({"RequestItems": {&table: {"Keys": [key]}}}),
        ),
        (
            "BatchWriteItem",
            json!({"RequestItems": {&table: [{"PutRequest": {"Item": key}}]}}),
        ),
    ];
    type Set = fn(&mut FaultConfig);
    let kinds: [(Set, u16, &str); 6] = [
        (|c| c.internal_error = 1.0, 500, "InternalServerError"),
        (|c| c.service_unavailable = 1.0, 503, "ServiceUnavailable"),
        (
            |c| c.too_many_requests = 1.0,
            429,
            "TooManyRequestsException",
        ),
        (|c| c.request_timeout = 1.0, 408, "RequestTimeoutException"),
        (|c| c.throttling = 1.0, 400, "ThrottlingException"),
        (
            |c| c.provisioned_throughput_exceeded = 1.0,
            400,
            "ProvisionedThroughputExceededException",
        ),
    ];
    for (set, status, code) in kinds {
        proxy
            .set_config(only(|c| {
                set(c);
                c.operations = vec![EVERY_OPERATION.into()];
            }))
            .unwrap();
        for (op, body) in &calls {
            let (got, text) = post(&proxy.url(), op, body, "local").await;
            let answer: Json = serde_json::from_str(&text).unwrap();
            let type_name = answer["__type"].as_str().unwrap_or_default();
            assert_eq!(got, status, "{op}: {text}");
            assert!(type_name.ends_with(&format!("#{code}")), "{op}: {text}");
        }
    }
    assert!(
        upstream.scan(&table).await.is_empty(),
        "nothing went through"
    );
    let stats = proxy.stats();
    assert_eq!(stats.forwarded, 0);
    assert_eq!(
        [
            stats.internal_error,
            stats.service_unavailable,
            stats.too_many_requests,
            stats.request_timeout,
            stats.throttling,
            stats.provisioned_throughput_exceeded
        ],
        [10; 6]
    );

    // The SDK reads the codes as the service's.
    let client = sql2ddb_testkit::sdk::client(&proxy.url());
    for (set, status, code) in &kinds[2..4] {
        proxy
            .set_config(only(|c| {
                set(c);
                c.operations = vec!["GetItem".into()];
            }))
            .unwrap();
        let err = client
            .get_item()
            .table_name(&table)
            .key("PK", AttributeValue::S("a".into()))
            .key("SK", AttributeValue::S("b".into()))
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(*code), "{err:?}");
        let raw = err.raw_response().expect("an answer");
        assert_eq!(raw.status().as_u16(), *status);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_answered_once_per_credential() {
    let (_upstream, table, proxy) = proxied(
        "expired",
        only(|c| {
            c.expired_token = true;
            c.operations = vec![EVERY_OPERATION.into()];
        }),
    )
    .await;
    let describe = json!({"TableName": table});
    let mut answers = Vec::new();
    for credential in ["AKIDA", "AKIDA", "AKIDB", "AKIDC", "AKIDB", "AKIDC"] {
        let (status, text) = post(&proxy.url(), "DescribeTable", &describe, credential).await;
        let expired = text.contains("#ExpiredTokenException");
        assert_eq!(status == 400, expired, "{text}");
        answers.push(expired);
    }
    assert_eq!(answers, [true, false, true, true, false, false]);

    // The SDK's own credentials ("local" for an emulator) get theirs once.
    let client = sql2ddb_testkit::sdk::client(&proxy.url());
    let err = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ExpiredTokenException"), "{err:?}");
    client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    assert_eq!(proxy.stats().expired_token, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_comes_after_the_client_gave_up_and_the_request_was_applied() {
    let (upstream, table, proxy) = proxied(
        "slow",
        only(|c| {
            c.slow = 1.0;
            c.slow_for = Duration::from_secs(3600);
            c.slow_limit = Some(1);
            c.operations = vec!["PutItem".into()];
        }),
    )
    .await;
    let put = |pk: &str| json!({"TableName": table, "Item": {"PK": {"S": pk}, "SK": {"S": "x"}}});
    // An answer held an hour: a client giving an attempt 2 s gives up.
    let first = tokio::time::timeout(
        Duration::from_secs(2),
        post(&proxy.url(), "PutItem", &put("held"), "local"),
    )
    .await;
    assert!(first.is_err(), "answered: {first:?}");
    // Yet the write was applied.
    let start = Instant::now();
    while !upstream.scan(&table).await.contains_key("held") {
        assert!(start.elapsed() < PATIENCE, "the held request never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The limit is reached: the next one goes through.
    let (status, text) = tokio::time::timeout(
        PATIENCE,
        post(&proxy.url(), "PutItem", &put("next"), "local"),
    )
    .await
    .expect("answered at once");
    assert_eq!(status, 200, "{text}");
    assert_eq!(upstream.scan(&table).await.len(), 2);
    assert_eq!(proxy.stats().slow, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_a_batch_get_come_back_unprocessed_in_another_text() {
    let upstream = Upstream::start().await;
    let table = upstream.table("getkeys").await;
    let keys: Vec<Json> = (0..20)
        .map(|i| json!({"PK": {"S": format!("K#{i:02}")}, "SK": {"S": "x"}}))
        .collect();
    for key in &keys {
        let item = Item::deserialize(key).unwrap();
        upstream
            .client
            .put_item()
            .table_name(&table)
            .set_item(Some(sql2ddb_testkit::sdk::item_to_sdk(&item)))
            .send()
            .await
            .unwrap();
    }
    let proxy = FaultProxy::start(
        upstream.local.url(),
        only(|c| {
            c.seed = 2;
            c.unprocessed = 1.0;
            c.reencode = true;
            c.operations = vec!["BatchGetItem".into()];
        }),
    )
    .await
    .unwrap();
    let (status, text) = post(
        &proxy.url(),
        "BatchGetItem",
        &json!({"RequestItems": {&table: {"Keys": keys, "ConsistentRead": true}}}),
        "local",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\\u"), "{text}");
    let answer: Json = serde_json::from_str(&text).unwrap();
    let unprocessed = &answer["UnprocessedKeys"][&table];
    assert_eq!(
        unprocessed["ConsistentRead"], true,
        "the request's fields stay"
    );
    let held: Vec<String> = unprocessed["Keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(pk)
        .collect();
    let found: Vec<String> = answer["Responses"][&table]
        .as_array()
        .unwrap()
        .iter()
        .map(pk)
        .collect();
    assert!(!held.is_empty());
    let all: BTreeSet<String> = held.iter().chain(&found).cloned().collect();
    assert_eq!(all.len(), 20, "each key found or unprocessed, once");
    assert_eq!(held.len() + found.len(), 20);

    // The SDK asks again for what came back (half the calls hold some
    // back), and gets it.
    proxy
        .set_config(only(|c| {
            c.seed = 2;
            c.unprocessed = 0.5;
            c.reencode = true;
            c.operations = vec!["BatchGetItem".into()];
        }))
        .unwrap();
    let client = sql2ddb_testkit::sdk::client(&proxy.url());
    let mut pending: Vec<_> = keys
        .iter()
        .map(|k| sql2ddb_testkit::sdk::item_to_sdk(&Item::deserialize(k).unwrap()))
        .collect();
    let mut got = BTreeSet::new();
    for _ in 0..100 {
        if pending.is_empty() {
            break;
        }
        let request = KeysAndAttributes::builder()
            .set_keys(Some(pending))
            .build()
            .unwrap();
        let out = client
            .batch_get_item()
            .request_items(&table, request)
            .send()
            .await
            .unwrap();
        let items = out.responses().and_then(|r| r.get(&table));
        for item in items.into_iter().flatten() {
            assert!(got.insert(format!("{:?}", item["PK"])), "found twice");
        }
        pending = out
            .unprocessed_keys()
            .and_then(|u| u.get(&table))
            .map(|k| k.keys().to_vec())
            .unwrap_or_default();
    }
    assert_eq!(got.len(), 20);
    let stats = proxy.stats();
    assert_eq!(stats.unprocessed_items, stats.reencoded_items);
    assert!(stats.unprocessed >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_takes_the_service_faults_from_its_flags() {
    let upstream = Upstream::start().await;
    let table = upstream.table("flags").await;
    let mut proxy = TestkitProcess::start(&[
        "proxy",
        "--upstream",
        upstream.local.url(),
        "--expired-token",
        "--first-sight-unprocessed",
        "--reencode",
        "--operations",
        "*",
    ])
    .await;
    let client = sql2ddb_testkit::sdk::client(&proxy.url);
    let err = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ExpiredTokenException"));
    let items: Vec<Json> = (0..5).map(raw_item).collect();
    let out = batch_write(&client, &table, put_requests(&items)).await;
    assert_eq!(out.unprocessed_items().unwrap()[&table].len(), 5);

    proxy.terminate();
    use tokio::io::AsyncReadExt;
    let mut rest = String::new();
    proxy.stdout.read_to_string(&mut rest).await.unwrap();
    let stats: Json = serde_json::from_str(&rest).unwrap();
    assert_eq!(
        (
            &stats["expired_token"],
            &stats["first_sight_items"],
            &stats["reencoded_items"]
        ),
        (&json!(1), &json!(5), &json!(5)),
        "{stats}"
    );
    let status = tokio::time::timeout(PATIENCE, proxy.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());

    let both = refused(&[
        "proxy",
        "--upstream",
        upstream.local.url(),
        "--fault-rate",
        "0.1",
        "--every-fault-rate",
        "0.1",
    ]);
    assert!(both.contains("cannot be used with"), "{both}");
}
