//! DynamoDB's capacity rules, as the planner and the test kit's capacity
//! model both apply them: what a write costs (its size rounded up to 1 KB,
//! again for each global secondary index it projects into), what a read
//! costs (4 KB rounding, an eventually consistent read half a unit), which
//! partition an item lands in (a stable hash of its partition key value),
//! and the ideal time of a load: its write units over what the table and
//! its busiest partition allow, whichever takes longer.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::{item_size, normalize_number, write_units, AttrValue, Item};

/// A partition's write units per second in DynamoDB.
pub const PARTITION_WCU: u64 = 1_000;
/// A partition's read units per second in DynamoDB.
pub const PARTITION_RCU: u64 = 3_000;
/// Seconds of unused capacity DynamoDB banks as burst credit.
pub const BURST_SECS: f64 = 300.0;
/// A new on-demand table's warm write throughput.
pub const ON_DEMAND_WARM_WCU: u64 = 4_000;
/// The default per-table write quota of an account.
pub const TABLE_QUOTA_WCU: u64 = 40_000;
/// How long on-demand traffic stays near the warm throughput before it
/// doubles (DynamoDB: "double the previous peak within 30 minutes").
pub const ON_DEMAND_DOUBLE_AFTER_SECS: f64 = 1_800.0;
/// Bytes of one read unit.
pub const READ_UNIT_BYTES: usize = 4096;

/// A global secondary index.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GsiConfig {
    /// The index's name.
    pub name: String,
    /// Its partition key attribute.
    pub partition_key: String,
    /// Its sort key attribute, if any.
    #[serde(default)]
    pub sort_key: Option<String>,
    /// What it holds of an item.
    #[serde(default)]
    pub projection: Projection,
}

/// What a global secondary index holds of each item it projects: the one
/// definition the mapping, the planner, table admin and the test kit share.
/// As JSON: `"ALL"`, `"KEYS_ONLY"` or the list of attributes (`INCLUDE`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(from = "ProjectionForm")]
pub enum Projection {
    /// Every attribute (the default).
    #[default]
    All,
    /// Only the table's and the index's key attributes.
    KeysOnly,
    /// The keys and these attributes.
    Include(Vec<String>),
}

/// How a projection is written in JSON.
#[derive(Deserialize)]
#[serde(untagged)]
enum ProjectionForm {
    Kind(ProjectionKind),
    Include(Vec<String>),
}

#[derive(Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum ProjectionKind {
    All,
    KeysOnly,
}

impl From<ProjectionForm> for Projection {
    fn from(form: ProjectionForm) -> Self {
        match form {
            ProjectionForm::Kind(ProjectionKind::All) => Projection::All,
            ProjectionForm::Kind(ProjectionKind::KeysOnly) => Projection::KeysOnly,
            ProjectionForm::Include(attrs) => Projection::Include(attrs),
        }
    }
}

/// How a table created for a mapping (and each of its indexes) is billed;
/// an existing table's billing is left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Billing {
    /// Pay per request (`PAY_PER_REQUEST`, the default).
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

/// The write units of one write: the table's and each index's it projects into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteCost {
    /// Units of the table's own write.
    pub table: u64,
    /// Units of each index written, by name.
    pub indexes: Vec<(String, u64)>,
}

impl WriteCost {
    /// Every unit of the write.
    pub fn total(&self) -> u64 {
        self.table + self.indexes.iter().map(|(_, u)| u).sum::<u64>()
    }
}

/// A table's key attribute names, partition key first, and its indexes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableSchema {
    /// The partition key's attribute name.
    pub partition_key: String,
    /// The sort key's, if the table has one.
    pub sort_key: Option<String>,
    /// The global secondary indexes.
    pub indexes: Vec<GsiConfig>,
}

impl TableSchema {
    /// The cost of putting `item` (DynamoDB JSON): see [`Self::item_cost`].
    /// `None` when `item` is not an item.
    pub fn put_cost(&self, item: &Json) -> Option<WriteCost> {
        let item = Item::deserialize(item).ok()?;
        Some(self.item_cost(&item))
    }

    /// The cost of putting `item`: its size rounded up to 1 KB, then again
    /// for each index whose keys it has, by the size of what the index
    /// projects.
    pub fn item_cost(&self, item: &Item) -> WriteCost {
        let size = item_size(item);
        let indexes = self
            .indexes
            .iter()
            .filter(|i| {
                item.contains_key(&i.partition_key)
                    && i.sort_key.as_ref().is_none_or(|k| item.contains_key(k))
            })
            .map(|i| {
                (
                    i.name.clone(),
                    write_units(self.projected_size(item, i, size)),
                )
            })
            .collect();
        WriteCost {
            table: write_units(size),
            indexes,
        }
    }

    /// The hash of `item`'s partition key value ([`key_hash`]); `None`
    /// when it has none.
    pub fn item_hash(&self, item: &Item) -> Option<u64> {
        item.get(&self.partition_key).and_then(attr_hash)
    }

    /// The cost of a write whose stored item is not known (a delete, an
    /// update): what the call carries, its key and values, rounded up to
    /// 1 KB; indexes not counted.
    pub fn carried_cost(parts: &[&Json]) -> WriteCost {
        let size: usize = parts
            .iter()
            .filter_map(|p| Item::deserialize(*p).ok())
            .map(|i| item_size(&i))
            .sum();
        WriteCost {
            table: write_units(size),
            indexes: Vec::new(),
        }
    }

