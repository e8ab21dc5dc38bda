//! What a write costs by DynamoDB's rules, and which partition it lands in.

use serde::Deserialize;
use serde_json::Value as Json;
use sql2ddb_core::{item_size, normalize_number, write_units, Item};

use super::config::{GsiConfig, Projection, ProjectionKind};

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
    /// The cost of putting `item` (DynamoDB JSON): its size rounded up to
    /// 1 KB, then again for each index whose keys it has, by the size of
    /// what the index projects. `None` when `item` is not an item.
    pub fn put_cost(&self, item: &Json) -> Option<WriteCost> {
        let item = Item::deserialize(item).ok()?;
        let size = item_size(&item);
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
                    write_units(self.projected_size(&item, i, size)),
                )
            })
            .collect();
        Some(WriteCost {
            table: write_units(size),
            indexes,
        })
    }

    /// The cost of a write whose stored item the proxy cannot see (a
    /// delete, an update): what the call carries, its key and values,
    /// rounded up to 1 KB; indexes not counted.
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
            Projection::Kind(ProjectionKind::All) => return whole,
            Projection::Kind(ProjectionKind::KeysOnly) => {}
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

/// A stable hash of a key attribute's value (DynamoDB JSON, `{"S": "…"}`):
/// its type and its value, numbers by value (`5` and `5.0` alike).
pub fn key_hash(value: &Json) -> Option<u64> {
    let (kind, text) = value.as_object()?.iter().next()?;
    let text = text.as_str()?;
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

#[cfg(test)]
mod tests {
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
            gsi("keys", "G2", Projection::Kind(ProjectionKind::KeysOnly)),
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
}
