//! Reading a table back, for `verify --deep`: one segment of a parallel
//! `Scan`, and `BatchGetItem` by key. Both own their retries (the SDK's are
//! off): a throttled or transient call is retried with capped exponential
//! backoff and full jitter, and so are `UnprocessedKeys`. An optional cap
//! ([`WriteCapacityLimiter`] used as a plain token bucket) holds the read
//! units per second spent, counted from what DynamoDB reports consumed.

use std::collections::HashMap;
use std::ops::ControlFlow;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnConsumedCapacity};
use sql2ddb_aws::{Refusals, RetryPolicy};
use sql2ddb_core::Item;

use crate::client::Dynamo;
use crate::convert::{item_from_sdk, item_to_sdk};
use crate::error::{call_error, local_error, DynamoError};
use crate::failure::Failure;
use crate::limiter::WriteCapacityLimiter;

/// Most keys in one `BatchGetItem` call (DynamoDB's limit).
pub const MAX_BATCH_GET_KEYS: usize = 100;

/// Where a scan segment reads, and how gently.
#[derive(Clone, Copy)]
pub struct ScanSegment<'a> {
    /// The table.
    pub table: &'a str,
    /// This segment (0-based).
    pub segment: i32,
    /// Segments of the scan.
    pub total: i32,
    /// Read units per second, shared by every segment of the scan.
    pub limiter: Option<&'a WriteCapacityLimiter>,
    /// Retries of a throttled or failing call.
    pub retry: RetryPolicy,
}

/// Scans one segment of a table page by page, handing each page's items to
/// `page` as they come (only one page is held at a time); `page` ends the
/// scan early with `Break`.
pub async fn scan_segment(
    dynamo: &Dynamo,
    s: ScanSegment<'_>,
    mut page: impl FnMut(Vec<Item>) -> ControlFlow<()>,
) -> Result<(), DynamoError> {
    let client = dynamo.sdk();
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    loop {
        let mut tries = Tries::start();
        let out = loop {
            let call = client
                .scan()
                .table_name(s.table)
                .segment(s.segment)
                .total_segments(s.total)
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .set_exclusive_start_key(start.clone())
                .send()
                .await;
            match call {
                Ok(out) => break out,
                Err(e) => {
                    let err = call_error("Scan", s.table, &e);
                    retry_or_fail(&s.retry, &mut tries, err).await?;
                }
            }
        };
        spend(
            s.limiter,
            out.consumed_capacity().and_then(|c| c.capacity_units()),
        )
        .await;
        if page(out.items().iter().map(item_from_sdk).collect()).is_break() {
            return Ok(());
        }
        match out.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok(()),
        }
    }
}

/// Fetches the items at `keys` (strongly consistent reads), at most
/// [`MAX_BATCH_GET_KEYS`] per call; keys without an item are absent from the
/// answer. `UnprocessedKeys` are asked again after a backoff, up to the
/// policy's attempts.
pub async fn batch_get(
    dynamo: &Dynamo,
    table: &str,
    keys: &[Item],
    limiter: Option<&WriteCapacityLimiter>,
    retry: RetryPolicy,
) -> Result<Vec<Item>, DynamoError> {
    let client = dynamo.sdk();
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(MAX_BATCH_GET_KEYS) {
        let mut pending: Vec<HashMap<String, AttributeValue>> =
            chunk.iter().map(item_to_sdk).collect();
        let mut tries = Tries::start();
        while !pending.is_empty() {
            let request = KeysAndAttributes::builder()
                .set_keys(Some(pending.clone()))
                .consistent_read(true)
                .build()
                .map_err(|e| local_error("BatchGetItem", table, e.to_string()))?;
            let call = client
                .batch_get_item()
                .request_items(table, request)
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let out = match call {
                Ok(out) => out,
                Err(e) => {
                    let err = call_error("BatchGetItem", table, &e);
                    retry_or_fail(&retry, &mut tries, err).await?;
                    continue;
                }
            };
            let units = out
                .consumed_capacity()
                .iter()
                .filter_map(|c| c.capacity_units())
                .sum();
            spend(limiter, Some(units)).await;
            if let Some(items) = out.responses().and_then(|r| r.get(table)) {
                found.extend(items.iter().map(item_from_sdk));
            }
            pending = out
                .unprocessed_keys()
                .and_then(|u| u.get(table))
                .map(|k| k.keys().to_vec())
                .unwrap_or_default();
            if !pending.is_empty() {
                let err = local_error(
                    "BatchGetItem",
                    table,
                    format!("{} keys still unprocessed", pending.len()),
                );
                retry_or_fail(&retry, &mut tries, err).await?;
            }
        }
    }
    Ok(found)
}

/// The refusals of one call so far, and when it was first made.
struct Tries {
    refusals: Refusals,
    since: tokio::time::Instant,
}

impl Tries {
    fn start() -> Tries {
        Tries {
            refusals: Refusals::default(),
            since: tokio::time::Instant::now(),
        }
    }
}

/// Waits before the next attempt when `err` is worth retrying and the
/// policy allows it (throttling within its budget); returns `err`
/// otherwise.
async fn retry_or_fail(
    policy: &RetryPolicy,
    tries: &mut Tries,
    err: DynamoError,
) -> Result<(), DynamoError> {
    // Keys returned unprocessed (no failure of a call) are the table's
    // throttling, and retried as such.
    let (retryable, throttled) = match err.failure() {
        None => (true, true),
        Some(f) => (f.is_retryable(), f == Failure::Throttled),
    };
    if !retryable {
        return Err(err);
    }
    let elapsed = tries.since.elapsed();
    let next = policy.next(&mut tries.refusals, throttled, elapsed, &mut rand::rng());
    match next {
        Ok(delay) => {
            tokio::time::sleep(delay).await;
            Ok(())
        }
        Err(_) => Err(err),
    }
}

/// Spends the read units a call consumed against the cap, when there is one.
async fn spend(limiter: Option<&WriteCapacityLimiter>, units: Option<f64>) {
    if let (Some(l), Some(u)) = (limiter, units) {
        l.acquire(u.ceil() as u64).await;
    }
}
