//! What travels from an update job's reader to the workers: a page of the
//! keys of matching items, with the change to apply to each.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::attr::AttrValue;
use crate::batch::BatchPart;
use crate::encoded::EncodedItem;
use crate::limits::KeyAttr;
use crate::run_id::RunId;

/// One page of an update job (`sql2ddb update --queue`): the keys of the
/// items that matched, and the change a worker applies to each instead of
/// writing them. It travels in a queue message format of its own, which
/// releases that know only migration pages refuse rather than write the keys
/// as items.
///
/// Its JSON names the keys `items` and the change `update`, as the format
/// has carried them since it was introduced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpdatePage {
    /// Run id.
    pub run_id: RunId,
    /// The job's name.
    pub entity: String,
    /// Segment of the table's read (a parallel scan's segment).
    pub segment: u32,
    /// Page number within the segment, from 0.
    pub page: u64,
    /// Which part of the page this is, when the page had to be split to fit a queue message.
    #[serde(default)]
    pub part: BatchPart,
    /// Matching items this page accounts for.
    pub rows_read: u64,
    /// The keys of the matching items.
    #[serde(rename = "items")]
    pub keys: Vec<EncodedItem>,
    /// The change to apply to each.
    #[serde(rename = "update")]
    pub change: UpdateChange,
}

/// The conditional write an update job makes of each matching item: an
/// `UpdateItem` with `update` as its expression, or a `DeleteItem` when
/// `update` is `None`, both with `condition` (the job's `where` again, the
/// item's existence, and for a non-idempotent change the run's marker).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpdateChange {
    /// The table.
    pub table: String,
    /// The table's key attributes (partition key first).
    pub keys: Vec<KeyAttr>,
    /// `UpdateExpression`; `None` deletes the item.
    pub update: Option<String>,
    /// `ConditionExpression`.
    pub condition: String,
    /// `ExpressionAttributeNames`.
    pub names: BTreeMap<String, String>,
    /// `ExpressionAttributeValues`.
    pub values: BTreeMap<String, AttrValue>,
    /// `(attribute, run id)` of a change that marks each item with its run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_mark: Option<(String, String)>,
}
