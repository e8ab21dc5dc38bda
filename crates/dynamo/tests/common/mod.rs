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
