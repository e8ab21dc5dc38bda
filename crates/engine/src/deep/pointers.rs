//! Pointer items against the source: each pointer item must hold what the
//! mapping makes of the source row with the max (or min) value over every
//! source row the mapping turns into an item — the value attribute and every
//! attribute the pointer carries, typed as the mapping types them, and
//! nothing else — taken from the pointer candidates of the pages as `run`
//! makes them. One entry per pointer item is held (a fixed key: one; a key
//! template with placeholders: one per rendered key).
//!
//! Several rows may share the max value: the run writes whichever of the
//! pages' candidates with that value reaches the table first (the condition
//! `#v < :new` turns the others away), so the item may carry the attributes
//! of any one of them.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde_json::{Map, Value as Json};
use sql2ddb_core::pointer::compare_values;
use sql2ddb_core::{AttrValue, Item, KeyAttr, PointerUpdate};
use sql2ddb_dynamo::{batch_get, Dynamo, RetryPolicy, WriteCapacityLimiter};

use super::canon::{attribute_diffs, canonical, canonical_item, key_text, stable_hash, AttrDiff};
use crate::error::EngineError;

/// One pointer item, checked.
#[derive(Debug, Clone, Serialize)]
pub struct PointerCheck {
    /// The pointer's name.
    pub name: String,
    /// The pointer item's key, as DynamoDB JSON.
    pub key: Json,
    /// The attribute holding the value.
    pub attribute: String,
    /// The max (or min) over the source.
    pub expected: Json,
    /// What the item holds (`None`: no item, or no such attribute).
    pub actual: Option<Json>,
    /// Every attribute of the item that differs from what the mapping makes
    /// of the source (the value attribute, carried attributes, and
    /// attributes the mapping does not put on the pointer); empty when `ok`.
    pub attributes: Vec<AttrDiff>,
    /// Whether the item is exactly what the mapping makes of the source.
    pub ok: bool,
}

/// The furthest candidate of one pointer item, and the canonical
/// attributes of every candidate seen with that same value.
struct Furthest {
    update: PointerUpdate,
    ties: HashSet<u64>,
}

/// The furthest candidate of each pointer item seen so far.
#[derive(Default)]
pub struct PointerMax {
    best: BTreeMap<String, Furthest>,
}

impl PointerMax {
    /// Takes one candidate.
    pub fn offer(&mut self, update: PointerUpdate) {
        let at = format!(
            "{}\u{1f}{}\u{1f}{}",
            update.name,
            canonical(&update.pk).to_dynamo_json(),
            update
                .sk
                .as_ref()
                .map(|s| canonical(s).to_dynamo_json())
                .unwrap_or_default()
        );
        let hash = attributes_hash(&expected_attributes(&update));
        match self.best.get_mut(&at) {
            Some(old) if update.supersedes(&old.update) => {
                *old = Furthest {
                    update,
                    ties: HashSet::from([hash]),
                };
            }
            Some(old) => {
                if compare_values(&old.update.value, &update.value)
                    == Some(std::cmp::Ordering::Equal)
                {
                    old.ties.insert(hash);
                }
            }
            None => {
                let ties = HashSet::from([hash]);
                self.best.insert(at, Furthest { update, ties });
            }
        }
    }

