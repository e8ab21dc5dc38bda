//! `sql2ddb-testkit dynamodb`: the in-memory DynamoDB-compatible server as a
//! process, reached through the AWS SDK the way the suite reaches an external
//! endpoint, and stopped by a signal.

mod support;

use std::time::Duration;

use sql2ddb_dynamo::ensure_table;
use sql2ddb_testkit::sdk::types::AttributeValue;
use support::{client as handle, keys, refused, TestkitProcess};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_dynamodb_until_sigterm() {
    let mut server = TestkitProcess::start(&["dynamodb", "--port", "0"]).await;
    let url = server.url.as_str();

    let client = sql2ddb_testkit::sdk::client(url);
    assert!(ensure_table(&handle(url).await, "served", &keys(), true)
        .await
        .unwrap());
    client
        .put_item()
        .table_name("served")
        .item("PK", AttributeValue::S("a".into()))
        .item("SK", AttributeValue::S("b".into()))
        .item("n", AttributeValue::N("42".into()))
        .send()
        .await
        .unwrap();
    let got = client
        .get_item()
        .table_name("served")
        .key("PK", AttributeValue::S("a".into()))
        .key("SK", AttributeValue::S("b".into()))
        .send()
        .await
        .unwrap();
    let item = got.item().expect("the item is there");
    assert_eq!(item.get("n"), Some(&AttributeValue::N("42".into())));

    server.terminate();
    let status = tokio::time::timeout(Duration::from_secs(20), server.child.wait())
        .await
        .expect("the server exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn the_binary_refuses_a_port_in_use() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let said = refused(&["dynamodb", "--port", &port]);
    assert!(said.contains("cannot bind"), "{said}");
}
