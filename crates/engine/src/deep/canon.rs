//! The canonical form two items are compared in: attribute names sorted (an
//! [`Item`] is a sorted map), numbers as DynamoDB compares them (`1.50` =
//! `1.5`, `1e2` = `100`), sets unordered (sorted, duplicates dropped), lists
//! in order; and a stable 64-bit hash of an item's key, the same in every
//! process and release (buckets and the sample are chosen by it).

use serde::Serialize;
use serde_json::{Map, Value as Json};
use sql2ddb_core::{normalize_number, AttrValue, Item, KeyAttr};

/// The canonical form of one value.
pub fn canonical(v: &AttrValue) -> AttrValue {
    let number = |n: &String| normalize_number(n).unwrap_or_else(|_| n.clone());
    match v {
        AttrValue::N(n) => AttrValue::N(number(n)),
        AttrValue::L(l) => AttrValue::L(l.iter().map(canonical).collect()),
        AttrValue::M(m) => AttrValue::M(canonical_item(m)),
        AttrValue::SS(s) => AttrValue::SS(sorted(s.clone())),
        AttrValue::NS(s) => AttrValue::NS(sorted(s.iter().map(number).collect())),
        AttrValue::BS(s) => AttrValue::BS(sorted(s.clone())),
        other => other.clone(),
    }
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

/// The canonical form of an item (or map).
pub fn canonical_item(item: &Item) -> Item {
    item.iter()
        .map(|(k, v)| (k.clone(), canonical(v)))
        .collect()
}

/// The item's key as text (its key attributes' canonical DynamoDB JSON, in
/// key order): equal for equal keys. `None` when a key attribute is absent.
pub fn key_text(item: &Item, keys: &[KeyAttr]) -> Option<String> {
    let values: Option<Vec<Json>> = keys
        .iter()
        .map(|k| item.get(&k.name).map(|v| canonical(v).to_dynamo_json()))
        .collect();
    values.map(|v| Json::Array(v).to_string())
}

/// The item's key attributes as a DynamoDB-JSON object, for diff lines.
pub fn key_json(item: &Item, keys: &[KeyAttr]) -> Json {
    let mut out = Map::new();
    for k in keys {
        if let Some(v) = item.get(&k.name) {
            out.insert(k.name.clone(), v.to_dynamo_json());
        }
    }
    Json::Object(out)
}

/// The key attributes of an item, as a key for a read.
pub fn key_item(item: &Item, keys: &[KeyAttr]) -> Item {
    keys.iter()
        .filter_map(|k| Some((k.name.clone(), item.get(&k.name)?.clone())))
        .collect()
}

/// A stable 64-bit hash: FNV-1a, then a mixer so every bit depends on every byte.
pub fn stable_hash(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

/// The splitmix64 finaliser.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether a key hash falls in a sample of `fraction` (0..=1) of all keys.
/// Independent of the bucket (which uses the hash's remainder).
pub fn in_sample(hash: u64, fraction: f64) -> bool {
    if fraction >= 1.0 {
        return true;
    }
    let point = (mix(hash ^ 0x5851_f42d_4c95_7f2d) >> 11) as f64 / (1u64 << 53) as f64;
    point < fraction
}

/// One attribute that differs: its value expected from the source and the
/// one in the table (`None`: absent), as DynamoDB JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttrDiff {
    /// Attribute name.
    pub name: String,
    /// What the mapping makes of the source row.
    pub expected: Option<Json>,
    /// What the table holds.
    pub actual: Option<Json>,
}

/// The attributes of two canonical items that differ, by name.
pub fn attribute_diffs(expected: &Item, actual: &Item) -> Vec<AttrDiff> {
    let mut names: Vec<&String> = expected.keys().chain(actual.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| expected.get(*n) != actual.get(*n))
        .map(|n| AttrDiff {
            name: n.clone(),
            expected: expected.get(n).map(AttrValue::to_dynamo_json),
            actual: actual.get(n).map(AttrValue::to_dynamo_json),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, AttrValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn equal_numbers_and_reordered_sets_are_identical() {
        let a = item(&[
            ("price", AttrValue::N("1.50".into())),
            ("tags", AttrValue::SS(vec!["b".into(), "a".into()])),
            ("ns", AttrValue::NS(vec!["10".into(), "2.0".into()])),
            ("l", AttrValue::L(vec![AttrValue::N("1e2".into())])),
        ]);
        let b = item(&[
            ("ns", AttrValue::NS(vec!["2".into(), "10".into()])),
            ("l", AttrValue::L(vec![AttrValue::N("100".into())])),
            ("tags", AttrValue::SS(vec!["a".into(), "b".into()])),
            ("price", AttrValue::N("1.5".into())),
        ]);
        assert_eq!(canonical_item(&a), canonical_item(&b));
        assert!(attribute_diffs(&canonical_item(&a), &canonical_item(&b)).is_empty());
    }

    #[test]
    fn lists_keep_their_order_and_types_count() {
        let a = item(&[(
            "l",
            AttrValue::L(vec![AttrValue::S("a".into()), AttrValue::S("b".into())]),
        )]);
        let b = item(&[(
            "l",
            AttrValue::L(vec![AttrValue::S("b".into()), AttrValue::S("a".into())]),
        )]);
        assert_ne!(canonical_item(&a), canonical_item(&b));
        let n = item(&[("v", AttrValue::N("10".into()))]);
        let s = item(&[("v", AttrValue::S("10".into())), ("w", AttrValue::Null)]);
        let diffs = attribute_diffs(&n, &s);
        let names: Vec<&str> = diffs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["v", "w"]);
        assert_eq!(diffs[1].expected, None);
    }

    #[test]
    fn the_hash_is_stable_and_the_sample_proportional() {
        assert_eq!(
            stable_hash("[{\"S\":\"C#1\"}]"),
            stable_hash("[{\"S\":\"C#1\"}]")
        );
        let hits = (0..10_000)
            .filter(|i| in_sample(stable_hash(&i.to_string()), 0.25))
            .count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
        assert!(in_sample(stable_hash("x"), 1.0));
        assert!(!in_sample(stable_hash("x"), 0.0));
    }
}
