//! The fleet's time and the paced retry estimate, on the capacity bench's
//! table (2,000 WCU/s over 8 partitions of 250) and its three data sets of
//! 20,000 one-unit items (docs/performance.md).

use sql2ddb_core::{AttrValue, Item, MappedItem};
use sql2ddb_mapping::Plan;

use super::*;
use crate::plan::retries::FIRST_REFUSALS_PER_KEY;

fn mapping() -> Plan {
    let text = "version = 1\n[source]\nurl = \"sqlite://x.db\"\n[target]\ntable = \"tbl\"\npk = { name = \"PK\", type = \"S\" }\n[[entity]]\nname = \"e\"\nfrom = \"e\"\npk = \"E#{id}\"\n";
    Plan::parse(text, "m.toml".as_ref(), &|_| None).unwrap()
}

/// The bench's table: provisioned 2,000 WCU/s, 8 partitions of 250.
fn bench_table() -> CapacityOptions {
    CapacityOptions {
        partitions: Some(8),
        partition_wcu: 250,
        ..CapacityOptions::new(TableMode::Provisioned(2000))
    }
}

/// A sample of one-unit items with these partition keys, in this order.
fn sample(keys: impl Iterator<Item = String>) -> EntitySample {
    let items: Vec<MappedItem> = keys
        .map(|k| {
            let item: Item = [("PK".to_string(), AttrValue::S(k))].into();
            MappedItem {
                size: sql2ddb_core::item_size(&item),
                item,
                source_key: serde_json::Value::Null,
            }
        })
        .collect();
    EntitySample {
        rows: items.len() as u64,
        items,
        rejects: Vec::new(),
    }
}

fn uniform() -> EntitySample {
    sample((0..20_000).map(|i| format!("ITEM#{i}")))
}

/// 100 collections of 200 items, in key order.
fn collections() -> EntitySample {
    sample((0..20_000).map(|i| format!("CUSTOMER#{}", i / 200)))
}

/// 4 keys of 1,000 items each, every other item a key of its own.
fn skewed() -> EntitySample {
    sample((0..20_000).map(|i| match i % 5 {
        0 => format!("HOT#{}", (i / 5) % 4),
        _ => format!("ITEM#{i}"),
    }))
}

fn predict(s: &EntitySample, scale: f64, fleet: &FleetPlan) -> CapacityPrediction {
    let mut load = CapacityLoad::new(&mapping(), bench_table());
    load.add(s, scale);
    load.predict(fleet)
}

#[test]
fn a_fleet_shares_the_cap_and_the_table_so_only_its_join_is_added() {
    let s = uniform();
    let one = predict(&s, 1.0, &FleetPlan::new(1, None));
    let four = predict(&s, 1.0, &FleetPlan::new(4, None));
    // 20,000 units at 2,000 WCU/s: the table's bound, whatever the fleet.
    assert_eq!(one.table_seconds, 10.0);
    assert_eq!(four.seconds, one.seconds);
    assert_eq!(one.cap_seconds, None);
    assert_eq!(one.fleet_seconds, one.seconds);
    assert_eq!(four.fleet_seconds, one.seconds + 5.0);
    assert!(
        four.fleet_basis
            .contains("4 workers share one cap and one table")
            && four.fleet_basis.contains("at most 5 s for their join"),
        "{}",
        four.fleet_basis
    );

    // A cap of 1,000 WCU/s, below the table's: 20 s, shared by the fleet.
    let capped_one = predict(&s, 1.0, &FleetPlan::new(1, Some(1000)));
    let capped_four = predict(&s, 1.0, &FleetPlan::new(4, Some(1000)));
    assert_eq!(capped_one.cap_seconds, Some(20.0));
    assert_eq!(capped_four.cap_seconds, Some(20.0));
    assert_eq!(capped_one.fleet_seconds, 20.0);
    assert_eq!(capped_four.fleet_seconds, 25.0);
    assert!(
        capped_four
            .fleet_basis
            .starts_with("max_wcu 1000 WCU/s decides")
            && capped_four.fleet_basis.contains("4 workers"),
        "{}",
        capped_four.fleet_basis
    );
}

#[test]
fn nothing_is_retried_when_a_cap_keeps_the_table_and_its_partitions_under_their_limits() {
    for s in [uniform(), collections(), skewed()] {
        let capped = predict(&s, 1.0, &FleetPlan::new(4, Some(500)));
        assert_eq!(capped.retries.items, 0, "{:?}", capped.retries);
        assert!(
            capped.retries.basis.starts_with("none"),
            "{:?}",
            capped.retries
        );
    }
    // At the table's rate the table is at its limit: the pacer's share.
    let at_table = predict(&uniform(), 1.0, &FleetPlan::new(1, Some(2000)));
    assert_eq!(at_table.retries.at_limit, 1000);
}

#[test]
fn a_hot_partition_under_a_cap_is_at_its_limit_alone() {
    // At 1,800 WCU/s the table is under its limit, but a partition with a
    // hot key (1,000 units and its share of the rest) gets more than 250.
    let p = predict(&skewed(), 1.0, &FleetPlan::new(1, Some(1800)));
    let busiest = p.partition_units[p.busiest_partition] as f64;
    assert!(1800.0 * busiest / 20_000.0 >= 250.0, "{busiest}");
    assert!(p.retries.keys >= 1, "{:?}", p.retries);
    assert!(
        p.retries.at_limit > 0 && p.retries.at_limit < 1000,
        "{:?}",
        p.retries
    );
}

/// Within `tolerance` of the bench's measured figure.
fn near(predicted: u64, measured: f64, tolerance: f64) -> bool {
    (predicted as f64 - measured).abs() <= measured * tolerance
}

#[test]
fn the_estimate_grows_with_collections_and_hot_keys_and_is_near_the_bench() {
    let fleet = FleetPlan::new(1, None);
    let u = predict(&uniform(), 1.0, &fleet).retries;
    let c = predict(&collections(), 1.0, &fleet).retries;
    let k = predict(&skewed(), 1.0, &fleet).retries;
    // One process's bench figures: 922, 1,581 and 1,292 of 20,000.
    assert!(near(u.items, 922.0, 0.15), "{u:?}");
    assert!(near(c.items, 1581.0, 0.15), "{c:?}");
    assert!(near(k.items, 1292.0, 0.15), "{k:?}");
    assert_eq!((u.keys, c.keys, k.keys), (0, 100, 4));
    assert!(c.items > u.items && k.items > u.items);
    // A hot key beyond a partition's first second is refused more than
    // its first partial answer.
    assert!(k.paced_keys > 4 * FIRST_REFUSALS_PER_KEY as u64, "{k:?}");
}

#[test]
fn a_sample_of_half_the_rows_scales_without_making_single_keys_collections() {
    let fleet = FleetPlan::new(1, None);
    let half = |s: EntitySample| {
        // Contiguous parts, as the sampler reads them: every other 100 rows.
        let items: Vec<MappedItem> = s.items.chunks(100).step_by(2).flatten().cloned().collect();
        sample(items.into_iter().map(|m| match &m.item["PK"] {
            AttrValue::S(k) => k.clone(),
            _ => unreachable!(),
        }))
    };
    let u = predict(&half(uniform()), 2.0, &fleet).retries;
    assert_eq!((u.keys, u.at_limit), (0, 1000), "{u:?}");
    let c = predict(&half(collections()), 2.0, &fleet).retries;
    assert_eq!(c.keys, 100, "{c:?}");
    assert!(near(c.items, 1581.0, 0.15), "{c:?}");
}
