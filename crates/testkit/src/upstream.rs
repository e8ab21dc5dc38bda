//! The proxy's way to the upstream server: forwarding a request, relaying
//! its answer, and the counts of what went through. The fault paths
//! (`proxy.rs`, `hold.rs`) and the capacity model (`capacity/`) all forward
//! through it, so none of them imports another's state.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde_json::Value as Json;

use crate::wire::{error_response, request_units, write_requests, Body};

/// What the proxy did, per fault kind, and what reached the upstream server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProxyStats {
    /// Requests received.
    pub requests: u64,
    /// Requests forwarded to the upstream server (whole or in part).
    pub forwarded: u64,
    /// Write requests of forwarded `BatchWriteItem` calls.
    pub items_forwarded: u64,
    /// Answered `ProvisionedThroughputExceededException`.
    pub provisioned_throughput_exceeded: u64,
    /// Answered `ThrottlingException`.
    pub throttling: u64,
    /// Answered HTTP 500.
    pub internal_error: u64,
    /// Answered HTTP 503.
    pub service_unavailable: u64,
    /// `BatchWriteItem` and `BatchGetItem` calls answered with part of their
    /// items (keys) unprocessed.
    pub unprocessed: u64,
    /// Items (keys) held back and answered as unprocessed.
    pub unprocessed_items: u64,
    /// Of those, items held back because the proxy saw them the first time.
    pub first_sight_items: u64,
    /// Of those, items (keys) answered re-encoded.
    pub reencoded_items: u64,
    /// Answered HTTP 429 `TooManyRequestsException`.
    pub too_many_requests: u64,
    /// Answered HTTP 408 `RequestTimeoutException`.
    pub request_timeout: u64,
    /// Answered `ExpiredTokenException` (once per credential).
    pub expired_token: u64,
    /// Forwarded, then answered only after the slow hold.
    pub slow: u64,
    /// Connections closed without an answer, before forwarding the request.
    pub dropped_before_forward: u64,
    /// Connections closed without an answer, after the upstream server had the request.
    pub dropped_after_forward: u64,
    /// Requests delayed.
    pub delayed: u64,
    /// Write units of the `BatchWriteItem` items the upstream server accepted,
    /// per second since the proxy started (index 0: the first second), each
    /// item rounded up to 1 KB as DynamoDB bills it, counted when forwarded.
    pub write_units_per_second: Vec<u64>,
}

impl ProxyStats {
    /// Requests answered with a fault (delays not counted).
    pub fn faults(&self) -> u64 {
        self.provisioned_throughput_exceeded
            + self.throttling
            + self.internal_error
            + self.service_unavailable
            + self.unprocessed
            + self.dropped_before_forward
            + self.dropped_after_forward
            + self.too_many_requests
            + self.request_timeout
            + self.expired_token
            + self.slow
    }

    /// The most write units accepted in any `seconds` consecutive seconds.
    pub fn busiest_window(&self, seconds: usize) -> u64 {
        let series = &self.write_units_per_second;
        if series.len() <= seconds {
            return series.iter().sum();
        }
        series
            .windows(seconds)
            .map(|w| w.iter().sum())
            .max()
            .unwrap_or(0)
    }

    /// All write units accepted.
    pub fn write_units(&self) -> u64 {
        self.write_units_per_second.iter().sum()
    }
}

/// The upstream server, and what reached it.
pub(crate) struct Upstream {
    upstream: String,
    client: Client<HttpConnector, Body>,
    started: Instant,
    stats: Mutex<ProxyStats>,
    /// Identities of the write requests seen (`first_sight_unprocessed`).
    seen: Mutex<HashSet<String>>,
}

impl Upstream {
    /// The server at `upstream` (`http://host:port`), counted from now.
    pub(crate) fn new(upstream: String) -> Upstream {
        Upstream {
            upstream,
            client: Client::builder(TokioExecutor::new()).build_http(),
            started: Instant::now(),
            stats: Mutex::new(ProxyStats::default()),
            seen: Mutex::new(HashSet::new()),
        }
    }

    // Each holds plain values, consistent after every statement.
    pub(crate) fn stats(&self) -> MutexGuard<'_, ProxyStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the write request of identity `id` is seen for the first time
    /// (it is seen from now on).
    pub(crate) fn first_sight(&self, id: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(id.to_string())
    }

    /// Forgets the write requests seen (a new fault configuration).
    pub(crate) fn forget_seen(&self) {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Counts the held requests of `held` as answered re-encoded.
    pub(crate) fn count_reencoded<T>(&self, reencode: bool, held: &[(String, Vec<T>)]) {
        if reencode {
            self.stats().reencoded_items += held.iter().map(|(_, r)| r.len() as u64).sum::<u64>();
        }
    }

    /// Sends `body` upstream with the request's headers; `None` when the
    /// upstream server cannot be reached.
    pub(crate) async fn forward(
        &self,
        op: &str,
        parts: &Parts,
        body: Bytes,
    ) -> Option<Response<Bytes>> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut req = Request::builder()
            .method(parts.method.clone())
            .uri(format!("{}{path}", self.upstream));
        for (name, value) in &parts.headers {
            if ![HOST, CONTENT_LENGTH, CONNECTION, TRANSFER_ENCODING].contains(name) {
                req = req.header(name, value);
            }
        }
        let req = req.body(Full::new(body.clone())).ok()?;
        let sent_at = Instant::now();
        let resp = self.client.request(req).await.ok()?;
        let (parts, incoming) = resp.into_parts();
        let bytes = incoming.collect().await.ok()?.to_bytes();
        self.count_forwarded(op, &body, parts.status, sent_at);
        Some(Response::from_parts(parts, bytes))
    }

    fn count_forwarded(&self, op: &str, body: &[u8], status: StatusCode, sent_at: Instant) {
        let mut stats = self.stats();
        stats.forwarded += 1;
        if op != "BatchWriteItem" {
            return;
        }
        let Ok(json) = serde_json::from_slice::<Json>(body) else {
            return;
        };
        let requests = write_requests(&json);
        stats.items_forwarded += requests.len() as u64;
        if status != StatusCode::OK {
            return;
        }
        let units: u64 = requests
            .iter()
            .filter_map(|(_, r)| request_units(r))
            .map(|(_, units)| units)
            .sum();
        let second = (sent_at - self.started).as_secs() as usize;
        let series = &mut stats.write_units_per_second;
        if series.len() <= second {
            series.resize(second + 1, 0);
        }
        series[second] += units;
    }
}

/// The upstream's answer as ours (502 when it could not be reached). A body
/// we rewrote loses the upstream's checksum header.
pub(crate) fn relay(resp: Option<Response<Bytes>>, rewritten: bool) -> Response<Body> {
    let Some(resp) = resp else {
        return error_response(
            StatusCode::BAD_GATEWAY,
            "com.amazonaws.dynamodb.v20120810#InternalServerError",
            "the fault proxy could not reach the upstream server",
        );
    };
    let (mut parts, bytes) = resp.into_parts();
    for name in [CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION] {
        parts.headers.remove(name);
    }
    if rewritten {
        parts.headers.remove(HeaderName::from_static("x-amz-crc32"));
    }
    Response::from_parts(parts, Full::new(bytes))
}