    /// Reads every pointer item (strongly consistent, by key) and compares
    /// all of its attributes with what the mapping makes of the source.
    pub async fn check(
        self,
        client: &Dynamo,
        table: &str,
        keys: &[KeyAttr],
        (limiter, retry): (Option<&WriteCapacityLimiter>, RetryPolicy),
    ) -> Result<Vec<PointerCheck>, EngineError> {
        let furthest: Vec<Furthest> = self.best.into_values().collect();
        let wanted: Vec<Item> = furthest
            .iter()
            .map(|f| pointer_key(keys, &f.update))
            .collect();
        let mut unique = HashSet::new();
        let distinct: Vec<Item> = wanted
            .iter()
            .filter(|k| key_text(k, keys).is_some_and(|t| unique.insert(t)))
            .cloned()
            .collect();
        let found = batch_get(client, table, &distinct, limiter, retry).await?;
        let by_key: BTreeMap<String, Item> = found
            .into_iter()
            .filter_map(|item| Some((key_text(&item, keys)?, item)))
            .collect();
        let mut checks = Vec::with_capacity(furthest.len());
        for (f, key) in furthest.iter().zip(&wanted) {
            let actual = key_text(key, keys).and_then(|t| by_key.get(&t)).cloned();
            checks.push(judge(f, key, keys, actual.as_ref()));
        }
        Ok(checks)
    }
}

/// Compares one pointer item (`None`: absent) with its furthest candidate.
fn judge(f: &Furthest, key: &Item, keys: &[KeyAttr], actual: Option<&Item>) -> PointerCheck {
    let update = &f.update;
    let expected = canonical_item(&expected_attributes(update));
    let held = actual.map(|item| {
        let mut rest = canonical_item(item);
        for k in keys {
            rest.remove(&k.name);
        }
        rest
    });
    let attributes = match &held {
        Some(h) if *h == expected || f.ties.contains(&attributes_hash(h)) => Vec::new(),
        Some(h) => attribute_diffs(&expected, h),
        None => attribute_diffs(&expected, &Item::new()),
    };
    let mut key_json = Map::new();
    for (name, value) in key {
        key_json.insert(name.clone(), value.to_dynamo_json());
    }
    PointerCheck {
        name: update.name.clone(),
        key: Json::Object(key_json),
        attribute: update.attribute.clone(),
        expected: update.value.to_dynamo_json(),
        actual: actual
            .and_then(|item| item.get(&update.attribute))
            .map(AttrValue::to_dynamo_json),
        ok: held.is_some() && attributes.is_empty(),
        attributes,
    }
}

/// The pointer item's key attributes, in the table's key order.
fn pointer_key(keys: &[KeyAttr], update: &PointerUpdate) -> Item {
    let mut key = Item::new();
    if let Some(pk) = keys.first() {
        key.insert(pk.name.clone(), update.pk.clone());
    }
    if let (Some(attr), Some(sk)) = (keys.get(1), &update.sk) {
        key.insert(attr.name.clone(), sk.clone());
    }
    key
}

/// Every non-key attribute the pointer write puts on the item: the value
/// and the attributes carried from the same row.
fn expected_attributes(update: &PointerUpdate) -> Item {
    let mut item = update.attributes.clone();
    item.insert(update.attribute.clone(), update.value.clone());
    item
}

