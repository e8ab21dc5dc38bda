//! The ideal time of a load under the model: the write units of its items
//! over the capacity the table and its partitions allow.

use serde_json::Value as Json;
pub use sql2ddb_core::capacity::Ideal;

use super::config::CapacityConfig;
use sql2ddb_core::capacity::TableSchema;

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
    sql2ddb_core::capacity::ideal(&config.limits(), schema, items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_on_demand_table_is_timed_at_its_warm_throughput() {
        let schema = TableSchema {
            partition_key: "PK".into(),
            ..TableSchema::default()
        };
        let items: Vec<Json> = (0..8_000)
            .map(|n| json!({ "PK": { "S": format!("ITEM#{n}") } }))
            .collect();
        // 8,000 units at 4,000 a second; 8 partitions of 1,000 take about
        // 1,000 units each, a second.
        let i = ideal(&CapacityConfig::on_demand(4_000, 8), &schema, &items);
        assert_eq!(i.table_seconds, 2.0);
        assert!(i.partition_seconds < 1.2, "{i:?}");
        assert_eq!(i.ideal_seconds, 2.0);
        let p = ideal(&CapacityConfig::provisioned(2_000, 8, 250), &schema, &items);
        assert_eq!(p.table_seconds, 4.0);
    }
}
