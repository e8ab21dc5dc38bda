//! The batch calls go where the SDK's client goes when the endpoint is set
//! only in the environment (`AWS_ENDPOINT_URL_DYNAMODB`): a writer never
//! sends its items to AWS while the table checks go to a local endpoint.
//! Alone in its test binary, because it sets the process's environment.

use std::time::Duration;

use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::writer::BatchWriteApi;
use sql2ddb_dynamo::{connect_with_calls, Endpoint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Answers every request on a loopback port with an empty JSON object and
/// sends the target of each (`x-amz-target`) to the test.
async fn server() -> (String, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let header = |name: &str| {
                        head.lines().find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.trim()
                                .eq_ignore_ascii_case(name)
                                .then(|| v.trim().to_string())
                        })
                    };
                    let length: usize = header("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    if body.len() < length {
                        continue;
                    }
                    let _ = tx.send(header("x-amz-target").unwrap_or_default());
                    seen.clear();
                    let answer = r#"{"UnprocessedItems":{},"TableNames":[]}"#;
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if socket.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, rx)
}

#[tokio::test]
async fn an_endpoint_set_in_the_environment_is_where_batches_go() {
    let (url, mut targets) = server().await;
    // Edition 2021: setting the environment is safe; nothing else in this
    // test binary reads it concurrently.
    std::env::set_var("AWS_ENDPOINT_URL_DYNAMODB", &url);
    std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "secret");
    let (client, calls) = connect_with_calls(&Endpoint::Aws, Some("eu-west-1"))
        .await
        .unwrap();
    assert_eq!(calls.url(), format!("{url}/"));
    assert_eq!(calls.region(), "eu-west-1");

    client.list_tables().send().await.unwrap();
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::S("A".into()));
    let one = EncodedItem::new(
        &item,
        &[KeyAttr::new("PK", KeyType::S)],
        serde_json::Value::Null,
        1,
    );
    let unprocessed = tokio::time::timeout(Duration::from_secs(10), calls.batch_put("t", &[&one]))
        .await
        .expect("the batch call reached the server in the environment")
        .unwrap();
    assert!(unprocessed.is_empty());
    assert_eq!(
        targets.recv().await.unwrap(),
        "DynamoDB_20120810.ListTables"
    );
    assert_eq!(
        targets.recv().await.unwrap(),
        "DynamoDB_20120810.BatchWriteItem"
    );

    // Without the setting, AWS's regional endpoint for the region.
    std::env::remove_var("AWS_ENDPOINT_URL_DYNAMODB");
    let (_, calls) = connect_with_calls(&Endpoint::Aws, Some("eu-west-1"))
        .await
        .unwrap();
    assert_eq!(calls.url(), "https://dynamodb.eu-west-1.amazonaws.com/");
}
