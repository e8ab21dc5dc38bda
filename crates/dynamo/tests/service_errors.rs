//! A service that answers with something other than DynamoDB's JSON (a proxy
//! or load balancer's HTML error page) still produces an error that says what
//! happened: the HTTP status and a short excerpt of the body.

use std::time::Duration;

use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr};
use sql2ddb_dynamo::{connect, ensure_table, BatchWriter, Endpoint, RetryPolicy};
use sql2ddb_testkit::support::{answering_server, Answer, Requests};

const PAGE: &str = "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n\
<body>\r\n<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n\
</body>\r\n</html>\r\n";

/// Answers every request on a loopback port with `500` and an HTML page;
/// the server runs as long as the returned handle is kept.
async fn html_500_server() -> (String, Requests) {
    answering_server(|_| {
        Answer::json(500, PAGE)
            .header("content-type", "text/html")
            .closing()
    })
    .await
}

fn keys() -> Vec<KeyAttr> {
    vec![KeyAttr {
        name: "PK".into(),
        kind: sql2ddb_core::KeyType::S,
    }]
}

fn assert_says_500(message: &str) {
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(message.contains("500 Internal Server Error"), "{message}");
    assert!(message.contains("nginx/1.25.3"), "{message}");
    assert!(!message.contains("no message"), "{message}");
    assert!(
        !message.contains('<') && !message.contains('\n'),
        "{message}"
    );
}

#[tokio::test]
async fn nothing_lost_12_http_500_html_shows_status_and_body() {
    let (url, _server) = html_500_server().await;
    let dynamo = connect(&Endpoint::Url(url), Some("us-east-1"))
        .await
        .unwrap();
    let calls = dynamo.calls().clone();

    // DescribeTable, called once by the table check.
    let err = ensure_table(&dynamo, "t", &keys(), false)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("DescribeTable on t failed"),
        "{message}"
    );
    assert_says_500(&message);

    // BatchWriteItem: retried as a 5xx, then failed with the same reason.
    let policy = RetryPolicy {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(5),
        max_attempts: 2,
        throttle_budget: None,
    };
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::S("K1".into()));
    let out = BatchWriter::new(calls, "t", keys(), policy)
        .write(vec![EncodedItem::new(
            &item,
            &keys(),
            serde_json::json!({ "id": 1 }),
            10,
        )])
        .await;
    assert_eq!(out.written, 0);
    assert_eq!(out.retries, 1);
    let (_, reason) = out.failed.first().expect("the item failed");
    assert_says_500(reason);
}
