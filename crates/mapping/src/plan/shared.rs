//! The validated parts entities, embeds and pointers share: where rows come
//! from and what fills an `attributes` entry.

use crate::error::Location;
use crate::spec::{AttrType, Invalid, NumericAs, TimeFormat};
use crate::template::Template;

/// Where an entity's rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntitySource {
    /// `from = "table"` or `"schema.table"`, as written.
    Table(String),
    /// `query = "SELECT …"`.
    Query(String),
}

/// One `[entity.attributes]` entry.
#[derive(Debug, Clone)]
pub(crate) struct AttrDef {
    pub name: String,
    pub kind: AttrKind,
}

#[derive(Debug, Clone)]
pub(crate) enum AttrKind {
    Template(Template),
    Column {
        column: String,
        at: Location,
        format: Option<(TimeFormat, Location)>,
        numeric_as: NumericAs,
        /// `type`: the DynamoDB type to write, whatever the column's.
        kind: Option<AttrType>,
        /// `invalid`; `None` takes the entity's.
        invalid: Option<Invalid>,
    },
}
