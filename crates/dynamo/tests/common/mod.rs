//! A loopback server for the calls' tests: it answers every request as it
//! is told and hands each request it received to the test.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::HashMap;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One request as it arrived: its path, lower-cased header lines and the body.
pub struct Captured {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// What a server answers: status line, extra header lines, body.
pub type Answer = (&'static str, String, String);

/// The answer with nothing unprocessed.
pub fn all_processed(_: &Captured) -> Answer {
    (
        "200 OK",
        String::new(),
        r#"{"UnprocessedItems":{}}"#.to_string(),
    )
}

/// A loopback server that answers every request with `answer` and hands
/// each request it received to the test.
pub async fn answering_server(
    answer: impl Fn(&Captured) -> Answer + Send + Sync + 'static,
) -> (String, mpsc::UnboundedReceiver<Captured>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (tx, answer) = (tx.clone(), answer.clone());
            tokio::spawn(async move {
                loop {
                    let Some(request) = read_request(&mut socket).await else {
                        return;
                    };
                    let (status, extra, body) = answer(&request);
                    let _ = tx.send(request);
                    let response = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.0\r\n{extra}Content-Length: {}\r\n\r\n{body}",
                        body.len()
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

/// A loopback server that answers every `BatchWriteItem` with nothing
/// unprocessed.
pub async fn capture_server() -> (String, mpsc::UnboundedReceiver<Captured>) {
    answering_server(all_processed).await
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
        let path = head.split(' ').nth(1).unwrap_or_default().to_string();
        let headers: HashMap<String, String> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = headers.get("content-length")?.parse().ok()?;
        if seen.len() >= head_end + 4 + length {
            let body = seen[head_end + 4..head_end + 4 + length].to_vec();
            return Some(Captured {
                path,
                headers,
                body,
            });
        }
    }
}

/// sql2ddb's handle of the DynamoDB-compatible server at `url` and a bare
/// SDK client of the same configuration, to look at tables directly.
pub fn both(url: &str) -> (sql2ddb_dynamo::Dynamo, aws_sdk_dynamodb::Client) {
    let config = aws_types::SdkConfig::builder()
        .region(aws_types::region::Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new("local", "local", None, None, "test"),
            ),
        )
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .build();
    (
        sql2ddb_dynamo::Dynamo::from_config(&config),
        aws_sdk_dynamodb::Client::new(&config),
    )
}

/// Converts one value to the SDK's type.
pub fn to_sdk(v: &sql2ddb_core::AttrValue) -> aws_sdk_dynamodb::types::AttributeValue {
    match v {
        sql2ddb_core::AttrValue::S(s) => aws_sdk_dynamodb::types::AttributeValue::S(s.clone()),
        sql2ddb_core::AttrValue::N(n) => aws_sdk_dynamodb::types::AttributeValue::N(n.clone()),
        sql2ddb_core::AttrValue::B(b) => aws_sdk_dynamodb::types::AttributeValue::B(
            aws_sdk_dynamodb::primitives::Blob::new(b.clone()),
        ),
        sql2ddb_core::AttrValue::Bool(b) => aws_sdk_dynamodb::types::AttributeValue::Bool(*b),
        sql2ddb_core::AttrValue::Null => aws_sdk_dynamodb::types::AttributeValue::Null(true),
        sql2ddb_core::AttrValue::L(l) => {
            aws_sdk_dynamodb::types::AttributeValue::L(l.iter().map(to_sdk).collect())
        }
        sql2ddb_core::AttrValue::M(m) => aws_sdk_dynamodb::types::AttributeValue::M(
            m.iter().map(|(k, v)| (k.clone(), to_sdk(v))).collect(),
        ),
        sql2ddb_core::AttrValue::SS(s) => aws_sdk_dynamodb::types::AttributeValue::Ss(s.clone()),
        sql2ddb_core::AttrValue::NS(s) => aws_sdk_dynamodb::types::AttributeValue::Ns(s.clone()),
        sql2ddb_core::AttrValue::BS(s) => aws_sdk_dynamodb::types::AttributeValue::Bs(
            s.iter()
                .map(|b| aws_sdk_dynamodb::primitives::Blob::new(b.clone()))
                .collect(),
        ),
    }
}

/// Converts an item to the SDK's map.
pub fn item_to_sdk(
    item: &sql2ddb_core::Item,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    item.iter().map(|(k, v)| (k.clone(), to_sdk(v))).collect()
}
