//! `plan --capacity`: the time DynamoDB's capacity allows for the mapping's
//! items, by the capacity model's own rules ([`sql2ddb_core::capacity`]):
//! each sampled item metered (1 KB rounding, again per index it projects
//! into), placed in its partition by a hash of its partition key, scaled to
//! the entity's rows; then every unit over the table's rate, or the busiest
//! partition's units over a partition's rate, whichever is longer.

use std::collections::HashMap;

use serde::Serialize;
use sql2ddb_core::capacity::{
    CapacityLimits, GsiConfig, Ideal, TableSchema, ON_DEMAND_WARM_WCU, PARTITION_WCU,
};
use sql2ddb_core::AttrValue;
use sql2ddb_mapping::Plan;

use crate::run::EntitySample;

/// The partition-bound time over the table-bound time past which the plan
/// warns: below it, the hash's unevenness, not a hot key.
pub const PARTITION_BOUND_WARNING: f64 = 1.25;

/// The table `plan --capacity` predicts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableMode {
    /// On demand, at its warm throughput.
    OnDemand,
    /// Provisioned at this many write units per second.
    Provisioned(u64),
}

/// The capacity a prediction is made for (`--capacity` and its options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityOptions {
    /// On demand or provisioned.
    pub table: TableMode,
    /// An on-demand table's warm write throughput (`--warm-wcu`).
    pub warm_wcu: u64,
    /// Partitions of the table (`--partitions`); `None`: as many as carry
    /// the table's rate at `partition_wcu` each, as DynamoDB splits a new
    /// table.
    pub partitions: Option<u32>,
    /// Write units per second of one partition (`--partition-wcu`).
    pub partition_wcu: u64,
}

impl CapacityOptions {
    /// DynamoDB's defaults for `table`.
    pub fn new(table: TableMode) -> CapacityOptions {
        CapacityOptions {
            table,
            warm_wcu: ON_DEMAND_WARM_WCU,
            partitions: None,
            partition_wcu: PARTITION_WCU,
        }
    }

    /// The rates of the model.
    pub fn limits(&self) -> CapacityLimits {
        let table_wcu = match self.table {
            TableMode::OnDemand => self.warm_wcu,
            TableMode::Provisioned(wcu) => wcu,
        }
        .max(1);
        let partition_wcu = self.partition_wcu.max(1);
        let needed = table_wcu
            .div_ceil(partition_wcu)
            .clamp(1, u64::from(u32::MAX)) as u32;
        CapacityLimits {
            table_wcu,
            partitions: self.partitions.unwrap_or(needed).max(1),
            partition_wcu,
        }
    }
}

/// What the model predicts for the mapping's items.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CapacityPrediction {
    /// `on-demand (warm 4000 WCU/s)` or `provisioned 2000 WCU/s`.
    pub table: String,
    /// The rates predicted with.
    pub limits: CapacityLimits,
    /// Items, scaled from the samples.
    pub items: u64,
    /// Write units, the table's and its indexes', scaled from the samples.
    pub write_units: u64,
    /// The table's own write units of each partition.
    pub partition_units: Vec<u64>,
    /// Seconds the table's rate needs for every unit.
    pub table_seconds: f64,
    /// Seconds the busiest partition's rate needs for its units.
    pub partition_seconds: f64,
    /// The predicted time: the longer of the two.
    pub seconds: f64,
    /// Whether the busiest partition, not the table, decides the time.
    pub partition_bound: bool,
    /// The busiest partition's index.
    pub busiest_partition: usize,
    /// The partition key value with the most units in it.
    pub hot_key: Option<String>,
    /// That key's share of its partition's units.
    pub hot_key_share: f64,
}

/// The items of every entity, metered and placed in their partitions.
pub(super) struct CapacityLoad {
    options: CapacityOptions,
    limits: CapacityLimits,
    schema: TableSchema,
    items: f64,
    units: f64,
    partitions: Vec<f64>,
    /// Units of each partition key value seen, and its partition.
    keys: HashMap<String, (usize, f64)>,
}

