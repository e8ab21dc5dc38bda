//! `[[target.gsi]]` and `billing`: the table's global secondary indexes and
//! how a created table is billed.

// One definition of each, shared with the planner and table admin.
pub use sql2ddb_core::capacity::{Billing, Projection};
use sql2ddb_core::KeyAttr;

/// Most global secondary indexes a DynamoDB table may have.
pub const MAX_GSIS: usize = 20;
/// Most non-key attributes all `include` projections of a table may name together.
pub const MAX_PROJECTED_ATTRIBUTES: usize = 100;

/// One `[[target.gsi]]`: a global secondary index of the target table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gsi {
    /// Index name.
    pub name: String,
    /// The index's partition key.
    pub pk: KeyAttr,
    /// The index's sort key, if any.
    pub sk: Option<KeyAttr>,
    /// Which attributes the index holds.
    pub projection: Projection,
}

impl Gsi {
    /// Partition key, then the sort key if any.
    pub fn keys(&self) -> Vec<KeyAttr> {
        std::iter::once(self.pk.clone())
            .chain(self.sk.clone())
            .collect()
    }
}
