//! The capacity rules against hand-computed costs and times.

use super::*;
use serde_json::json;

fn schema(indexes: Vec<GsiConfig>) -> TableSchema {
    TableSchema {
        partition_key: "PK".into(),
        sort_key: Some("SK".into()),
        indexes,
    }
}

fn gsi(name: &str, pk: &str, projection: Projection) -> GsiConfig {
    GsiConfig {
        name: name.into(),
        partition_key: pk.into(),
        sort_key: None,
        projection,
    }
}

#[test]
fn an_item_costs_its_size_rounded_up_to_a_kilobyte() {
    let s = schema(vec![]);
    // 2 + 1 + 2 + 1 + 4 + 1018 = 1,028 bytes: two units.
    let big = json!({"PK": {"S": "a"}, "SK": {"S": "b"}, "body": {"S": "x".repeat(1018)}});
    assert_eq!(s.put_cost(&big).unwrap().total(), 2);
    // 1,024 bytes exactly: one.
    let exact = json!({"PK": {"S": "a"}, "SK": {"S": "b"}, "body": {"S": "x".repeat(1014)}});
    assert_eq!(s.put_cost(&exact).unwrap().total(), 1);
    let small = json!({"PK": {"S": "a"}});
    assert_eq!(s.put_cost(&small).unwrap().total(), 1);
    assert_eq!(s.put_cost(&json!({"PK": "a"})), None);
}

#[test]
fn each_index_the_item_projects_into_costs_again() {
    let s = schema(vec![
        gsi("all", "G1", Projection::default()),
        gsi("keys", "G2", Projection::KeysOnly),
        gsi("absent", "G3", Projection::default()),
    ]);
    let item = json!({
        "PK": {"S": "a"}, "SK": {"S": "b"}, "G1": {"S": "c"}, "G2": {"S": "d"},
        "body": {"S": "x".repeat(3000)}
    });
    let cost = s.put_cost(&item).unwrap();
    // 3 KB and a bit: 3 units; ALL again 3; KEYS_ONLY (a few bytes) 1;
    // the item has no G3: that index is not written.
    assert_eq!(cost.table, 3);
    assert_eq!(
        cost.indexes,
        vec![("all".to_string(), 3), ("keys".to_string(), 1)]
    );
    assert_eq!(cost.total(), 7);
    let include = schema(vec![gsi(
        "inc",
        "G1",
        Projection::Include(vec!["body".into()]),
    )]);
    assert_eq!(include.put_cost(&item).unwrap().total(), 6);
}

#[test]
fn the_hash_is_of_the_value_not_its_spelling() {
    let h = |v: Json| key_hash(&v).unwrap();
    assert_eq!(h(json!({"N": "5"})), h(json!({"N": "5.0"})));
    assert_ne!(h(json!({"N": "5"})), h(json!({"S": "5"})));
    assert_ne!(h(json!({"S": "CUSTOMER#1"})), h(json!({"S": "CUSTOMER#2"})));
    assert_eq!(key_hash(&json!("x")), None);
    // Consecutive keys spread over 8 partitions about evenly.
    let mut counts = [0u32; 8];
    for n in 0..8000 {
        counts[(h(json!({"S": format!("ITEM#{n}")})) % 8) as usize] += 1;
    }
    assert!(counts.iter().all(|c| (850..1150).contains(c)), "{counts:?}");
}

#[test]
fn the_table_or_the_busiest_partition_decides() {
    let config = CapacityLimits {
        table_wcu: 2000,
        partitions: 8,
        partition_wcu: 250,
    };
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

#[test]
fn a_read_costs_a_unit_per_4_kb_and_half_that_eventually_consistent() {
    assert_eq!(read_half_units(0, false), 1);
    assert_eq!(read_half_units(4096, false), 1);
    assert_eq!(read_half_units(4097, false), 2);
    assert_eq!(read_half_units(4097, true), 4);
    // A 1 MB Scan page: 256 units strongly consistent, 128 eventually.
    assert_eq!(read_half_units(1 << 20, true), 512);
    assert_eq!(read_half_units(1 << 20, false), 256);
}

#[test]
fn an_attribute_value_hashes_as_its_json_does() {
    let schema = TableSchema {
        partition_key: "PK".into(),
        ..TableSchema::default()
    };
    let item = |v: Json| Item::deserialize(&json!({ "PK": v })).unwrap();
    for v in [
        json!({"S": "CUSTOMER#1"}),
        json!({"N": "5.0"}),
        json!({"B": "AQI="}),
    ] {
        assert_eq!(schema.item_hash(&item(v.clone())), key_hash(&v), "{v}");
    }
    assert_eq!(schema.item_hash(&Item::new()), None);
    let limits = CapacityLimits {
        table_wcu: 10,
        partitions: 4,
        partition_wcu: 5,
    };
    assert_eq!(limits.partition_of(10), 2);
}
