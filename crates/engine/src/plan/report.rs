//! What `sql2ddb plan` reports: per entity and in total, the rows, item
//! sizes, write units, cost, time, hot partitions, key collisions, sample
//! items and sample rejects. Serialised as is by `--json`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value as Json;

use super::prices::Prices;
use super::size::SizeStats;

/// The whole plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// The mapping's target table.
    pub table: String,
    /// The source, its password masked.
    pub source: String,
    /// Rows per entity asked for the sample.
    pub sample_size: usize,
    /// Per entity, in mapping order.
    pub entities: Vec<EntityPlan>,
    /// The sums over the entities.
    pub totals: Totals,
    /// The prices used.
    pub prices: Prices,
    /// What the migration costs.
    pub cost: Cost,
    /// How long writing takes at each rate considered.
    pub time: Vec<Duration>,
    /// The three ways to load the items, compared: cost and time where
    /// published.
    pub load_paths: Vec<LoadPath>,
    /// The partition keys with the most items, all entities together.
    pub hot_partitions: Vec<Partition>,
    /// The write units per second the hot partitions were judged at, and why.
    pub planned_wcu_per_second: f64,
    /// Where `planned_wcu_per_second` comes from.
    pub planned_rate_from: String,
    /// The fleet the times are predicted for (`--workers`).
    pub fleet: super::FleetPlan,
    /// The time the capacity model allows (`--capacity`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<super::CapacityPrediction>,
    /// Anything to act on before running.
    pub warnings: Vec<String>,
}

impl PlanReport {
    /// Writes `report.json` into `dir` (created), and returns its path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, crate::EngineError> {
        std::fs::create_dir_all(dir).map_err(|e| crate::EngineError::io(dir, e))?;
        let path = dir.join("report.json");
        let json = serde_json::to_vec_pretty(self).expect("the plan serialises");
        std::fs::write(&path, json).map_err(|e| crate::EngineError::io(&path, e))?;
        Ok(path)
    }
}

/// One entity's numbers.
#[derive(Debug, Clone, Serialize, Default)]
pub struct EntityPlan {
    /// Entity name.
    pub name: String,
    /// Rows of the source: exact count, or the catalog's estimate.
    pub rows: u64,
    /// Whether `rows` is the catalog's estimate.
    pub rows_estimated: bool,
    /// Rows read for the sample.
    pub sampled_rows: u64,
    /// Whether every row was sampled (every figure below is then exact).
    pub exact: bool,
    /// Sizes of the sampled items.
    pub item_size: SizeStats,
    /// Items expected: rows less the share the sample rejected.
    pub items: u64,
    /// Table write units (1 KB rounding per item), scaled from the sample.
    pub write_units: u64,
    /// Per index: items projected, their size, write units.
    pub indexes: Vec<IndexPlan>,
    /// Bytes stored in the table (items plus DynamoDB's 100 bytes each).
    pub storage_bytes: u64,
    /// Bytes of the items as DynamoDB-JSON lines (what an import from S3 bills).
    pub import_bytes: u64,
    /// Whether the partition counts come from a `GROUP BY` (else the sample).
    pub partitions_exact: bool,
    /// Rows that share their key template's values with another row.
    pub collisions: Collisions,
    /// Up to three sampled items, as DynamoDB JSON.
    pub sample_items: Vec<Json>,
    /// Sampled rows the mapping rejected, by reason.
    pub rejects: Vec<RejectReason>,
    /// Rows with a NULL in a column the key templates read (exact; `None`
    /// with `--estimate`, where the sample's rejects show them): `run`
    /// rejects them.
    pub null_key_rows: Option<u64>,
}

/// One index, as an entity's items are projected into it.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct IndexPlan {
    /// Index name.
    pub name: String,
    /// `all`, `keys_only` or `include`.
    pub projection: String,
    /// Items that carry the index's keys (are written to it).
    pub items: u64,
    /// Projected sizes of those items.
    pub projected_size: SizeStats,
    /// Write units the index costs (1 KB rounding of the projected size).
    pub write_units: u64,
    /// Bytes the index stores (projected size plus 100 bytes each).
    pub storage_bytes: u64,
}

/// Rows that map to one key.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Collisions {
    /// Whether found by a `GROUP BY … HAVING count(*) > 1` (else in the sample).
    pub exact: bool,
    /// Keys that more than one row maps to.
    pub keys: u64,
    /// Rows that map to those keys.
    pub rows: u64,
    /// The largest, as `PK | SK` with the rows of each.
    pub examples: Vec<KeyCount>,
}

/// A key and how many rows map to it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KeyCount {
    /// The key, `PK` or `PK | SK`.
    pub key: String,
    /// Rows.
    pub rows: u64,
}

/// Sampled rejects of one reason.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RejectReason {
    /// The column at fault, when one is.
    pub column: Option<String>,
    /// Why.
    pub reason: String,
    /// Sampled rows rejected for it.
    pub rows: u64,
    /// The source key of the first such row.
    pub example_key: Json,
}

/// One partition key's load.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Partition {
    /// The partition key value.
    pub key: String,
    /// The entities whose items land in it.
    pub entities: Vec<String>,
    /// Items in it.
    pub items: u64,
    /// Bytes in it (items times their entity's mean size).
    pub bytes: u64,
    /// Table write units to write its items.
    pub write_units: u64,
    /// Write units per second it needs at the planned rate.
    pub wcu_per_second: f64,
}

/// The sums over the entities.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Totals {
    /// Source rows.
    pub rows: u64,
    /// Items expected.
    pub items: u64,
    /// Table write units.
    pub write_units: u64,
    /// Index write units.
    pub index_write_units: u64,
    /// Table and index storage.
    pub storage_bytes: u64,
    /// DynamoDB-JSON bytes an import from S3 reads.
    pub import_bytes: u64,
}

/// The money.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct Cost {
    /// Write request units (table and indexes) times the on-demand price.
    pub writes_usd: f64,
    /// A month of the table's and indexes' storage.
    pub storage_month_usd: f64,
    /// DynamoDB's import from S3 (a new table only; no write units billed).
    pub import_from_s3_usd: f64,
}

/// The time to write at one rate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Duration {
    /// What the rate is (`--rate`, `max_wcu`, on-demand limits).
    pub at: String,
    /// Seconds.
    pub seconds: f64,
    /// Seconds for the fleet of `--workers` (more than one): the same rate,
    /// shared, and the fleet's join.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet_seconds: Option<f64>,
}

/// One way to load the items.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoadPath {
    /// The path: `writes (on demand)`, `writes (provisioned)`,
    /// `import from S3`, `bulk put items`.
    pub path: String,
    /// Which table it loads: `new or existing`, `new only`, `existing only`.
    pub table: &'static str,
    /// US dollars, when the price is known.
    pub cost_usd: Option<f64>,
    /// What the cost is made of, or why there is none.
    pub cost_basis: String,
    /// Seconds, when the rate is known.
    pub seconds: Option<f64>,
    /// What the time is made of, or why there is none.
    pub time_basis: String,
}
