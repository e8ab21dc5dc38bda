//! What an update job costs, item by item, as DynamoDB bills writes: each
//! item rounded up to 1 KB, and each secondary index the change touches
//! written again (a changed index key: a delete and a put in the index).
//!
//! The size used is the item's size as read: an update that makes the item
//! larger costs more than estimated, one that makes it smaller less.

use std::collections::BTreeSet;

use sql2ddb_core::{item_size, write_units, Item};
use sql2ddb_dynamo::update::IndexDescription;

use super::report::{CostEstimate, IndexUnits};

/// Adds up the cost of the matching items.
pub(crate) struct CostCounter {
    indexes: Vec<IndexDescription>,
    /// Attributes the update writes; `None` for a delete.
    written: Option<BTreeSet<String>>,
    write_units: u64,
    per_index: Vec<IndexUnits>,
}

impl CostCounter {
    pub(crate) fn new(indexes: &[IndexDescription], written: Option<BTreeSet<String>>) -> Self {
        CostCounter {
            per_index: indexes
                .iter()
                .map(|i| IndexUnits {
                    index: i.name.clone(),
                    ..IndexUnits::default()
                })
                .collect(),
            indexes: indexes.to_vec(),
            written,
            write_units: 0,
        }
    }

    /// The units one item's write costs: the table's, and each index's.
    pub(crate) fn item_units(&self, item: &Item) -> (u64, Vec<u64>) {
        let units = write_units(item_size(item));
        let per_index = self
            .indexes
            .iter()
            .map(|index| {
                let in_index = index.keys.iter().all(|k| item.contains_key(k));
                let Some(written) = &self.written else {
                    // A delete removes the item from each index it is in.
                    return if in_index { units } else { 0 };
                };
                let writes_key = index.keys.iter().any(|k| written.contains(k));
                let writes_projected = match &index.projected {
                    None => !written.is_empty(),
                    Some(list) => list.iter().any(|a| written.contains(a)),
                };
                match (in_index, writes_key, writes_projected) {
                    (true, true, _) => 2 * units,
                    (true, false, true) | (false, true, _) => units,
                    _ => 0,
                }
            })
            .collect();
        (units, per_index)
    }

    /// Counts one matching item.
    pub(crate) fn add(&mut self, item: &Item) {
        let (units, per_index) = self.item_units(item);
        self.write_units += units;
        for (total, u) in self.per_index.iter_mut().zip(per_index) {
            if u > 0 {
                total.items += 1;
                total.write_units += u;
            }
        }
    }

    /// The estimate, with the times at the caps given.
    pub(crate) fn estimate(
        &self,
        read_units: f64,
        max_wcu: Option<u64>,
        max_rcu: Option<u64>,
    ) -> CostEstimate {
        let index_units: u64 = self.per_index.iter().map(|i| i.write_units).sum();
        let total = self.write_units + index_units;
        CostEstimate {
            read_units,
            write_units: self.write_units,
            index_write_units: self.per_index.clone(),
            total_write_units: total,
            seconds_at_max_wcu: max_wcu.map(|w| total as f64 / w as f64),
            seconds_at_max_rcu: max_rcu.map(|r| read_units / r as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::AttrValue;

    use super::*;

    fn index(name: &str, keys: &[&str], projected: Option<&[&str]>) -> IndexDescription {
        IndexDescription {
            name: name.into(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
            projected: projected.map(|p| p.iter().map(|a| a.to_string()).collect()),
        }
    }

    fn item(pairs: &[(&str, usize)]) -> Item {
        pairs
            .iter()
            .map(|(k, len)| (k.to_string(), AttrValue::S("x".repeat(*len))))
            .collect()
    }

    #[test]
    fn units_per_item_and_per_index() {
        let indexes = [
            index("ALL", &["GPK"], None),
            index("KEYS", &["KPK"], Some(&[])),
            index("INC", &["IPK"], Some(&["status"])),
        ];
        let written = BTreeSet::from(["status".to_string()]);
        let mut c = CostCounter::new(&indexes, Some(written));
        // 2 KB and a bit: 3 units; in ALL and INC (status projected), not KEYS.
        let big = item(&[
            ("PK", 10),
            ("GPK", 1),
            ("KPK", 1),
            ("IPK", 1),
            ("status", 2100),
        ]);
        assert_eq!(c.item_units(&big), (3, vec![3, 0, 3]));
        c.add(&big);
        // Not in any index: only the table.
        c.add(&item(&[("PK", 10), ("status", 3)]));
        let e = c.estimate(2.5, Some(2), None);
        assert_eq!(e.write_units, 4);
        assert_eq!(e.total_write_units, 10);
        assert_eq!(e.index_write_units[0].items, 1);
        assert_eq!(e.seconds_at_max_wcu, Some(5.0));
        // Writing an index key of an item in the index: a delete and a put.
        let key = CostCounter::new(&indexes, Some(BTreeSet::from(["GPK".to_string()])));
        assert_eq!(key.item_units(&big), (3, vec![6, 0, 0]));
        // A delete: each index the item is in.
        let delete = CostCounter::new(&indexes, None);
        assert_eq!(delete.item_units(&big), (3, vec![3, 3, 3]));
    }
}
