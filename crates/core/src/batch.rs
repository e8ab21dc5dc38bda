//! What travels from the reader to the writers (a page of a migration), and
//! what is set aside.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::attr::AttrValue;
use crate::encoded::EncodedItem;
use crate::pointer::PointerUpdate;
use crate::run_id::RunId;

/// One page of one segment of one entity, mapped and ready for the writers.
///
/// It travels through a queue as JSON (see `sql2ddb-queue`'s codec), so every
/// field is serialisable; `(run_id, entity, segment, page, part)` identifies
/// it, which keeps progress records deterministic under redelivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkBatch {
    /// Run id.
    pub run_id: RunId,
    /// Entity name.
    pub entity: String,
    /// Segment of the entity's key range.
    pub segment: u32,
    /// Page number within the segment, from 0.
    pub page: u64,
    /// Which part of the page this is, when the page had to be split to fit a queue message.
    #[serde(default)]
    pub part: BatchPart,
    /// Source rows this batch accounts for: its items plus the rows rejected
    /// while mapping (a split page puts those on part 0, so parts add up).
    pub rows_read: u64,
    /// Items to write, each serialised once when it was mapped.
    pub items: Vec<EncodedItem>,
    /// Pointer updates this page's rows call for, each written only after the
    /// item it points at is written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pointers: Vec<BatchPointer>,
}

/// A pointer update and the key of the item whose row produced it: a writer
/// moves the pointer only once it has written that item (so a pointer never
/// points at an item that does not exist yet, even when a page is split).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchPointer {
    /// The conditional update.
    pub update: PointerUpdate,
    /// Key attributes (partition key, then sort key) of the item it points at.
    pub item_key: Vec<AttrValue>,
}

/// The place of a batch among the parts its page was split into
/// ([`BatchPart::WHOLE`] for a page that was not split).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BatchPart {
    /// This part's number, from 0.
    pub index: u32,
    /// How many parts the page has.
    pub count: u32,
}

impl BatchPart {
    /// A page sent as one batch.
    pub const WHOLE: BatchPart = BatchPart { index: 0, count: 1 };
}

impl Default for BatchPart {
    fn default() -> Self {
        BatchPart::WHOLE
    }
}

/// A row that could not become an item, with everything needed to fix and replay it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reject {
    /// Entity name.
    pub entity: String,
    /// The source row's key.
    pub key: Json,
    /// The column at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// Why the row was rejected.
    pub reason: String,
    /// The whole source row (or the mapped item, for rejects found at write time).
    pub row: Json,
}
