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

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::scan::ScanOutput;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure,
};
use aws_sdk_dynamodb::Client;
use sql2ddb_core::{AttrValue, Item, KeyAttr, UpdateChange};

use crate::client::Dynamo;
use crate::concurrency::AdaptiveConcurrency;
use crate::convert::{item_from_sdk, item_to_sdk, to_sdk};
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::pacer::{Pacer, Sent};
use crate::writer::RetryPolicy;

mod attempt;
mod describe;
use attempt::{retrying, Attempt, Gate};
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

/// A page's start or end (DynamoDB's `LastEvaluatedKey`): the key
/// attributes of the last item evaluated, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageKey(pub Item);

/// A key as the SDK takes it.
type SdkKey = HashMap<String, AttributeValue>;

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

impl ConditionalWrite {
    /// The write as it travels in a queued batch, with the table's `keys`.
    pub fn to_change(&self, keys: &[KeyAttr]) -> UpdateChange {
        UpdateChange {
            table: self.table.clone(),
            keys: keys.to_vec(),
            update: self.update.clone(),
            condition: self.condition.clone(),
            names: self.placeholders.names.clone().into_iter().collect(),
            values: self.placeholders.values.clone().into_iter().collect(),
            own_mark: self.own_mark.clone(),
        }
    }

    /// The write a queued batch's change describes.
    pub fn from_change(change: &UpdateChange) -> ConditionalWrite {
        ConditionalWrite {
            table: change.table.clone(),
            update: change.update.clone(),
            condition: change.condition.clone(),
            placeholders: Placeholders {
                names: change.names.clone().into_iter().collect(),
                values: change.values.clone().into_iter().collect(),
            },
            own_mark: change.own_mark.clone(),
        }
    }
}

/// Reads one page from `start`, retrying as the module says.
pub async fn read_page(
    dynamo: &Dynamo,
    req: &PageRequest,
    start: Option<PageKey>,
    policy: &RetryPolicy,
) -> Result<Page, DynamoError> {
    let client = dynamo.sdk();
    let op = if req.index.is_some() { "Query" } else { "Scan" };
    let mut page = Page::default();
    let (retries, throttled) = (&mut page.retries, &mut page.throttled);
    let start: Option<SdkKey> = start.map(|k| item_to_sdk(&k.0));
    let gate = Gate::default();
    let raw = retrying(policy, gate, &req.table, op, retries, throttled, || {
        let start = start.clone();
        async move {
            match &req.index {
                Some(index) => send_query(client, req, index, start).await,
                None => send_scan(client, req, start).await,
            }
        }
    })
    .await?;
    page.items = raw
        .items
        .unwrap_or_default()
        .iter()
        .map(item_from_sdk)
        .collect();
    page.scanned = raw.scanned.max(0) as u64;
    page.next = raw
        .next
        .filter(|k| !k.is_empty())
        .map(|k| PageKey(item_from_sdk(&k)));
    page.read_units = units(raw.consumed.as_ref());
    Ok(page)
}

/// What a page is made of, from a Scan's or a Query's answer.
struct RawPage {
    items: Option<Vec<HashMap<String, AttributeValue>>>,
    scanned: i32,
    next: Option<SdkKey>,
    consumed: Option<ConsumedCapacity>,
}

impl From<QueryOutput> for RawPage {
    fn from(o: QueryOutput) -> RawPage {
        RawPage {
            items: o.items,
            scanned: o.scanned_count,
            next: o.last_evaluated_key,
            consumed: o.consumed_capacity,
        }
    }
}

impl From<ScanOutput> for RawPage {
    fn from(o: ScanOutput) -> RawPage {
        RawPage {
            items: o.items,
            scanned: o.scanned_count,
            next: o.last_evaluated_key,
            consumed: o.consumed_capacity,
        }
    }
}

/// `Limit` as the SDK takes it.
fn sdk_limit(req: &PageRequest) -> Option<i32> {
    req.limit.map(|l| l.min(i32::MAX as usize) as i32)
}

async fn send_query(
    client: &Client,
    req: &PageRequest,
    index: &str,
    start: Option<SdkKey>,
) -> Result<RawPage, Attempt> {
    client
        .query()
        .table_name(&req.table)
        .index_name(index)
        .set_key_condition_expression(req.key_condition.clone())
        .set_filter_expression(req.filter.clone())
        .set_expression_attribute_names(req.placeholders.sdk_names())
        .set_expression_attribute_values(req.placeholders.sdk_values())
        .set_limit(sdk_limit(req))
        .set_exclusive_start_key(start)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .map(RawPage::from)
        .map_err(Attempt::of)
}

