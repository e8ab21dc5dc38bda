//! A proxy between sql2ddb and a DynamoDB-compatible server that injects the
//! faults real DynamoDB produces and emulators never do, and counts what it
//! did and what it let through.
//!
//! It rewrites request bodies (the unprocessed part of a batch is held back),
//! which breaks SigV4 signatures: it is for emulators, which do not check them.
//!
//! A slow answer is forwarded first and held after: the request was
//! applied, and the client that gave up waiting cannot know it.
//!
//! With a capacity model ([`FaultProxy::set_capacity`]) the write calls are
//! metered and throttled by it first (see [`crate::capacity`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};

use crate::capacity::serve::Capacity;
use crate::capacity::{intercept, CapacityConfig, CapacityConfigError, CapacityStats};
use crate::fault::{FaultConfig, FaultDraw, FaultKind};
use crate::hold::{hold_back_keys, hold_back_writes, Hold};
pub use crate::upstream::ProxyStats;
use crate::upstream::{relay, Upstream};
use crate::wire::{error_response, operation, Body, Hangup, Server};
use crate::TestkitError;

struct Control {
    config: FaultConfig,
    draw: FaultDraw,
    throttle_until: Option<Instant>,
    /// Access key ids already answered `ExpiredTokenException`.
    expired: HashSet<String>,
    /// Answers held slow so far.
    slow_answers: u64,
}

/// What one affected request gets, decided under the lock.
struct Plan {
    decision: crate::fault::Decision,
    expired_token: bool,
    slow_for: Option<Duration>,
    reencode: bool,
    first_sight: bool,
}

struct Shared {
    upstream: Upstream,
    control: Mutex<Control>,
    /// The capacity model, when one is set: it decides the write calls.
    capacity: Mutex<Option<Arc<Capacity>>>,
}

/// A running proxy on 127.0.0.1; stops when dropped.
pub struct FaultProxy {
    shared: Arc<Shared>,
    server: Server,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`http://host:port`) on a free port.
    pub async fn start(upstream: &str, config: FaultConfig) -> Result<FaultProxy, TestkitError> {
        FaultProxy::start_on(0, upstream, config).await
    }

    /// Starts a proxy to `upstream` on `port` (0: a free one).
    pub async fn start_on(
        port: u16,
        upstream: &str,
        config: FaultConfig,
    ) -> Result<FaultProxy, TestkitError> {
        config.validate()?;
        let upstream = upstream.trim_end_matches('/').to_string();
        if !upstream.starts_with("http://") || upstream.parse::<hyper::Uri>().is_err() {
            return Err(TestkitError::Upstream(upstream));
        }
        let shared = Arc::new(Shared {
            upstream: Upstream::new(upstream),
            control: Mutex::new(control(config)),
            capacity: Mutex::new(None),
        });
        let handler_state = shared.clone();
        let server = Server::start(port, move |req| handle(handler_state.clone(), req))
            .await
            .map_err(TestkitError::Bind)?;
        Ok(FaultProxy { shared, server })
    }

    /// The proxy's URL, to use as the DynamoDB endpoint.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// What the proxy did so far.
    pub fn stats(&self) -> ProxyStats {
        self.shared.stats().clone()
    }

    /// Applies another configuration from now on (its seed restarts the draws,
    /// its `throttle_all_for` starts now).
    pub fn set_config(&self, config: FaultConfig) -> Result<(), TestkitError> {
        config.validate()?;
        *self.shared.control() = control(config);
        self.shared.upstream.forget_seen();
        Ok(())
    }
}

impl FaultProxy {
    /// Puts a capacity model in front of the upstream server from now on
    /// (its clock starts now), or takes it away (`None`). The model then
    /// decides every `BatchWriteItem`, `PutItem`, `UpdateItem` and
    /// `DeleteItem` it can meter; the faults apply to the other calls.
    pub fn set_capacity(&self, config: Option<CapacityConfig>) -> Result<(), CapacityConfigError> {
        let model = match config {
            Some(config) => {
                config.validate()?;
                Some(Arc::new(Capacity::new(config)))
            }
            None => None,
        };
        *self.shared.capacity_slot() = model;
        Ok(())
    }

