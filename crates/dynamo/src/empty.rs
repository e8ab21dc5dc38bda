//! Whether a table already holds items, and emptying it: what a fresh run
//! does first with a table that is not empty (`--if-not-empty`).
//!
//! DynamoDB has no truncate, and deleting and re-creating the table would
//! lose what it was given beside its items (its indexes as built, streams,
//! TTL, tags, alarms, backups), so a table is emptied item by item: a
//! parallel `Scan` that reads only the key attributes, and `BatchWriteItem`
//! calls of up to 25 delete requests. Every call goes through the one retry
//! engine (the SDK's retries are off); the delete requests DynamoDB
//! returns as unprocessed are sent again after a backoff, as they came back
//! (they carry their keys), until none is left or the attempts run out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, Select, WriteRequest};
use futures::future::try_join_all;
use sql2ddb_aws::{Attempt, Retrier};
use sql2ddb_core::limits::MAX_BATCH_ITEMS;
use sql2ddb_core::KeyAttr;

use crate::client::Dynamo;
use crate::error::{call_error, local_error, DynamoError};
use crate::failure::Failure;
use crate::limiter::WriteCapacityLimiter;
use crate::retry::{after_attempts, again, retried};
use crate::writer::RetryPolicy;

/// A count stops once it has seen this many items: enough to say that a
/// table is not empty, without reading a large table whole.
pub const COUNT_BOUND: u64 = 100_000;

/// A count reads at most this many pages of a non-empty table (each up to
/// 1 MB of items): a table of large items reaches it long before
/// [`COUNT_BOUND`].
pub const COUNT_PAGES: u32 = 10;

/// How many items a table holds, as far as a bounded count went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemCount {
    /// Items counted.
    pub items: u64,
    /// Whether the count reached the end of the table; `false`: it holds at
    /// least `items`.
    pub complete: bool,
}

impl ItemCount {
    /// Whether the table holds no item.
    pub fn is_empty(&self) -> bool {
        self.items == 0 && self.complete
    }

    /// The count in words: `3 items`, `at least 100,000 items`.
    pub fn describe(&self) -> String {
        let items = sql2ddb_core::shown::count(self.items, "item", "items");
        match self.complete {
            true => items,
            false => format!("at least {items}"),
        }
    }
}

/// Counts the items of `table` with `Scan` (`Select=COUNT`, strongly
/// consistent), stopping at [`COUNT_BOUND`] items or [`COUNT_PAGES`] pages;
/// `None` when the table does not exist (`DescribeTable` says so first:
/// the item count it gives is only refreshed every few hours).
pub async fn count_items(
    dynamo: &Dynamo,
    table: &str,
    policy: &RetryPolicy,
) -> Result<Option<ItemCount>, DynamoError> {
    let client = dynamo.sdk();
    let described = retried(policy, "DescribeTable", || {
        client.describe_table().table_name(table).send()
    })
    .await;
    if let Err(e) = described {
        let missing = e
            .error
            .as_service_error()
            .is_some_and(|s| s.is_resource_not_found_exception());
        return match missing {
            true => Ok(None),
            false => Err(e.into_error("DescribeTable", table)),
        };
    }
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    let mut items = 0u64;
    let mut pages = 0u32;
    loop {
        let call = retried(policy, "Scan", || {
            client
                .scan()
                .table_name(table)
                .select(Select::Count)
                .consistent_read(true)
                .set_exclusive_start_key(start.clone())
                .send()
        })
        .await;
        let out = call.map_err(|e| e.into_error("Scan", table))?;
        items += u64::try_from(out.count()).unwrap_or(0);
        pages += 1;
        let next = out.last_evaluated_key().filter(|k| !k.is_empty());
        let Some(next) = next else {
            return Ok(Some(ItemCount {
                items,
                complete: true,
            }));
        };
        // A page may come back empty with more to read: the bound holds
        // only once an item was seen, so "empty" is never a guess.
        if items > 0 && (items >= COUNT_BOUND || pages >= COUNT_PAGES) {
            return Ok(Some(ItemCount {
                items,
                complete: false,
            }));
        }
        start = Some(next.clone());
    }
}

/// How a table is emptied.
#[derive(Clone, Copy)]
pub struct Emptying<'a> {
    /// The table.
    pub table: &'a str,
    /// Its key attributes (partition key first): all a delete needs, and
    /// all the scan reads.
    pub keys: &'a [KeyAttr],
    /// Segments of the parallel scan, each deleting what it read: also the
    /// most `BatchWriteItem` calls in flight (at least 1).
    pub segments: u32,
    /// Retries of every call, and of the unprocessed delete requests.
    pub retry: RetryPolicy,
    /// Write units per second, when the run is capped: each delete takes
    /// `units_per_delete` (a delete bills as a write of the item, and
    /// again for each index that holds it).
    pub limiter: Option<&'a WriteCapacityLimiter>,
    /// Write units one delete takes from `limiter` (at least 1).
    pub units_per_delete: u64,
}

