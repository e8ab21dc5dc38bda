//! The calls of an update job (`sql2ddb update`): the table's description,
//! pages of a (parallel) Scan or a Query with a filter, and one conditional
//! `UpdateItem` or `DeleteItem` per matching item.
//!
//! Every call is retried here, as the batch writer retries its own: throttling,
//! 5xx, timeouts and dropped connections with `RetryPolicy`'s capped
//! exponential backoff and full jitter, each attempt taking a permit of the
//! shared [`AdaptiveConcurrency`] (so throttling halves it). A conditional
//! check failure is no error: the item no longer matched when it was
//! written, [`ItemOutcome::Skipped`].

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure,
};
use aws_sdk_dynamodb::Client;
use sql2ddb_core::{AttrValue, Item, KeyAttr};

use crate::concurrency::AdaptiveConcurrency;
use crate::convert::{item_from_sdk, to_sdk};
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::writer::RetryPolicy;

mod describe;
pub use describe::{describe, IndexDescription, TableDescription};

/// Expression placeholders of a call: `#name` → attribute, `:value` → value.
#[derive(Debug, Clone, Default)]
pub struct Placeholders {
    /// `ExpressionAttributeNames`.
    pub names: HashMap<String, String>,
    /// `ExpressionAttributeValues`.
    pub values: HashMap<String, AttrValue>,
}

impl Placeholders {
    fn sdk_names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    fn sdk_values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| {
            self.values
                .iter()
                .map(|(k, v)| (k.clone(), to_sdk(v)))
                .collect()
        })
    }
}

/// One Scan or Query call, without its start key.
#[derive(Debug, Clone)]
pub struct PageRequest {
    /// The table.
    pub table: String,
    /// Query this index (with `key_condition`); `None` scans the table.
    pub index: Option<String>,
    /// `KeyConditionExpression` of a Query.
    pub key_condition: Option<String>,
    /// `(Segment, TotalSegments)` of a parallel Scan.
    pub segment: Option<(u32, u32)>,
    /// `FilterExpression`.
    pub filter: Option<String>,
    /// Placeholders of `key_condition` and `filter`.
    pub placeholders: Placeholders,
    /// `Limit`: most items evaluated per call.
    pub limit: Option<usize>,
}

/// A page's start or end: DynamoDB's `LastEvaluatedKey`.
pub type PageKey = HashMap<String, AttributeValue>;

/// One page of a Scan or Query.
#[derive(Debug, Default)]
pub struct Page {
    /// Items that passed the filter.
    pub items: Vec<Item>,
    /// Items evaluated (`ScannedCount`), matched or not.
    pub scanned: u64,
    /// Where the next page starts; `None` at the end.
    pub next: Option<PageKey>,
    /// Read units the call consumed, as DynamoDB reported them (0 when it did not).
    pub read_units: f64,
    /// Attempts beyond the first.
    pub retries: u64,
    /// Attempts that were throttled.
    pub throttled: u64,
}

/// What became of one item's conditional write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ItemOutcome {
    /// Written (updated or deleted); write units as DynamoDB reported them.
    Written {
        /// Consumed write units, the table's and its indexes' (0 when not reported).
        write_units: f64,
    },
    /// The condition failed: the item changed (or went) since it was read.
    Skipped,
}

/// A conditional write's outcome and the attempts it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ItemWrite {
    /// Written or skipped.
    pub outcome: ItemOutcome,
    /// Attempts beyond the first.
    pub retries: u64,
    /// Attempts that were throttled.
    pub throttled: u64,
}

/// A conditional `UpdateItem` (with an expression) or `DeleteItem`.
#[derive(Debug, Clone)]
pub struct ConditionalWrite {
    /// The table.
    pub table: String,
    /// `UpdateExpression`; `None` deletes the item.
    pub update: Option<String>,
    /// `ConditionExpression`.
    pub condition: String,
    /// Placeholders of `update` and `condition`.
    pub placeholders: Placeholders,
    /// `(attribute, run id)` of an update that marks each item with its run:
    /// a condition that fails on an item already carrying this run's mark
    /// means an earlier attempt of the same call did land (its answer was
    /// lost), so the item counts as written, not skipped.
    pub own_mark: Option<(String, String)>,
}

