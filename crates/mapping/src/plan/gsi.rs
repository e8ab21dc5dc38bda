//! `[[target.gsi]]` and `billing`: the table's global secondary indexes and
//! how a created table is billed.

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
    pub projection: GsiProjection,
}

impl Gsi {
    /// Partition key, then the sort key if any.
    pub fn keys(&self) -> Vec<KeyAttr> {
        std::iter::once(self.pk.clone())
            .chain(self.sk.clone())
            .collect()
    }
}

/// `projection = "all" | "keys_only" | { include = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GsiProjection {
    /// Every attribute (the default).
    #[default]
    All,
    /// Only key attributes.
    KeysOnly,
    /// Key attributes and these.
    Include(Vec<String>),
}

/// `billing = "on-demand" | { read = N, write = N }` under `[target]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Billing {
    /// Pay per request (the default).
    #[default]
    OnDemand,
    /// Provisioned capacity, for the table and each of its indexes.
    Provisioned {
        /// Read capacity units.
        read: u64,
        /// Write capacity units.
        write: u64,
    },
}