/// Deletes every item of `e.table`; `deleted` counts the items deleted as
/// it goes (for progress). Returns how many were deleted. Items written
/// meanwhile by someone else may or may not be deleted.
pub async fn empty_table(
    dynamo: &Dynamo,
    e: Emptying<'_>,
    deleted: &AtomicU64,
) -> Result<u64, DynamoError> {
    let total = e.segments.max(1);
    let before = deleted.load(Ordering::Relaxed);
    try_join_all((0..total).map(|segment| empty_segment(dynamo, &e, segment, total, deleted)))
        .await?;
    Ok(deleted.load(Ordering::Relaxed) - before)
}

/// Scans segment `segment` of `total` for keys and deletes each page's
/// items before reading the next page.
async fn empty_segment(
    dynamo: &Dynamo,
    e: &Emptying<'_>,
    segment: u32,
    total: u32,
    deleted: &AtomicU64,
) -> Result<(), DynamoError> {
    let client = dynamo.sdk();
    let names: HashMap<String, String> = e
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| (format!("#k{i}"), k.name.clone()))
        .collect();
    let projection = (0..e.keys.len())
        .map(|i| format!("#k{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    loop {
        let out = retried(&e.retry, "Scan", || {
            client
                .scan()
                .table_name(e.table)
                .segment(segment as i32)
                .total_segments(total as i32)
                .projection_expression(&projection)
                .set_expression_attribute_names(Some(names.clone()))
                .set_exclusive_start_key(start.clone())
                .send()
        })
        .await
        .map_err(|err| err.into_error("Scan", e.table))?;
        for chunk in out.items().chunks(MAX_BATCH_ITEMS) {
            delete_keys(dynamo, e, chunk.to_vec(), deleted).await?;
        }
        match out.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok(()),
        }
    }
}

/// Deletes the items at `keys` (at most 25) in one `BatchWriteItem`, then
/// sends what comes back unprocessed again after a backoff, through the one
/// retry engine. An attempt is spent by a call that deleted nothing: one
/// that deleted some of its keys shows the table taking deletes, and its
/// remainder waits its turn (a retry of part of the call).
async fn delete_keys(
    dynamo: &Dynamo,
    e: &Emptying<'_>,
    keys: Vec<HashMap<String, AttributeValue>>,
    deleted: &AtomicU64,
) -> Result<(), DynamoError> {
    let pending = keys
        .into_iter()
        .map(|key| {
            DeleteRequest::builder()
                .set_key(Some(key))
                .build()
                .map(|d| WriteRequest::builder().delete_request(d).build())
                .map_err(|err| local_error("BatchWriteItem", e.table, err.to_string()))
        })
        .collect::<Result<Vec<WriteRequest>, DynamoError>>()?;
    let out = Retrier::new(e.retry)
        .run("BatchWriteItem", pending, |pending| {
            delete_some(dynamo, e, pending, deleted)
        })
        .await;
    out.map_err(|gave_up| match gave_up.error {
        Refused::Call(err) => after_attempts(err, gave_up.attempts),
        Refused::Unprocessed(left) => DynamoError::Call {
            operation: "BatchWriteItem",
            table: e.table.to_string(),
            message: format!(
                "{left} delete requests still unprocessed after {} calls",
                gave_up.attempts
            ),
            failure: Some(Failure::Throttled),
        },
    })
}

/// Why a `BatchWriteItem` of delete requests left some undone.
enum Refused {
    /// The call failed.
    Call(DynamoError),
    /// The call returned this many delete requests unprocessed.
    Unprocessed(usize),
}

/// One `BatchWriteItem` of the delete requests `pending`: done when none
/// comes back unprocessed, else those to send again.
async fn delete_some(
    dynamo: &Dynamo,
    e: &Emptying<'_>,
    pending: Vec<WriteRequest>,
    deleted: &AtomicU64,
) -> Attempt<(), Refused, Vec<WriteRequest>> {
    if let Some(limiter) = e.limiter {
        limiter
            .acquire(pending.len() as u64 * e.units_per_delete.max(1))
            .await;
    }
    let sent = pending.len();
    let call = dynamo
        .sdk()
        .batch_write_item()
        .request_items(e.table, pending.clone())
        .send()
        .await;
    let out = match call {
        Ok(out) => out,
        Err(err) => {
            let err = call_error("BatchWriteItem", e.table, &err);
            return again(pending, err).map_error(Refused::Call);
        }
    };
    let rest = out
        .unprocessed_items
        .and_then(|mut by_table| by_table.remove(e.table))
        .unwrap_or_default();
    deleted.fetch_add((sent - rest.len().min(sent)) as u64, Ordering::Relaxed);
    if rest.is_empty() {
        return Attempt::Done(());
    }
    let error = Refused::Unprocessed(rest.len());
    match rest.len() < sent {
        true => Attempt::RetryPart {
            rest,
            throttled: true,
            error,
        },
        false => Attempt::Retry {
            work: rest,
            throttled: true,
            error,
        },
    }
}
