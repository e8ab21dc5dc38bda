//! Which part of the capacity model answers which call: writes are
//! metered in `serve.rs`, reads in `reads.rs`.

use bytes::Bytes;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};

use super::reads;
use super::serve::{self, Capacity};
use crate::upstream::{relay, Upstream};
use crate::wire::Body;

/// The proxy's answer to a call the model meters (`None`: the call is not
/// one, or cannot be read: the proxy goes on as without the model).
pub(crate) async fn intercept(
    upstream: &Upstream,
    capacity: &Capacity,
    op: &str,
    parts: &Parts,
    body: &Bytes,
) -> Option<Response<Body>> {
    match op {
        "DescribeTable" | "CreateTable" => {
            let resp = upstream.forward(op, parts, body.clone()).await;
            if let Some(resp) = resp.as_ref().filter(|r| r.status() == StatusCode::OK) {
                capacity.learn(resp.body());
            }
            Some(relay(resp, false))
        }
        "BatchWriteItem" => serve::batch_write(upstream, capacity, parts, body).await,
        "PutItem" | "UpdateItem" | "DeleteItem" => {
            serve::single_write(upstream, capacity, op, parts, body).await
        }
        "Scan" | "Query" | "GetItem" => reads::read(upstream, capacity, op, parts, body).await,
        "BatchGetItem" => reads::batch_get(upstream, capacity, parts, body).await,
        _ => None,
    }
}
