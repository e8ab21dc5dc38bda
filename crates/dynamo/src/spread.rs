//! The order of a batch's puts, chosen for the table's partitions.

use std::collections::{HashMap, VecDeque};

use sql2ddb_core::{AttrValue, EncodedItem};

/// Orders the items so that consecutive ones have different partition keys
/// where the batch allows: one from each partition key in turn, the keys in
/// the order they first came. Rows read in key order bring an item
/// collection's items together, and chunks cut from them in that order would
/// send every call to one partition, which DynamoDB holds to 1,000 write
/// units a second whatever the table's capacity. Duplicates of a key are
/// already resolved, so the order of the puts does not matter.
pub(crate) fn spread(items: Vec<EncodedItem>) -> Vec<EncodedItem> {
    let mut group_of: HashMap<&AttrValue, usize, foldhash::fast::RandomState> =
        HashMap::with_capacity_and_hasher(64, Default::default());
    let groups: Vec<usize> = items
        .iter()
        .map(|m| {
            let next = group_of.len();
            match m.key.first() {
                Some(pk) => *group_of.entry(pk).or_insert(next),
                None => 0,
            }
        })
        .collect();
    let count = group_of.len();
    drop(group_of);
    if count <= 1 || count == items.len() {
        return items;
    }
    let mut by_group: Vec<VecDeque<EncodedItem>> = (0..count).map(|_| Default::default()).collect();
    for (m, g) in items.into_iter().zip(groups) {
        by_group[g].push_back(m);
    }
    let mut out = Vec::with_capacity(by_group.iter().map(|g| g.len()).sum());
    while out.len() < out.capacity() {
        for group in &mut by_group {
            if let Some(m) = group.pop_front() {
                out.push(m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::{Item, KeyAttr, KeyType};

    use super::*;

    fn item(pk: &str, sk: u32) -> EncodedItem {
        let keys = vec![
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::N),
        ];
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S(pk.into()));
        item.insert("SK".into(), AttrValue::N(sk.to_string()));
        EncodedItem::new(&item, &keys, serde_json::Value::Null, 1)
    }

    fn order(items: &[EncodedItem]) -> Vec<String> {
        items
            .iter()
            .map(|m| match (&m.key[0], &m.key[1]) {
                (AttrValue::S(pk), AttrValue::N(sk)) => format!("{pk}{sk}"),
                other => panic!("unexpected key {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_collection_read_in_key_order_is_sent_one_partition_key_in_turn() {
        let items = vec![
            item("A", 1),
            item("A", 2),
            item("A", 3),
            item("B", 1),
            item("B", 2),
            item("C", 1),
        ];
        assert_eq!(order(&spread(items)), ["A1", "B1", "C1", "A2", "B2", "A3"]);
    }

    #[test]
    fn one_partition_key_or_all_different_keep_their_order() {
        let one = vec![item("A", 3), item("A", 1), item("A", 2)];
        assert_eq!(order(&spread(one)), ["A3", "A1", "A2"]);
        let all = vec![item("C", 1), item("A", 1), item("B", 1)];
        assert_eq!(order(&spread(all)), ["C1", "A1", "B1"]);
    }

    #[test]
    fn every_item_is_kept_once() {
        let items: Vec<EncodedItem> = (0..200).map(|i| item(&format!("K{}", i / 40), i)).collect();
        let mut before = order(&items);
        let spread = spread(items);
        // 5 keys of 40 items: each run of 5 holds every key once.
        for window in spread.chunks(5) {
            let mut pks: Vec<String> = order(window).iter().map(|k| k[..2].to_string()).collect();
            pks.sort();
            pks.dedup();
            assert_eq!(pks.len(), 5, "{:?}", order(window));
        }
        let mut after = order(&spread);
        before.sort();
        after.sort();
        assert_eq!(before, after);
    }
}