    fn projected_size(&self, item: &Item, index: &GsiConfig, whole: usize) -> usize {
        let mut names: Vec<&str> = [Some(&self.partition_key), self.sort_key.as_ref()]
            .into_iter()
            .chain([Some(&index.partition_key), index.sort_key.as_ref()])
            .flatten()
            .map(String::as_str)
            .collect();
        match &index.projection {
            Projection::All => return whole,
            Projection::KeysOnly => {}
            Projection::Include(more) => names.extend(more.iter().map(String::as_str)),
        }
        names.sort_unstable();
        names.dedup();
        let projected: Item = names
            .into_iter()
            .filter_map(|n| item.get(n).map(|v| (n.to_string(), v.clone())))
            .collect();
        item_size(&projected)
    }
}

/// Read units, in half units, of reading `bytes`: rounded up to 4 KB, a
/// unit per 4 KB strongly consistent, half that eventually consistent.
/// A read of nothing (an absent item) still costs the minimum.
pub fn read_half_units(bytes: usize, consistent: bool) -> u64 {
    let blocks = bytes.div_ceil(READ_UNIT_BYTES).max(1) as u64;
    match consistent {
        true => blocks * 2,
        false => blocks,
    }
}

/// A stable hash of a key attribute's value (DynamoDB JSON, `{"S": "…"}`):
/// its type and its value, numbers by value (`5` and `5.0` alike).
pub fn key_hash(value: &Json) -> Option<u64> {
    let (kind, text) = value.as_object()?.iter().next()?;
    hash_typed(kind, text.as_str()?)
}

/// [`key_hash`] of an attribute value.
pub fn attr_hash(value: &AttrValue) -> Option<u64> {
    match value {
        AttrValue::S(s) => hash_typed("S", s),
        AttrValue::N(n) => hash_typed("N", n),
        other => key_hash(&other.to_dynamo_json()),
    }
}

fn hash_typed(kind: &str, text: &str) -> Option<u64> {
    let normalized;
    let text = if kind == "N" {
        normalized = normalize_number(text).ok()?;
        normalized.as_str()
    } else {
        text
    };
    // FNV-1a: stable across processes and versions, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in kind.bytes().chain([0]).chain(text.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV's low bits mix poorly for short keys: fold the high ones in.
    Some(hash ^ (hash >> 29) ^ (hash >> 47))
}

/// What a table allows writes at: the rates the ideal time is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CapacityLimits {
    /// The table's write units per second (provisioned, or an on-demand
    /// table's warm throughput).
    pub table_wcu: u64,
    /// Partitions of the table.
    pub partitions: u32,
    /// Write units per second of each partition.
    pub partition_wcu: u64,
}

impl CapacityLimits {
    /// The partition of a partition key whose [`key_hash`] is `hash`.
    pub fn partition_of(&self, hash: u64) -> usize {
        (hash % u64::from(self.partitions.max(1))) as usize
    }
}

/// How long the model needs at least to admit a set of items.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ideal {
    /// Items counted.
    pub items: u64,
    /// Their write units, the table's and its indexes'.
    pub write_units: u64,
    /// The table's own write units per partition.
    pub partition_units: Vec<u64>,
    /// Model seconds the table's rate needs for every unit.
    pub table_seconds: f64,
    /// Model seconds the busiest partition's rate needs for its units.
    pub partition_seconds: f64,
    /// The larger of the two: the ideal time, in model seconds.
    pub ideal_seconds: f64,
    /// Items that could not be metered (no partition key, not an item).
    pub unmetered: u64,
}

impl Ideal {
    /// The ideal time of `write_units` in all, of which each partition
    /// takes `partition_units` (the table's own write units).
    pub fn from_units(
        limits: &CapacityLimits,
        items: u64,
        write_units: u64,
        partition_units: Vec<u64>,
        unmetered: u64,
    ) -> Ideal {
        let busiest = partition_units.iter().copied().max().unwrap_or(0);
        let table_seconds = write_units as f64 / limits.table_wcu.max(1) as f64;
        let partition_seconds = busiest as f64 / limits.partition_wcu.max(1) as f64;
        Ideal {
            items,
            write_units,
            partition_units,
            table_seconds,
            partition_seconds,
            ideal_seconds: table_seconds.max(partition_seconds),
            unmetered,
        }
    }

    /// The busiest partition's index.
    pub fn busiest_partition(&self) -> Option<usize> {
        let max = *self.partition_units.iter().max()?;
        self.partition_units.iter().position(|&u| u == max)
    }
}

/// The ideal time of writing `items` (DynamoDB JSON) into a table of
/// `schema` at `limits`: total units over the table's rate, or the busiest
/// partition's units over a partition's rate, whichever is longer.
pub fn ideal<'a>(
    limits: &CapacityLimits,
    schema: &TableSchema,
    items: impl IntoIterator<Item = &'a Json>,
) -> Ideal {
    let mut partition_units = vec![0u64; limits.partitions.max(1) as usize];
    let (mut count, mut units, mut unmetered) = (0, 0, 0);
    for item in items {
        let metered = item
            .get(&schema.partition_key)
            .and_then(key_hash)
            .zip(schema.put_cost(item));
        let Some((hash, cost)) = metered else {
            unmetered += 1;
            continue;
        };
        count += 1;
        units += cost.total();
        partition_units[limits.partition_of(hash)] += cost.table;
    }
    Ideal::from_units(limits, count, units, partition_units, unmetered)
}

#[cfg(test)]
mod tests;