    /// What the capacity model did so far; `None` without one.
    pub fn capacity_stats(&self) -> Option<CapacityStats> {
        self.shared.capacity().map(|c| c.stats())
    }
}

fn control(config: FaultConfig) -> Control {
    Control {
        draw: FaultDraw::new(config.seed),
        throttle_until: config.throttle_all_for.map(|d| Instant::now() + d),
        config,
        expired: HashSet::new(),
        slow_answers: 0,
    }
}

/// The access key id a request is signed with (`Credential=AKID/…` in its
/// `Authorization` header); empty when it is not signed.
fn credential(parts: &Parts) -> String {
    parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split("Credential=").nth(1))
        .and_then(|c| c.split('/').next())
        .unwrap_or_default()
        .to_string()
}

impl Shared {
    fn stats(&self) -> MutexGuard<'_, ProxyStats> {
        self.upstream.stats()
    }

    fn capacity_slot(&self) -> MutexGuard<'_, Option<Arc<Capacity>>> {
        self.capacity.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn capacity(&self) -> Option<Arc<Capacity>> {
        self.capacity_slot().clone()
    }

    fn control(&self) -> MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One request through the proxy: the capacity model decides it first,
/// then the fault drawn for it (an expired token, a delay, the fault).
async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Hangup> {
    let op = operation(&req);
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map_err(|_| Hangup)?.to_bytes();
    shared.stats().requests += 1;
    if let Some(capacity) = shared.capacity() {
        if let Some(resp) = intercept(&shared.upstream, &capacity, &op, &parts, &body).await {
            return Ok(resp);
        }
    }
    let Some(plan) = plan(&shared, &op, &parts) else {
        return Ok(relay(
            shared.upstream.forward(&op, &parts, body).await,
            false,
        ));
    };
    if plan.expired_token {
        return Ok(injected(
            &shared,
            |s| &mut s.expired_token,
            StatusCode::BAD_REQUEST,
            "com.amazon.coral.service#ExpiredTokenException",
        ));
    }
    if let Some(delay) = plan.decision.delay {
        shared.stats().delayed += 1;
        tokio::time::sleep(delay).await;
    }
    apply_fault(shared, plan, op, parts, body).await
}

/// The fault `plan` drew for a request, applied: an error answered in the
/// server's place, a dropped connection, a slow answer, part of a batch
/// held back, or the request forwarded as it is.
async fn apply_fault(
    shared: Arc<Shared>,
    plan: Plan,
    op: String,
    parts: Parts,
    body: Bytes,
) -> Result<Response<Body>, Hangup> {
    let decision = plan.decision;
    if let Some((count, status, type_name)) = decision.fault.and_then(error_answer) {
        return Ok(injected(&shared, count, status, type_name));
    }
    let hold = |random| Hold {
        random,
        first_sight: plan.first_sight,
        reencode: plan.reencode,
        seed: decision.split_seed,
    };
    match decision.fault {
        Some(FaultKind::DroppedConnection) => {
            if decision.forward_before_drop {
                let _ = shared.upstream.forward(&op, &parts, body).await;
                shared.stats().dropped_after_forward += 1;
            } else {
                shared.stats().dropped_before_forward += 1;
            }
            Err(Hangup)
        }
        Some(FaultKind::Slow) if plan.slow_for.is_some() => {
            let slow_for = plan.slow_for.unwrap_or_default();
            Ok(slow_answer(shared, op, parts, body, slow_for).await)
        }
        Some(FaultKind::Unprocessed) if op == "BatchWriteItem" => {
            Ok(hold_back_writes(&shared.upstream, &op, &parts, body, hold(true)).await)
        }
        Some(FaultKind::Unprocessed) if op == "BatchGetItem" => {
            Ok(hold_back_keys(&shared.upstream, &op, &parts, body, hold(true)).await)
        }
        _ if plan.first_sight && op == "BatchWriteItem" => {
            Ok(hold_back_writes(&shared.upstream, &op, &parts, body, hold(false)).await)
        }
        // No fault, or one that does not apply: a slow answer past the
        // limit, unprocessed items of an operation without any.
        _ => Ok(relay(
            shared.upstream.forward(&op, &parts, body).await,
            false,
        )),
    }
}

