//! The writer's `BatchWriteItem` body, serialised once from our items, is
//! the request the SDK itself would send for the same items: captured on the
//! wire from both, compared as JSON, with its length and signature in place.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::convert::item_to_sdk;
use sql2ddb_dynamo::writer::BatchWriteApi;
use sql2ddb_dynamo::{connect, Endpoint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One request as it arrived: lower-cased header lines and the body.
struct Captured {
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// A loopback server that answers every `BatchWriteItem` with nothing
/// unprocessed and hands each request it received to the test.
async fn capture_server() -> (String, mpsc::UnboundedReceiver<Captured>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                loop {
                    let Some(request) = read_request(&mut socket).await else {
                        return;
                    };
                    let _ = tx.send(request);
                    let answer = r#"{"UnprocessedItems":{}}"#;
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

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Captured> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        seen.extend_from_slice(&buf[..n]);
        let Some(head_end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&seen[..head_end]).to_string();
        let headers: HashMap<String, String> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = headers.get("content-length")?.parse().ok()?;
        if seen.len() >= head_end + 4 + length {
            let body = seen[head_end + 4..head_end + 4 + length].to_vec();
            return Some(Captured { headers, body });
        }
    }
}

fn items() -> Vec<Item> {
    let mut a = Item::new();
    a.insert("PK".into(), AttrValue::S("ORDER#\"1\"\n€".into()));
    a.insert("n".into(), AttrValue::N("-12.5".into()));
    a.insert(
        "big".into(),
        AttrValue::N("1234567890123456789012345678901234567".into()),
    );
    a.insert("b".into(), AttrValue::B(vec![0, 1, 255]));
    a.insert("t".into(), AttrValue::Bool(true));
    a.insert("z".into(), AttrValue::Null);
    a.insert("ss".into(), AttrValue::SS(vec!["a".into(), "é".into()]));
    a.insert("ns".into(), AttrValue::NS(vec!["1".into(), "2.5".into()]));
    a.insert("bs".into(), AttrValue::BS(vec![vec![1], vec![2, 3]]));
    let mut inner = Item::new();
    inner.insert(
        "k".into(),
        AttrValue::L(vec![AttrValue::N("1".into()), AttrValue::Null]),
    );
    a.insert("m".into(), AttrValue::M(inner));
    let mut b = Item::new();
    b.insert("PK".into(), AttrValue::S("B".into()));
    b.insert("l".into(), AttrValue::L(vec![]));
    vec![a, b]
}

#[tokio::test]
async fn the_body_serialised_once_is_the_request_the_sdk_sends() {
    let (url, mut requests) = capture_server().await;
    let client = connect(&Endpoint::Url(url), Some("us-east-1"))
        .await
        .unwrap();
    let items = items();

    // The SDK's own request for these items.
    let puts: Vec<WriteRequest> = items
        .iter()
        .map(|item| {
            let put = PutRequest::builder()
                .set_item(Some(item_to_sdk(item)))
                .build()
                .unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect();
    client
        .batch_write_item()
        .request_items("shop-t", puts)
        .send()
        .await
        .unwrap();
    let sdk = requests.recv().await.unwrap();

    // The writer's, from the items' text serialised when they were mapped.
    let keys = [KeyAttr::new("PK", KeyType::S)];
    let encoded: Vec<EncodedItem> = items
        .iter()
        .map(|item| EncodedItem::new(item, &keys, serde_json::Value::Null, 0))
        .collect();
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    let unprocessed = client.batch_put("shop-t", &refs).await.unwrap();
    assert!(unprocessed.is_empty());
    let ours = requests.recv().await.unwrap();

    let json = |c: &Captured| serde_json::from_slice::<serde_json::Value>(&c.body).unwrap();
    assert_eq!(json(&ours), json(&sdk));
    assert_eq!(
        ours.headers["content-length"],
        ours.body.len().to_string(),
        "the length of the body sent"
    );
    assert_eq!(
        ours.headers["x-amz-target"],
        "DynamoDB_20120810.BatchWriteItem"
    );
    assert!(
        ours.headers["authorization"].contains("Signature="),
        "signed: {:?}",
        ours.headers
    );
}

/// The names in the `SignedHeaders=` list of a request's authorization.
fn signed_headers(c: &Captured) -> Vec<String> {
    let auth = &c.headers["authorization"];
    let list = auth
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no SignedHeaders in {auth}"));
    list.split(';').map(str::to_string).collect()
}

#[tokio::test]
async fn calls_carry_the_user_agent_built_once_and_no_per_call_telemetry() {
    let (url, mut requests) = capture_server().await;
    let client = connect(&Endpoint::Url(url.clone()), Some("us-east-1"))
        .await
        .unwrap();
    // A plain SDK client of the same configuration, for the headers the
    // SDK itself writes on every call.
    let plain_config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .endpoint_url(url)
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            None,
            None,
            "test",
        ))
        .build();
    let plain = aws_sdk_dynamodb::Client::from_conf(plain_config);

    let keys = [KeyAttr::new("PK", KeyType::S)];
    let encoded: Vec<EncodedItem> = items()
        .iter()
        .map(|item| EncodedItem::new(item, &keys, serde_json::Value::Null, 0))
        .collect();
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    for _ in 0..2 {
        assert!(client.batch_put("shop-t", &refs).await.unwrap().is_empty());
    }
    let first = requests.recv().await.unwrap();
    let second = requests.recv().await.unwrap();
    // Other operations of the client carry the same headers.
    client.list_tables().send().await.ok();
    let other = requests.recv().await.unwrap();
    plain.list_tables().send().await.ok();
    let sdk = requests.recv().await.unwrap();

    for c in [&first, &second, &other] {
        assert!(
            !c.headers.contains_key("amz-sdk-invocation-id"),
            "no invocation id: {:?}",
            c.headers
        );
        assert!(
            !c.headers.contains_key("amz-sdk-request"),
            "no attempt header: {:?}",
            c.headers
        );
        assert_eq!(c.headers["user-agent"], first.headers["user-agent"]);
        assert_eq!(
            c.headers["x-amz-user-agent"],
            first.headers["x-amz-user-agent"]
        );
        // Written before signing: the signature covers it.
        assert!(
            signed_headers(c).contains(&"x-amz-user-agent".to_string()),
            "x-amz-user-agent is signed: {}",
            c.headers["authorization"]
        );
        // Every header sent is signed, but the two a signer leaves out.
        let mut sent: Vec<String> = c
            .headers
            .keys()
            .filter(|k| *k != "authorization" && *k != "user-agent")
            .cloned()
            .collect();
        sent.sort();
        assert_eq!(signed_headers(c), sent);
    }
    // What the SDK writes on every call, we write once: the same user agent
    // but for the per-call feature codes (`m/…`) and the HTTP client's name
    // (`md/…`).
    assert!(sdk.headers.contains_key("amz-sdk-invocation-id"));
    let without_per_call = |ua: &str| -> String {
        ua.split(' ')
            .filter(|part| !part.starts_with("m/") && !part.starts_with("md/"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for header in ["user-agent", "x-amz-user-agent"] {
        let ours = &first.headers[header];
        assert_eq!(ours, &without_per_call(&sdk.headers[header]), "{header}");
        let api = format!("api/dynamodb/{}", aws_sdk_dynamodb::meta::PKG_VERSION);
        assert!(ours.split(' ').any(|part| part == api), "{header}: {ours}");
    }
}
