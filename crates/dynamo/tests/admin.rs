//! Table admin against an in-process DynamoDB-compatible server: creating a
//! table with global secondary indexes and billing, and refusing an existing
//! table that differs from the mapping before anything is written.

mod common;

use aws_sdk_dynamodb::Client;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, BillingMode};
use sql2ddb_core::KeyAttr;
use sql2ddb_dynamo::{
    ensure_table, ensure_table_spec, Billing, Dynamo, DynamoError, ErrorKind, GsiSpec, LocalDynamo,
    Projection, TableSpec,
};
use sql2ddb_testkit::support::unique_name as unique;

fn key(name: &str, kind: &str) -> KeyAttr {
    KeyAttr {
        name: name.into(),
        kind: kind.parse().unwrap(),
    }
}

async fn start() -> (LocalDynamo, Dynamo, Client) {
    let local = LocalDynamo::start(None).await.unwrap();
    let (dynamo, client) = common::both(local.url());
    (local, dynamo, client)
}

/// PK/SK table with GSI1 (GSI1PK S, GSI1SK N, KEYS_ONLY) and GSI2 (SK, PK: an
/// inverted index, INCLUDE status).
fn shop(name: &str) -> TableSpec {
    TableSpec {
        name: name.into(),
        keys: vec![key("PK", "S"), key("SK", "S")],
        gsis: vec![
            GsiSpec {
                name: "GSI1".into(),
                keys: vec![key("GSI1PK", "S"), key("GSI1SK", "N")],
                projection: Projection::KeysOnly,
            },
            GsiSpec {
                name: "GSI2".into(),
                keys: vec![key("SK", "S"), key("PK", "S")],
                projection: Projection::Include(vec!["status".into()]),
            },
        ],
        billing: Billing::OnDemand,
    }
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

async fn put(client: &Client, table: &str, attrs: &[(&str, AttributeValue)]) {
    let item: HashMap<String, AttributeValue> = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn creates_table_with_indexes_and_queries_through_each() {
    let (local, dynamo, client) = start().await;
    let table = unique("admin-gsi");
    let spec = shop(&table);
    assert!(ensure_table_spec(&dynamo, &spec, true).await.unwrap());
    // The second time the table exists and matches: nothing is created.
    assert!(!ensure_table_spec(&dynamo, &spec, true).await.unwrap());
    let desc = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let desc = desc.table().unwrap();
    assert_eq!(desc.global_secondary_indexes().len(), 2);
    assert_eq!(
        desc.billing_mode_summary().and_then(|b| b.billing_mode()),
        Some(&BillingMode::PayPerRequest)
    );

    for (order, total, status) in [
        ("1", "30", "open"),
        ("2", "10", "paid"),
        ("3", "20", "open"),
    ] {
        put(
            &client,
            &table,
            &[
                ("PK", s("CUSTOMER#7")),
                ("SK", s(&format!("ORDER#{order}"))),
                ("GSI1PK", s("STATUS#all")),
                ("GSI1SK", AttributeValue::N(total.into())),
                ("status", s(status)),
                ("note", s("not projected into GSI2")),
            ],
        )
        .await;
    }
    // An item without the GSI1 attributes: sparse, it is not in GSI1.
    put(
        &client,
        &table,
        &[("PK", s("CUSTOMER#7")), ("SK", s("PROFILE"))],
    )
    .await;

    let by_total = client
        .query()
        .table_name(&table)
        .index_name("GSI1")
        .key_condition_expression("GSI1PK = :p")
        .expression_attribute_values(":p", s("STATUS#all"))
        .send()
        .await
        .unwrap();
    let sks: Vec<&str> = by_total
        .items()
        .iter()
        .map(|i| i["SK"].as_s().unwrap().as_str())
        .collect();
    // Ordered by the N sort key: 10, 20, 30.
    assert_eq!(sks, ["ORDER#2", "ORDER#3", "ORDER#1"]);
    assert!(!by_total.items()[0].contains_key("status"), "KEYS_ONLY");

    let inverted = client
        .query()
        .table_name(&table)
        .index_name("GSI2")
        .key_condition_expression("SK = :s")
        .expression_attribute_values(":s", s("ORDER#3"))
        .send()
        .await
        .unwrap();
    assert_eq!(inverted.items().len(), 1);
    let item = &inverted.items()[0];
    assert_eq!(item["PK"], s("CUSTOMER#7"));
    assert_eq!(item["status"], s("open"));
    assert!(!item.contains_key("note"), "INCLUDE projects only status");
    local.stop().await;
}

#[tokio::test]
async fn provisioned_billing_applies_to_table_and_indexes() {
    let (local, dynamo, client) = start().await;
    let table = unique("admin-prov");
    let mut spec = shop(&table);
    spec.billing = Billing::Provisioned { read: 5, write: 7 };
    assert!(ensure_table_spec(&dynamo, &spec, true).await.unwrap());
    let desc = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let desc = desc.table().unwrap();
    let t = desc.provisioned_throughput().unwrap();
    assert_eq!(
        (t.read_capacity_units(), t.write_capacity_units()),
        (Some(5), Some(7))
    );
    for g in desc.global_secondary_indexes() {
        let t = g.provisioned_throughput().unwrap();
        assert_eq!(
            (t.read_capacity_units(), t.write_capacity_units()),
            (Some(5), Some(7)),
            "{:?}",
            g.index_name()
        );
    }
    local.stop().await;
}

#[tokio::test]
async fn existing_table_that_differs_is_an_error() {
    let (local, dynamo, _client) = start().await;
    let table = unique("admin-diff");
    let spec = shop(&table);
    ensure_table_spec(&dynamo, &spec, true).await.unwrap();

    // Other key schema.
    let mut other_keys = spec.clone();
    other_keys.keys = vec![key("PK", "S"), key("SK", "N")];
    let e = ensure_table_spec(&dynamo, &other_keys, true)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Table);
    assert!(matches!(e, DynamoError::KeySchemaMismatch { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("table {table} exists with key schema PK (S), SK (S), but the mapping declares PK (S), SK (N)")
    );
    // The keys-only path sees the same mismatch.
    let e = ensure_table(&dynamo, &table, &[key("id", "S")], false)
        .await
        .unwrap_err();
    assert!(matches!(e, DynamoError::KeySchemaMismatch { .. }), "{e}");

    // A declared index the table lacks.
    let mut missing = spec.clone();
    missing.gsis.push(GsiSpec {
        name: "GSI3".into(),
        keys: vec![key("GSI3PK", "S")],
        projection: Projection::All,
    });
    let e = ensure_table_spec(&dynamo, &missing, true)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DynamoError::IndexMismatch { index, .. } if index == "GSI3"),
        "{e}"
    );
    assert!(e.to_string().contains("no such index"), "{e}");

    // An index the mapping does not declare.
    let mut undeclared = spec.clone();
    undeclared.gsis.truncate(1);
    let e = ensure_table_spec(&dynamo, &undeclared, true)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DynamoError::IndexMismatch { index, .. } if index == "GSI2"),
        "{e}"
    );

    // Other index keys, other projection.
    let mut other_gsi_keys = spec.clone();
    other_gsi_keys.gsis[0].keys[1].kind = sql2ddb_core::KeyType::S;
    let e = ensure_table_spec(&dynamo, &other_gsi_keys, true)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("GSI1SK (N), the mapping declares"),
        "{e}"
    );
    let mut other_projection = spec.clone();
    other_projection.gsis[1].projection = Projection::All;
    let e = ensure_table_spec(&dynamo, &other_projection, true)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("its projection is INCLUDE [status], the mapping declares ALL"),
        "{e}"
    );

    // A missing table without create.
    let e = ensure_table_spec(&dynamo, &shop(&unique("admin-none")), false)
        .await
        .unwrap_err();
    assert!(matches!(e, DynamoError::TableMissing { .. }), "{e}");
    local.stop().await;
}