async fn send_scan(
    client: &Client,
    req: &PageRequest,
    start: Option<SdkKey>,
) -> Result<RawPage, Attempt> {
    client
        .scan()
        .table_name(&req.table)
        .set_segment(req.segment.map(|(s, _)| s as i32))
        .set_total_segments(req.segment.map(|(_, t)| t as i32))
        .set_filter_expression(req.filter.clone())
        .set_expression_attribute_names(req.placeholders.sdk_names())
        .set_expression_attribute_values(req.placeholders.sdk_values())
        .set_limit(sdk_limit(req))
        .set_exclusive_start_key(start)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .map(RawPage::from)
        .map_err(Attempt::of)
}

/// How a job paces its conditional writes: its pacer, and what it knows
/// of one item.
#[derive(Debug, Clone, Copy)]
pub struct Pace<'a> {
    /// The job's pacer (one per process, shared by its writes).
    pub pacer: &'a Pacer,
    /// The item's write units (an estimate from its size).
    pub units: u64,
    /// Whether its partition key has few items in its page (as many as
    /// one `BatchWriteItem` carries, or fewer): throttles of such items
    /// over a second say the table is at its limit; a key with more items
    /// is paced on its own, from its first item once the pacer knows the
    /// rate keys settle at.
    pub alone: bool,
}

/// Writes one item conditionally: its key is taken from `item` by `keys`
/// (the partition key first). With `pace`, each attempt waits its turn at
/// the rates the pacer learned and tells it how it was answered; a wait
/// after a refusal counts against the retry budget, the first one does not.
pub async fn write_item(
    dynamo: &Dynamo,
    write: &ConditionalWrite,
    keys: &[KeyAttr],
    item: &Item,
    policy: &RetryPolicy,
    concurrency: Option<&AdaptiveConcurrency>,
    pace: Option<Pace<'_>>,
) -> Result<ItemWrite, DynamoError> {
    let client = dynamo.sdk();
    let key = item_key(write, keys, item)?;
    let op = if write.update.is_some() {
        "UpdateItem"
    } else {
        "DeleteItem"
    };
    let partition = keys.first().and_then(|k| item.get(&k.name));
    let pace = pace.zip(partition);
    if let Some((p, pk)) = pace {
        p.pacer.turn(pk, p.units, !p.alone).await;
    }
    let gate = Gate {
        concurrency,
        turn: pace.map(|(p, pk)| (p.pacer, pk, p.units, !p.alone)),
    };
    let (mut retries, mut throttled) = (0, 0);
    let (r, t) = (&mut retries, &mut throttled);
    let outcome = retrying(policy, gate, &write.table, op, r, t, || {
        let key = key.clone();
        async move {
            let sent = tokio::time::Instant::now();
            let consumed = match &write.update {
                Some(expression) => send_update(client, write, expression, key).await,
                None => send_delete(client, write, key).await,
            };
            if let Some((p, pk)) = pace {
                let refused = matches!(consumed, Err(Attempt::Failed(Failure::Throttled, _)));
                let item = Sent {
                    key: pk,
                    units: p.units,
                    alone: p.alone,
                };
                p.pacer.answered_one(sent, item, refused);
            }
            match consumed {
                Ok(c) => Ok(ItemOutcome::Written {
                    write_units: units(c.as_ref()),
                }),
                Err(Attempt::ConditionFailed) => Ok(ItemOutcome::Skipped),
                Err(Attempt::OwnWrite) => Ok(ItemOutcome::Written { write_units: 0.0 }),
                Err(e) => Err(e),
            }
        }
    })
    .await?;
    Ok(ItemWrite {
        outcome,
        retries,
        throttled,
    })
}

/// The table's key of `item`; an item lacking a key attribute is refused.
fn item_key(
    write: &ConditionalWrite,
    keys: &[KeyAttr],
    item: &Item,
) -> Result<SdkKey, DynamoError> {
    let key: SdkKey = keys
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
    Ok(key)
}

async fn send_update(
    client: &Client,
    write: &ConditionalWrite,
    expression: &str,
    key: SdkKey,
) -> Result<Option<ConsumedCapacity>, Attempt> {
    client
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
        })
}

async fn send_delete(
    client: &Client,
    write: &ConditionalWrite,
    key: SdkKey,
) -> Result<Option<ConsumedCapacity>, Attempt> {
    client
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
        .map_err(Attempt::of)
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

#[cfg(test)]
mod tests;