/// A stable hash of a set of attributes in canonical form.
fn attributes_hash(item: &Item) -> u64 {
    stable_hash(
        &AttrValue::M(canonical_item(item))
            .to_dynamo_json()
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::limits::KeyType;

    use super::*;

    fn keys() -> Vec<KeyAttr> {
        vec![
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::S),
        ]
    }

    fn candidate(order: i64, customer: i64, created: &str) -> PointerUpdate {
        PointerUpdate {
            name: "LAST_ORDER".into(),
            pk: AttrValue::S("LAST_ORDER".into()),
            sk: Some(AttrValue::S("LAST_ORDER".into())),
            attribute: "orderId".into(),
            value: AttrValue::N(order.to_string()),
            is_max: true,
            attributes: [
                ("customerId".to_string(), AttrValue::N(customer.to_string())),
                ("createdAt".to_string(), AttrValue::S(created.into())),
            ]
            .into_iter()
            .collect(),
            cleared: Vec::new(),
        }
    }

    /// The item the run writes for `update`.
    fn written(update: &PointerUpdate) -> Item {
        let mut item = pointer_key(&keys(), update);
        item.extend(expected_attributes(update));
        item
    }

    fn check(max: PointerMax, actual: Option<&Item>) -> PointerCheck {
        let f = max.best.into_values().next().unwrap();
        let key = pointer_key(&keys(), &f.update);
        judge(&f, &key, &keys(), actual)
    }

    fn names(c: &PointerCheck) -> Vec<&str> {
        c.attributes.iter().map(|a| a.name.as_str()).collect()
    }

    #[test]
    fn every_attribute_of_the_pointer_is_compared_typed() {
        let mut max = PointerMax::default();
        max.offer(candidate(7, 3, "2024-01-07"));
        max.offer(candidate(30, 1, "2024-01-30"));
        max.offer(candidate(12, 2, "2024-01-12"));
        let good = written(&candidate(30, 1, "2024-01-30"));
        let mut max2 = PointerMax::default();
        max2.offer(candidate(30, 1, "2024-01-30"));
        assert!(check(max2, Some(&good)).ok);

        let mut bad = good.clone();
        bad.insert("createdAt".into(), AttrValue::S("garbage".into()));
        bad.remove("customerId");
        let c = check(max, Some(&bad));
        assert!(!c.ok);
        assert_eq!(names(&c), ["createdAt", "customerId"]);
        assert_eq!(
            c.attributes[1].expected,
            Some(serde_json::json!({"N": "1"}))
        );
        assert_eq!(c.attributes[1].actual, None);
        assert_eq!(c.actual, Some(serde_json::json!({"N": "30"})));

        // A number written as text, an attribute the mapping does not put there.
        let mut retyped = good.clone();
        retyped.insert("customerId".into(), AttrValue::S("1".into()));
        retyped.insert("note".into(), AttrValue::S("x".into()));
        let mut max = PointerMax::default();
        max.offer(candidate(30, 1, "2024-01-30"));
        assert_eq!(names(&check(max, Some(&retyped))), ["customerId", "note"]);

        // Equal as DynamoDB compares numbers: no difference.
        let mut renormalised = good.clone();
        renormalised.insert("customerId".into(), AttrValue::N("1.0".into()));
        let mut max = PointerMax::default();
        max.offer(candidate(30, 1, "2024-01-30"));
        assert!(check(max, Some(&renormalised)).ok);
    }

    #[test]
    fn a_missing_pointer_item_lists_every_expected_attribute() {
        let mut max = PointerMax::default();
        max.offer(candidate(30, 1, "2024-01-30"));
        let c = check(max, None);
        assert!(!c.ok);
        assert_eq!(names(&c), ["createdAt", "customerId", "orderId"]);
        assert_eq!(c.actual, None);
    }

    #[test]
    fn rows_sharing_the_max_value_may_each_be_the_one_written() {
        let mut max = PointerMax::default();
        max.offer(candidate(30, 1, "2024-01-30"));
        max.offer(candidate(30, 2, "2024-01-29"));
        max.offer(candidate(29, 5, "2024-01-28"));
        let f = max.best.into_values().next().unwrap();
        let key = pointer_key(&keys(), &f.update);
        for tied in [
            candidate(30, 1, "2024-01-30"),
            candidate(30, 2, "2024-01-29"),
        ] {
            assert!(judge(&f, &key, &keys(), Some(&written(&tied))).ok);
        }
        // Not a tie: the smaller value's attributes with the max value.
        let mut mixed = written(&candidate(30, 1, "2024-01-30"));
        mixed.insert("customerId".into(), AttrValue::N("5".into()));
        let c = judge(&f, &key, &keys(), Some(&mixed));
        assert_eq!(names(&c), ["customerId"]);
        // A larger value resets the ties.
        let mut max = PointerMax::default();
        max.offer(candidate(30, 2, "2024-01-29"));
        max.offer(candidate(31, 1, "2024-01-31"));
        max.offer(candidate(30, 1, "2024-01-30"));
        let c = check(max, Some(&written(&candidate(30, 2, "2024-01-29"))));
        assert_eq!(names(&c), ["createdAt", "customerId", "orderId"]);
    }
}