/// Reads one page from `start`, retrying as the module says.
pub async fn read_page(
    client: &Client,
    req: &PageRequest,
    start: Option<PageKey>,
    policy: &RetryPolicy,
) -> Result<Page, DynamoError> {
    let limit = req.limit.map(|l| l.min(i32::MAX as usize) as i32);
    let (op, mut page) = if req.index.is_some() {
        ("Query", Page::default())
    } else {
        ("Scan", Page::default())
    };
    let out = retrying(
        policy,
        None,
        &req.table,
        op,
        &mut page.retries,
        &mut page.throttled,
        || {
            let start = start.clone();
            async move {
                let out = match &req.index {
                    Some(index) => client
                        .query()
                        .table_name(&req.table)
                        .index_name(index)
                        .set_key_condition_expression(req.key_condition.clone())
                        .set_filter_expression(req.filter.clone())
                        .set_expression_attribute_names(req.placeholders.sdk_names())
                        .set_expression_attribute_values(req.placeholders.sdk_values())
                        .set_limit(limit)
                        .set_exclusive_start_key(start)
                        .return_consumed_capacity(ReturnConsumedCapacity::Total)
                        .send()
                        .await
                        .map(|o| {
                            (
                                o.items,
                                o.scanned_count,
                                o.last_evaluated_key,
                                o.consumed_capacity,
                            )
                        })
                        .map_err(Attempt::of)?,
                    None => client
                        .scan()
                        .table_name(&req.table)
                        .set_segment(req.segment.map(|(s, _)| s as i32))
                        .set_total_segments(req.segment.map(|(_, t)| t as i32))
                        .set_filter_expression(req.filter.clone())
                        .set_expression_attribute_names(req.placeholders.sdk_names())
                        .set_expression_attribute_values(req.placeholders.sdk_values())
                        .set_limit(limit)
                        .set_exclusive_start_key(start)
                        .return_consumed_capacity(ReturnConsumedCapacity::Total)
                        .send()
                        .await
                        .map(|o| {
                            (
                                o.items,
                                o.scanned_count,
                                o.last_evaluated_key,
                                o.consumed_capacity,
                            )
                        })
                        .map_err(Attempt::of)?,
                };
                Ok(out)
            }
        },
    )
    .await?;
    let (items, scanned, next, consumed) = out;
    page.items = items
        .unwrap_or_default()
        .iter()
        .map(item_from_sdk)
        .collect();
    page.scanned = scanned.max(0) as u64;
    page.next = next.filter(|k| !k.is_empty());
    page.read_units = units(consumed.as_ref());
    Ok(page)
}

/// Writes one item conditionally: its key is taken from `item` by `keys`.
pub async fn write_item(
    client: &Client,
    write: &ConditionalWrite,
    keys: &[KeyAttr],
    item: &Item,
    policy: &RetryPolicy,
    concurrency: Option<&AdaptiveConcurrency>,
) -> Result<ItemWrite, DynamoError> {
    let key: HashMap<String, AttributeValue> = keys
        .iter()
        .filter_map(|k| Some((k.name.clone(), to_sdk(item.get(&k.name)?))))
        .collect();
    if key.len() != keys.len() {
        return Err(DynamoError::Call {
            operation: "UpdateItem",
            table: write.table.clone(),
            message: "an item read lacks a key attribute of the table".into(),
            failure: Some(Failure::ItemRejected),
        });
    }
    let op = if write.update.is_some() {
        "UpdateItem"
    } else {
        "DeleteItem"
    };
    let (mut retries, mut throttled) = (0, 0);
    let outcome = retrying(
        policy,
        concurrency,
        &write.table,
        op,
        &mut retries,
        &mut throttled,
        || {
            let key = key.clone();
            async move {
                let consumed = match &write.update {
                    Some(expression) => client
                        .update_item()
                        .table_name(&write.table)
                        .set_key(Some(key))
                        .update_expression(expression)
                        .condition_expression(&write.condition)
                        .set_expression_attribute_names(write.placeholders.sdk_names())
                        .set_expression_attribute_values(write.placeholders.sdk_values())
                        .return_consumed_capacity(ReturnConsumedCapacity::Total)
                        .set_return_values_on_condition_check_failure(
                            write
                                .own_mark
                                .as_ref()
                                .map(|_| ReturnValuesOnConditionCheckFailure::AllOld),
                        )
                        .send()
                        .await
                        .map(|o| o.consumed_capacity)
                        .map_err(|e| match marked_by(&e, write.own_mark.as_ref()) {
                            true => Attempt::OwnWrite,
                            false => Attempt::of(e),
                        }),
                    None => client
                        .delete_item()
                        .table_name(&write.table)
                        .set_key(Some(key))
                        .condition_expression(&write.condition)
                        .set_expression_attribute_names(write.placeholders.sdk_names())
                        .set_expression_attribute_values(write.placeholders.sdk_values())
                        .return_consumed_capacity(ReturnConsumedCapacity::Total)
                        .send()
                        .await
                        .map(|o| o.consumed_capacity)
                        .map_err(Attempt::of),
                };
                match consumed {
                    Ok(c) => Ok(ItemOutcome::Written {
                        write_units: units(c.as_ref()),
                    }),
                    Err(Attempt::ConditionFailed) => Ok(ItemOutcome::Skipped),
                    Err(Attempt::OwnWrite) => Ok(ItemOutcome::Written { write_units: 0.0 }),
                    Err(e) => Err(e),
                }
            }
        },
    )
    .await?;
    Ok(ItemWrite {
        outcome,
        retries,
        throttled,
    })
}

