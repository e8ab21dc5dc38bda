//! A loopback HTTP server for the tests of a client: it answers every
//! request as the test says and hands each request it received to the test,
//! parsed by hyper as the proxy's and the sink's are.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use crate::wire::{Body, Hangup, Server};

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Captured {
    /// `POST`, `GET`, …
    pub method: String,
    /// The path and query.
    pub path: String,
    /// Header names lower-cased; a repeated header keeps its last value.
    pub headers: HashMap<String, String>,
    /// The body, whole.
    pub body: Vec<u8>,
}

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub struct Answer {
    status: StatusCode,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    /// `status` with `body` as DynamoDB's JSON (`application/x-amz-json-1.0`).
    pub fn json(status: u16, body: impl Into<String>) -> Answer {
        Answer {
            status: StatusCode::from_u16(status).expect("an HTTP status"),
            headers: vec![(
                CONTENT_TYPE.as_str().to_string(),
                "application/x-amz-json-1.0".to_string(),
            )],
            body: body.into(),
        }
    }

    /// The answer with the header `name` set to `value` (replacing one of
    /// the same name).
    pub fn header(mut self, name: &str, value: &str) -> Answer {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.to_string()));
        self
    }

    /// The answer with `Connection: close`: the server closes the
    /// connection after it.
    pub fn closing(self) -> Answer {
        self.header("connection", "close")
    }

    fn response(&self) -> Response<Body> {
        let mut resp = Response::new(Full::new(Bytes::from(self.body.clone())));
        *resp.status_mut() = self.status;
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).expect("a header name");
            let value = HeaderValue::from_str(value).expect("a header value");
            resp.headers_mut().insert(name, value);
        }
        resp
    }
}

/// The requests an [`answering_server`] received, in order. The server
/// runs as long as this is kept.
#[derive(Debug)]
pub struct Requests {
    received: mpsc::UnboundedReceiver<Captured>,
    _server: Server,
}

impl Requests {
    /// The next request, waiting for it; `None` once the server is gone.
    pub async fn recv(&mut self) -> Option<Captured> {
        self.received.recv().await
    }

    /// The next request if one has arrived.
    pub fn try_recv(&mut self) -> Option<Captured> {
        self.received.try_recv().ok()
    }
}

/// A server on 127.0.0.1 that answers every request with `answer`'s
/// answer to it: its `http://127.0.0.1:PORT` and the requests it receives.
pub async fn answering_server(
    answer: impl Fn(&Captured) -> Answer + Send + Sync + 'static,
) -> (String, Requests) {
    let (tx, received) = mpsc::unbounded_channel();
    let answer = Arc::new(answer);
    let server = Server::start(0, move |req: Request<hyper::body::Incoming>| {
        let (tx, answer) = (tx.clone(), answer.clone());
        async move {
            let captured = capture(req).await?;
            let response = answer(&captured).response();
            let _ = tx.send(captured);
            Ok::<_, Hangup>(response)
        }
    })
    .await
    .expect("a loopback port");
    let url = server.url();
    (
        url,
        Requests {
            received,
            _server: server,
        },
    )
}

async fn capture(req: Request<hyper::body::Incoming>) -> Result<Captured, Hangup> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map_err(|_| Hangup)?.to_bytes();
    let headers = parts
        .headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
        })
        .collect();
    Ok(Captured {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_string(), |p| p.to_string()),
        headers,
        body: body.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn it_answers_as_told_and_hands_over_the_request_whole() {
        let (url, mut requests) = answering_server(|c| {
            Answer::json(503, format!("{{\"len\":{}}}", c.body.len()))
                .header("x-amzn-requestid", "r1")
        })
        .await;
        let mut socket = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
            .await
            .unwrap();
        socket
            .write_all(b"POST /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Amz-Target: T.Op\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .await
            .unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("x-amzn-requestid: r1"), "{answer}");
        assert!(answer.ends_with("{\"len\":5}"), "{answer}");

        let got = requests.recv().await.unwrap();
        assert_eq!(got.method, "POST");
        assert_eq!(got.path, "/a?b=1");
        assert_eq!(got.headers["x-amz-target"], "T.Op");
        assert_eq!(got.body, b"hello");
        assert!(requests.try_recv().is_none());
    }
}
