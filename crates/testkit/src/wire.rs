//! The bits of DynamoDB's JSON protocol the proxy and the sink speak, and the
//! small HTTP server they share.

use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::Value as Json;
use sql2ddb_core::{item_size, write_units, Item};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// A response body.
pub(crate) type Body = Full<Bytes>;

/// Returned by a handler to close the connection without answering.
#[derive(Debug)]
pub(crate) struct Hangup;

impl std::fmt::Display for Hangup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection closed on purpose")
    }
}

impl std::error::Error for Hangup {}

/// The operation of a request (`BatchWriteItem`), from `X-Amz-Target`.
pub(crate) fn operation<B>(req: &Request<B>) -> String {
    req.headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("")
        .to_string()
}

/// A JSON answer with DynamoDB's content type.
pub(crate) fn json_response(status: StatusCode, body: &Json) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    resp
}

/// A 200 answer whose JSON body is already written.
pub(crate) fn text_response(body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    resp
}

/// An error answer as DynamoDB sends it: `__type` is `namespace#Code`.
pub(crate) fn error_response(status: StatusCode, type_name: &str, message: &str) -> Response<Body> {
    json_response(
        status,
        &serde_json::json!({ "__type": type_name, "message": message }),
    )
}

/// Size and billed write units of one write request of a `BatchWriteItem`
/// (`{"PutRequest": {"Item": …}}` or `{"DeleteRequest": {"Key": …}}`), by
/// DynamoDB's rules; `None` when it is not well formed.
pub(crate) fn request_units(request: &Json) -> Option<(u64, u64)> {
    let item = request
        .pointer("/PutRequest/Item")
        .or_else(|| request.pointer("/DeleteRequest/Key"))?;
    let size = item_size(&Item::deserialize(item).ok()?);
    Some((size as u64, write_units(size)))
}

/// Every write request of a `BatchWriteItem` body, with its table.
pub(crate) fn write_requests(body: &Json) -> Vec<(&str, &Json)> {
    body.get("RequestItems")
        .and_then(Json::as_object)
        .into_iter()
        .flatten()
        .flat_map(|(table, reqs)| {
            reqs.as_array()
                .into_iter()
                .flatten()
                .map(move |r| (table.as_str(), r))
        })
        .collect()
}

/// An HTTP/1 server on 127.0.0.1; stops (with its open connections) when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// Listens on `port` (0: any free port) and answers every request with `handler`.
    pub(crate) async fn start<H, F>(port: u16, handler: H) -> std::io::Result<Server>
    where
        H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = Result<Response<Body>, Hangup>> + Send + 'static,
    {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            // Owned here, so that aborting the server aborts its connections.
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else {
                            // Out of file descriptors, say: do not spin.
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            continue;
                        };
                        let handler = handler.clone();
                        connections.spawn(async move {
                            let service = hyper::service::service_fn(handler);
                            // A hang-up ends the connection with an error: expected.
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Ok(Server { addr, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}