fn units(c: Option<&ConsumedCapacity>) -> f64 {
    c.and_then(|c| c.capacity_units()).unwrap_or(0.0)
}

/// Whether an `UpdateItem` failed its condition on an item that carries
/// `mark` (attribute, value): the mark of this very run.
fn marked_by(
    e: &SdkError<UpdateItemError, aws_sdk_dynamodb::config::http::HttpResponse>,
    mark: Option<&(String, String)>,
) -> bool {
    let (Some((attr, run)), Some(UpdateItemError::ConditionalCheckFailedException(c))) =
        (mark, e.as_service_error())
    else {
        return false;
    };
    c.item()
        .and_then(|item| item.get(attr))
        .and_then(|v| v.as_s().ok())
        .is_some_and(|v| v == run)
}

/// A failed attempt, classified once.
enum Attempt {
    ConditionFailed,
    /// The condition failed on an item this run's earlier attempt changed.
    OwnWrite,
    Failed(Failure, String),
}

impl Attempt {
    fn of<E>(e: SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>) -> Attempt
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        if e.code() == Some("ConditionalCheckFailedException") {
            return Attempt::ConditionFailed;
        }
        Attempt::Failed(Failure::of(&e), sql2ddb_aws::sdk_message(&e))
    }
}

/// Calls `call` until it succeeds, fails for good, or runs out of attempts.
async fn retrying<T, F, Fut>(
    policy: &RetryPolicy,
    concurrency: Option<&AdaptiveConcurrency>,
    table: &str,
    operation: &'static str,
    retries: &mut u64,
    throttled: &mut u64,
    mut call: F,
) -> Result<T, DynamoError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Attempt>>,
{
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let permit = match concurrency {
            Some(c) => Some(c.acquire().await),
            None => None,
        };
        let (failure, message) = match call().await {
            Ok(v) => {
                if let Some(p) = permit {
                    p.success();
                }
                return Ok(v);
            }
            Err(Attempt::ConditionFailed | Attempt::OwnWrite) => {
                (Failure::ItemRejected, "the condition failed".to_string())
            }
            Err(Attempt::Failed(f, m)) => (f, m),
        };
        // The permit is released before any backoff sleep.
        match (failure == Failure::Throttled, permit) {
            (true, permit) => {
                *throttled += 1;
                if let Some(p) = permit {
                    p.throttled();
                }
            }
            (false, permit) => drop(permit),
        }
        let fail = |message: String| DynamoError::Call {
            operation,
            table: table.to_string(),
            message,
            failure: Some(failure),
        };
        if !failure.is_retryable() {
            return Err(fail(message));
        }
        if attempt >= policy.max_attempts {
            return Err(fail(format!(
                "still failing after {attempt} attempts: {message}"
            )));
        }
        *retries += 1;
        let delay = policy.delay(attempt, &mut rand::rng());
        tracing::debug!(table, operation, attempt, ?delay, %message, "retrying");
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests;
