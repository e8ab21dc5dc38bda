//! The batch calls go where the SDK's client goes when the endpoint is set
//! only in the environment (`AWS_ENDPOINT_URL_DYNAMODB`): a writer never
//! sends its items to AWS while the table checks go to a local endpoint.
//! Alone in its test binary, because it sets the process's environment.

use std::time::Duration;

use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::writer::BatchWriteApi;
use sql2ddb_dynamo::{connect, Endpoint};

mod common;

use common::capture_server;

#[tokio::test]
async fn an_endpoint_set_in_the_environment_is_where_batches_go() {
    let (url, mut requests) = capture_server().await;
    // Edition 2021: setting the environment is safe; nothing else in this
    // test binary reads it concurrently.
    std::env::set_var("AWS_ENDPOINT_URL_DYNAMODB", &url);
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "secret");
    let dynamo = connect(&Endpoint::Aws, Some("eu-west-1")).await.unwrap();
    let calls = dynamo.calls().clone();
    assert_eq!(dynamo.region(), Some("eu-west-1"));
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::S("A".into()));
    let one = EncodedItem::new(
        &item,
        &[KeyAttr::new("PK", KeyType::S)],
        serde_json::Value::Null,
        1,
    );
    let unprocessed = tokio::time::timeout(
        Duration::from_secs(10),
        calls.batch_put("t", &[KeyAttr::new("PK", KeyType::S)], &[&one]),
    )
    .await
    .expect("the batch call reached the server in the environment")
    .unwrap();
    assert!(unprocessed.is_empty());
    let target = |c: common::Captured| c.headers["x-amz-target"].clone();
    let first = target(requests.recv().await.unwrap());
    assert_eq!(first, "DynamoDB_20120810.BatchWriteItem");
}
