//! A service that answers with something other than DynamoDB's JSON (a proxy
//! or load balancer's HTML error page) still produces an error that says what
//! happened: the HTTP status and a short excerpt of the body.

use std::time::Duration;

use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr};
use sql2ddb_dynamo::{connect, ensure_table, BatchWriter, Endpoint, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PAGE: &str = "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n\
<body>\r\n<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n\
</body>\r\n</html>\r\n";

/// Answers every request on a loopback port with `500` and an HTML page.
async fn html_500_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                // Read the request head and its body before answering.
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let length = text[..head_end]
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if seen.len() >= head_end + 4 + length {
                            break;
                        }
                    }
                }
                let response = format!(
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    url
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
    let url = html_500_server().await;
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
