use sql2ddb_core::KeyType;

use super::*;

fn keys() -> Vec<KeyAttr> {
    vec![
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::N),
    ]
}

fn sent(pk: &str, sk: &str, tags: &[&str]) -> EncodedItem {
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::S(pk.into()));
    item.insert("SK".into(), AttrValue::N(sk.into()));
    item.insert(
        "tags".into(),
        AttrValue::SS(tags.iter().map(|t| t.to_string()).collect()),
    );
    item.insert("price".into(), AttrValue::N("12.5".into()));
    EncodedItem::new(&item, &keys(), serde_json::Value::Null, 1)
}

/// An item as the service may write it back: the same key, the other
/// attributes in another order and form.
fn back(pk: &str, sk: &str) -> Returned {
    let mut item = Item::new();
    item.insert("price".into(), AttrValue::N("1.25E1".into()));
    item.insert("tags".into(), AttrValue::SS(vec!["z".into(), "a".into()]));
    item.insert("SK".into(), AttrValue::N(sk.into()));
    item.insert("PK".into(), AttrValue::S(pk.into()));
    Returned::Put(item)
}

#[test]
fn reordered_attributes_sets_and_renormalised_numbers_match_by_key() {
    let (a, b, c) = (
        sent("A", "1", &["a", "z"]),
        sent("B", "20", &["a", "z"]),
        sent("C", "3", &[]),
    );
    let items = [&a, &b, &c];
    // 20 written back as 2E1, 1 as 1.0: the same numbers.
    let got = match_by_key(
        &items,
        &keys(),
        &[back("C", "3"), back("B", "2E1"), back("A", "1.0")],
    );
    assert_eq!(got, vec![0, 1, 2]);
    assert_eq!(
        match_by_key(&items, &keys(), &[back("B", "20.000")]),
        vec![1]
    );
    assert!(match_by_key(&items, &keys(), &[]).is_empty());
}

#[test]
fn binary_keys_match_by_their_bytes() {
    let bkeys = vec![KeyAttr::new("PK", KeyType::B)];
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::B(vec![0, 1, 255]));
    let ours = EncodedItem::new(&item, &bkeys, serde_json::Value::Null, 1);
    let mut other = Item::new();
    other.insert("PK".into(), AttrValue::B(vec![0, 1, 254]));
    let mine = Returned::Put(item.clone());
    assert_eq!(match_by_key(&[&ours], &bkeys, &[mine]), vec![0]);
    // Not ours: the whole chunk is sent again.
    assert_eq!(
        match_by_key(&[&ours], &bkeys, &[Returned::Put(other)]),
        vec![0]
    );
}

#[test]
fn an_answer_that_does_not_add_up_makes_the_whole_chunk_unprocessed() {
    let (a, b, c) = (
        sent("A", "1", &[]),
        sent("B", "2", &[]),
        sent("C", "3", &[]),
    );
    let items = [&a, &b, &c];
    let all = vec![0, 1, 2];
    // The same item returned twice.
    assert_eq!(
        match_by_key(&items, &keys(), &[back("A", "1"), back("A", "1")]),
        all
    );
    // An item nobody sent.
    assert_eq!(
        match_by_key(&items, &keys(), &[back("A", "1"), back("D", "4")]),
        all
    );
    // A key of the wrong type, or missing its sort key.
    let mut wrong = Item::new();
    wrong.insert("PK".into(), AttrValue::S("B".into()));
    wrong.insert("SK".into(), AttrValue::S("2".into()));
    assert_eq!(match_by_key(&items, &keys(), &[Returned::Put(wrong)]), all);
    let mut half = Item::new();
    half.insert("PK".into(), AttrValue::S("B".into()));
    assert_eq!(match_by_key(&items, &keys(), &[Returned::Put(half)]), all);
    // A request that is not a put.
    assert_eq!(match_by_key(&items, &keys(), &[Returned::Other]), all);
    // More returned than sent.
    let four = [
        back("A", "1"),
        back("B", "2"),
        back("C", "3"),
        back("C", "3"),
    ];
    assert_eq!(match_by_key(&items, &keys(), &four), all);
}
