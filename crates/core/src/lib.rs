//! Plain data shared by every sql2ddb crate: SQL values and rows as read from
//! a source, DynamoDB attribute values and items, work batches, update pages and rejects,
//! DynamoDB's size and number rules, and secret redaction. No IO.

#![warn(missing_docs)]

pub mod attr;
pub mod batch;
pub mod capacity;
pub mod duration;
pub mod encoded;
mod error;
pub mod json;
pub mod limits;
pub mod number;
pub mod pointer;
pub mod redact;
pub mod run_id;
pub mod shown;
mod structure;
pub mod suggest;
pub mod tagged;
pub mod update;
pub mod value;
pub mod wire;

pub use attr::{AttrValue, Attrs, Item};
pub use batch::{BatchPart, BatchPointer, Reject, WorkBatch};
pub use duration::{duration_text, parse_duration};
pub use encoded::{EncodedItem, ItemJson, MappedItem, SourceKey};
pub use error::FormatError;
pub use limits::{
    check_item, item_size, write_units, ItemProblem, KeyAttr, KeyType, UnknownKeyType,
};
pub use number::{normalize_number, NumberError};
pub use pointer::PointerUpdate;
pub use redact::{redact_secrets, redact_url};
pub use run_id::{BadRunId, RunId, MAX_RUN_ID_LEN};
pub use update::{UpdateChange, UpdatePage};
pub use value::{Column, Row, SqlValue};
