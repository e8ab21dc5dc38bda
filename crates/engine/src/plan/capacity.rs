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

use super::retries::{self, KeyLoad, PartitionLoad, RetryEstimate};
use super::workers::FleetPlan;
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
    /// Seconds the run's write-capacity cap (`max_wcu`) needs for every
    /// unit, when one is set.
    pub cap_seconds: Option<f64>,
    /// The predicted time of the fleet of `--workers` (one by default):
    /// the longer of `seconds` and `cap_seconds`, which do not shrink with
    /// the workers (they share one cap and one table), plus the fleet's
    /// join.
    pub fleet_seconds: f64,
    /// What `fleet_seconds` is made of.
    pub fleet_basis: String,
    /// The items the pacer is predicted to refuse and send again.
    pub retries: RetryEstimate,
}

/// The items of every entity, metered and placed in their partitions.
pub(super) struct CapacityLoad {
    options: CapacityOptions,
    limits: CapacityLimits,
    schema: TableSchema,
    items: f64,
    units: f64,
    partitions: Vec<PartitionLoad>,
    /// Each partition key value seen: its partition, units and items.
    keys: HashMap<String, KeyLoad>,
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
            partitions: vec![PartitionLoad::default(); limits.partitions as usize],
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
            self.partitions[p].units += cost.table as f64 * scale;
            self.partitions[p].items += scale;
            let key = match m.item.get(&self.schema.partition_key) {
                Some(AttrValue::S(s)) | Some(AttrValue::N(s)) => s.clone(),
                Some(v) => v.to_dynamo_json().to_string(),
                None => continue,
            };
            let k = self.keys.entry(key).or_insert(KeyLoad {
                partition: p,
                ..KeyLoad::default()
            });
            k.units += cost.table as f64 * scale;
            k.items += scale;
            k.sampled += 1;
        }
    }

    /// The prediction for `fleet`, which shares the run's cap.
    pub(super) fn predict(self, fleet: &FleetPlan) -> CapacityPrediction {
        let round = |v: f64| v.round() as u64;
        let ideal = Ideal::from_units(
            &self.limits,
            round(self.items),
            round(self.units),
            self.partitions.iter().map(|l| round(l.units)).collect(),
            0,
        );
        let busiest = ideal.busiest_partition().unwrap_or(0);
        let hot = self
            .keys
            .iter()
            .filter(|(_, k)| k.partition == busiest)
            .max_by(|a, b| a.1.units.total_cmp(&b.1.units).then_with(|| b.0.cmp(a.0)));
        let busiest_units = self.partitions.get(busiest).map_or(0.0, |l| l.units);
        let table = match self.options.table {
            TableMode::OnDemand => format!("on-demand (warm {} WCU/s)", self.limits.table_wcu),
            TableMode::Provisioned(wcu) => format!("provisioned {wcu} WCU/s"),
        };
        let cap_seconds = fleet
            .cap_wcu
            .map(|c| ideal.write_units as f64 / c.max(1) as f64);
        let fleet_basis = fleet_basis(&ideal, cap_seconds, fleet);
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
                (Some((_, k)), true) => k.units / busiest_units,
                _ => 0.0,
            },
            cap_seconds,
            fleet_seconds: {
                let bound = cap_seconds.unwrap_or(0.0).max(ideal.ideal_seconds);
                fleet.fleet_seconds(bound).unwrap_or(bound)
            },
            fleet_basis,
            retries: retries::estimate(
                &self.limits,
                fleet.cap_wcu,
                self.units,
                &self.partitions,
                self.keys.values(),
            ),
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

/// What the fleet's time is made of: the bound that decides, then the
/// fleet's share and join.
fn fleet_basis(ideal: &Ideal, cap_seconds: Option<f64>, fleet: &FleetPlan) -> String {
    let bound = match (fleet.cap_wcu, cap_seconds) {
        (Some(c), Some(s)) if s > ideal.ideal_seconds => {
            format!("max_wcu {c} WCU/s decides, slower than the table's capacity")
        }
        _ if ideal.partition_seconds > ideal.table_seconds => {
            "the busiest partition's rate decides".to_string()
        }
        _ => "the table's rate decides".to_string(),
    };
    match fleet.workers {
        1 => format!("{bound}; one process"),
        n => format!(
            "{bound}; {n} workers share one cap and one table, and add at most {:.0} s for their join",
            fleet.join_seconds
        ),
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

#[cfg(test)]
mod tests;
