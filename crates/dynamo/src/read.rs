//! Reading a table back, for `verify --deep`: one segment of a parallel
//! `Scan`, and `BatchGetItem` by key. Both own their retries (the SDK's are
//! off): a throttled or transient call is retried with capped exponential
//! backoff and full jitter, and so are `UnprocessedKeys`. An optional cap
//! ([`WriteCapacityLimiter`] used as a plain token bucket) holds the read
//! units per second spent, counted from what DynamoDB reports consumed.

use std::collections::HashMap;
use std::ops::ControlFlow;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnConsumedCapacity};
use sql2ddb_aws::{Attempt, Retrier, RetryPolicy};
use sql2ddb_core::Item;

use crate::client::Dynamo;
use crate::convert::{item_from_sdk, item_to_sdk};
use crate::error::{call_error, local_error, DynamoError};
use crate::limiter::WriteCapacityLimiter;
use crate::retry::again;

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
        let out = Retrier::new(s.retry)
            .run("Scan", (), |()| {
                let call = client
                    .scan()
                    .table_name(s.table)
                    .segment(s.segment)
                    .total_segments(s.total)
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .set_exclusive_start_key(start.clone())
                    .send();
                async move {
                    match call.await {
                        Ok(out) => Attempt::Done(out),
                        Err(e) => again((), call_error("Scan", s.table, &e)),
                    }
                }
            })
            .await
            .map_err(|gave_up| gave_up.error)?;
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
/// answer. `UnprocessedKeys` are asked again after a backoff (a retry of
/// part of the call), within the policy.
pub async fn batch_get(
    dynamo: &Dynamo,
    table: &str,
    keys: &[Item],
    limiter: Option<&WriteCapacityLimiter>,
    retry: RetryPolicy,
) -> Result<Vec<Item>, DynamoError> {
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(MAX_BATCH_GET_KEYS) {
        let fetch = Fetch {
            pending: chunk.iter().map(item_to_sdk).collect(),
            found,
        };
        found = Retrier::new(retry)
            .run("BatchGetItem", fetch, |fetch| {
                get_some(dynamo, table, limiter, fetch)
            })
            .await
            .map_err(|gave_up| gave_up.error)?;
    }
    Ok(found)
}

/// The keys of a chunk not read yet, and the items read so far.
struct Fetch {
    pending: Vec<HashMap<String, AttributeValue>>,
    found: Vec<Item>,
}

/// One `BatchGetItem` of the keys `fetch` has pending: done when none is
/// left unprocessed, else the rest to ask again.
async fn get_some(
    dynamo: &Dynamo,
    table: &str,
    limiter: Option<&WriteCapacityLimiter>,
    mut fetch: Fetch,
) -> Attempt<Vec<Item>, DynamoError, Fetch> {
    let request = KeysAndAttributes::builder()
        .set_keys(Some(fetch.pending.clone()))
        .consistent_read(true)
        .build();
    let request = match request {
        Ok(r) => r,
        Err(e) => return Attempt::GiveUp(local_error("BatchGetItem", table, e.to_string())),
    };
    let call = dynamo
        .sdk()
        .batch_get_item()
        .request_items(table, request)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await;
    let out = match call {
        Ok(out) => out,
        Err(e) => return again(fetch, call_error("BatchGetItem", table, &e)),
    };
    let units = out
        .consumed_capacity()
        .iter()
        .filter_map(|c| c.capacity_units())
        .sum();
    spend(limiter, Some(units)).await;
    if let Some(items) = out.responses().and_then(|r| r.get(table)) {
        fetch.found.extend(items.iter().map(item_from_sdk));
    }
    let sent = fetch.pending.len();
    fetch.pending = out
        .unprocessed_keys()
        .and_then(|u| u.get(table))
        .map(|k| k.keys().to_vec())
        .unwrap_or_default();
    let left = fetch.pending.len();
    if left == 0 {
        return Attempt::Done(fetch.found);
    }
    // Keys returned unprocessed are the table's throttling.
    let error = local_error(
        "BatchGetItem",
        table,
        format!("{left} keys still unprocessed"),
    );
    match left < sent {
        true => Attempt::RetryPart {
            rest: fetch,
            throttled: true,
            error,
        },
        false => Attempt::Retry {
            work: fetch,
            throttled: true,
            error,
        },
    }
}

/// Spends the read units a call consumed against the cap, when there is one.
async fn spend(limiter: Option<&WriteCapacityLimiter>, units: Option<f64>) {
    if let (Some(l), Some(u)) = (limiter, units) {
        l.acquire(u.ceil() as u64).await;
    }
}
