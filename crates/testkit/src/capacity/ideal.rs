//! The ideal time of a load under the model: the write units of its items
//! over the capacity the table and its partitions allow.

use serde::Serialize;
use serde_json::Value as Json;

use super::config::{CapacityConfig, TableCapacity};
use super::meter::{key_hash, TableSchema};

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

/// The ideal time of writing `items` (DynamoDB JSON) into a table of
/// `schema` under `config`: total units over the table's rate (an
/// on-demand table's warm throughput, not doubled), or the busiest
/// partition's units over a partition's rate, whichever is longer. Every
/// bucket starts with one second banked, so a client that keeps every
/// bucket busy finishes up to one model second before it.
pub fn ideal<'a>(
    config: &CapacityConfig,
    schema: &TableSchema,
    items: impl IntoIterator<Item = &'a Json>,
) -> Ideal {
    let mut partition_units = vec![0u64; config.partitions as usize];
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
        partition_units[(hash % u64::from(config.partitions)) as usize] += cost.table;
    }
    let table_rate = match config.table {
        TableCapacity::Provisioned { wcu, .. } => wcu,
        TableCapacity::OnDemand { warm_wcu, .. } => warm_wcu,
    } as f64;
    let busiest = partition_units.iter().copied().max().unwrap_or(0);
    let table_seconds = units as f64 / table_rate;
    let partition_seconds = busiest as f64 / config.partition_wcu as f64;
    Ideal {
        items: count,
        write_units: units,
        partition_units,
        table_seconds,
        partition_seconds,
        ideal_seconds: table_seconds.max(partition_seconds),
        unmetered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_or_the_busiest_partition_decides() {
        let config = CapacityConfig::provisioned(2000, 8, 250);
        let schema = TableSchema {
            partition_key: "PK".into(),
            ..TableSchema::default()
        };
        let uniform: Vec<Json> = (0..20_000)
            .map(|n| json!({ "PK": { "S": format!("ITEM#{n}") } }))
            .collect();
        let i = ideal(&config, &schema, &uniform);
        assert_eq!((i.items, i.write_units), (20_000, 20_000));
        assert_eq!(i.table_seconds, 10.0);
        assert!(i.partition_seconds < 11.0, "{i:?}");
        assert_eq!(i.ideal_seconds, i.table_seconds.max(i.partition_seconds));
        // A fifth of the items on one key: its partition takes 16 s alone.
        let skewed: Vec<Json> = (0..20_000)
            .map(|n| match n % 5 {
                0 => json!({ "PK": { "S": "HOT" } }),
                _ => json!({ "PK": { "S": format!("ITEM#{n}") } }),
            })
            .chain([json!({ "SK": { "S": "no partition key" } })])
            .collect();
        let s = ideal(&config, &schema, &skewed);
        assert!(s.partition_seconds >= 16.0, "{s:?}");
        assert_eq!(s.ideal_seconds, s.partition_seconds);
        assert_eq!(s.unmetered, 1);
    }
}