impl CapacityLoad {
    pub(super) fn new(mapping: &Plan, options: CapacityOptions) -> CapacityLoad {
        let limits = options.limits();
        CapacityLoad {
            options,
            limits,
            schema: schema_of(mapping),
            items: 0.0,
            units: 0.0,
            partitions: vec![0.0; limits.partitions as usize],
            keys: HashMap::new(),
        }
    }

    /// Adds an entity's sampled items, each standing for `scale` rows.
    pub(super) fn add(&mut self, sample: &EntitySample, scale: f64) {
        for m in &sample.items {
            let Some(hash) = self.schema.item_hash(&m.item) else {
                continue;
            };
            let cost = self.schema.item_cost(&m.item);
            let p = self.limits.partition_of(hash);
            self.items += scale;
            self.units += cost.total() as f64 * scale;
            self.partitions[p] += cost.table as f64 * scale;
            let key = match m.item.get(&self.schema.partition_key) {
                Some(AttrValue::S(s)) | Some(AttrValue::N(s)) => s.clone(),
                Some(v) => v.to_dynamo_json().to_string(),
                None => continue,
            };
            self.keys.entry(key).or_insert((p, 0.0)).1 += cost.table as f64 * scale;
        }
    }

    pub(super) fn predict(self) -> CapacityPrediction {
        let round = |v: f64| v.round() as u64;
        let ideal = Ideal::from_units(
            &self.limits,
            round(self.items),
            round(self.units),
            self.partitions.iter().map(|&u| round(u)).collect(),
            0,
        );
        let busiest = ideal.busiest_partition().unwrap_or(0);
        let hot = self
            .keys
            .iter()
            .filter(|(_, (p, _))| *p == busiest)
            .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1).then_with(|| b.0.cmp(a.0)));
        let busiest_units = self.partitions.get(busiest).copied().unwrap_or(0.0);
        let table = match self.options.table {
            TableMode::OnDemand => format!("on-demand (warm {} WCU/s)", self.limits.table_wcu),
            TableMode::Provisioned(wcu) => format!("provisioned {wcu} WCU/s"),
        };
        CapacityPrediction {
            table,
            limits: self.limits,
            items: ideal.items,
            write_units: ideal.write_units,
            table_seconds: ideal.table_seconds,
            partition_seconds: ideal.partition_seconds,
            seconds: ideal.ideal_seconds,
            partition_bound: ideal.partition_seconds > ideal.table_seconds,
            busiest_partition: busiest,
            hot_key: hot.map(|(k, _)| k.clone()),
            hot_key_share: match (hot, busiest_units > 0.0) {
                (Some((_, (_, u))), true) => u / busiest_units,
                _ => 0.0,
            },
            partition_units: ideal.partition_units,
        }
    }
}

impl CapacityPrediction {
    /// The warning when the busiest partition makes the run much longer
    /// than the table's rate would.
    pub fn warning(&self) -> Option<String> {
        if self.partition_seconds <= self.table_seconds * PARTITION_BOUND_WARNING {
            return None;
        }
        Some(format!(
            "at {}, partition {} (partition key {:?}, {:.0}% of its units) needs {:.1} s at {} WCU/s per partition, longer than the table's {:.1} s: the per-partition limit makes the run {:.1}x longer; spread that key (a shard suffix) to shorten it",
            self.table,
            self.busiest_partition,
            self.hot_key.as_deref().unwrap_or(""),
            self.hot_key_share * 100.0,
            self.partition_seconds,
            self.limits.partition_wcu,
            self.table_seconds,
            self.partition_seconds / self.table_seconds.max(f64::MIN_POSITIVE),
        ))
    }
}

/// The table's keys and indexes as the capacity rules read them.
fn schema_of(mapping: &Plan) -> TableSchema {
    let t = &mapping.target;
    TableSchema {
        partition_key: t.pk.name.clone(),
        sort_key: t.sk.as_ref().map(|k| k.name.clone()),
        indexes: t
            .gsis
            .iter()
            .map(|g| GsiConfig {
                name: g.name.clone(),
                partition_key: g.pk.name.clone(),
                sort_key: g.sk.as_ref().map(|k| k.name.clone()),
                projection: g.projection.clone(),
            })
            .collect(),
    }
}