/// The counter of an injected error answer.
type ErrorCount = fn(&mut ProxyStats) -> &mut u64;

/// The error answer a fault stands for (its counter, status and
/// `__type`), or `None` for a fault that is not an error answer.
fn error_answer(fault: FaultKind) -> Option<(ErrorCount, StatusCode, &'static str)> {
    let answer: (ErrorCount, StatusCode, &'static str) = match fault {
        FaultKind::ProvisionedThroughputExceeded => (
            |s| &mut s.provisioned_throughput_exceeded,
            StatusCode::BAD_REQUEST,
            "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        ),
        FaultKind::Throttling => (
            |s| &mut s.throttling,
            StatusCode::BAD_REQUEST,
            "com.amazon.coral.availability#ThrottlingException",
        ),
        FaultKind::InternalError => (
            |s| &mut s.internal_error,
            StatusCode::INTERNAL_SERVER_ERROR,
            "com.amazonaws.dynamodb.v20120810#InternalServerError",
        ),
        FaultKind::ServiceUnavailable => (
            |s| &mut s.service_unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            "com.amazonaws.dynamodb.v20120810#ServiceUnavailable",
        ),
        FaultKind::TooManyRequests => (
            |s| &mut s.too_many_requests,
            StatusCode::TOO_MANY_REQUESTS,
            "com.amazonaws.dynamodb.v20120810#TooManyRequestsException",
        ),
        FaultKind::RequestTimeout => (
            |s| &mut s.request_timeout,
            StatusCode::REQUEST_TIMEOUT,
            "com.amazon.coral.service#RequestTimeoutException",
        ),
        _ => return None,
    };
    Some(answer)
}

/// An error answered in the server's place, counted.
fn injected(
    shared: &Shared,
    count: ErrorCount,
    status: StatusCode,
    type_name: &str,
) -> Response<Body> {
    *count(&mut shared.stats()) += 1;
    error_response(status, type_name, "injected by the fault proxy")
}

/// The request forwarded, its answer held `slow_for` after: the request
/// is applied even when the client hangs up meanwhile.
async fn slow_answer(
    shared: Arc<Shared>,
    op: String,
    parts: Parts,
    body: Bytes,
    slow_for: Duration,
) -> Response<Body> {
    let forwarding = shared.clone();
    let forwarded =
        tokio::spawn(async move { forwarding.upstream.forward(&op, &parts, body).await });
    let answer = forwarded.await.ok().flatten();
    shared.stats().slow += 1;
    tokio::time::sleep(slow_for).await;
    relay(answer, false)
}

/// What an affected request gets; `None` when `op` is not affected. The
/// draw is taken for every affected request but one answered
/// `ExpiredTokenException`.
fn plan(shared: &Shared, op: &str, parts: &Parts) -> Option<Plan> {
    let mut control = shared.control();
    let c = &mut *control;
    if !c.config.affects(op) {
        return None;
    }
    let expired_token = c.config.expired_token && c.expired.insert(credential(parts));
    let throttle_all = c.throttle_until.is_some_and(|t| Instant::now() < t);
    let decision = match expired_token {
        true => crate::fault::Decision::default(),
        false => c.draw.decide(&c.config, throttle_all),
    };
    let slow = decision.fault == Some(FaultKind::Slow)
        && c.config.slow_limit.is_none_or(|l| c.slow_answers < l);
    c.slow_answers += u64::from(slow);
    Some(Plan {
        decision,
        expired_token,
        slow_for: slow.then_some(c.config.slow_for),
        reencode: c.config.reencode,
        first_sight: c.config.first_sight_unprocessed,
    })
}
