//! Pointer items as the conditional writes would leave them, without a server.

use std::sync::Arc;

use sql2ddb_core::{AttrValue, Item, PointerUpdate};

use super::{Compression, Destination, ItemFiles, S3Options};
use crate::progress::RunProgress;

fn s(v: &str) -> AttrValue {
    AttrValue::S(v.into())
}

fn n(v: &str) -> AttrValue {
    AttrValue::N(v.into())
}

fn update(
    name: &str,
    pk: &str,
    attribute: &str,
    value: &str,
    is_max: bool,
    at: &str,
) -> PointerUpdate {
    PointerUpdate {
        name: name.into(),
        pk: s(pk),
        sk: Some(s(pk)),
        attribute: attribute.into(),
        value: n(value),
        is_max,
        attributes: Item::from([(format!("{attribute}At"), s(at))]),
        cleared: Vec::new(),
    }
}

#[tokio::test]
async fn each_pointer_item_holds_its_furthest_value_and_that_rows_attributes() {
    for in_memory in [0, 1, 2] {
        pointer_items_with(in_memory).await;
    }
}

/// The test above, with at most `in_memory` pointer items kept in memory
/// (0: the default bound), the rest in sorted runs on disk.
async fn pointer_items_with(in_memory: usize) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out").display().to_string();
    let dest = Arc::new(
        Destination::open(&out, &S3Options::default())
            .await
            .unwrap(),
    );
    let keys = vec!["PK".to_string(), "SK".to_string()];
    let files = ItemFiles::new(dest, Compression::None, None, keys, RunProgress::new());
    let files = match in_memory {
        0 => files,
        n => files.with_pointers_in_memory(n),
    };
    files
        .keep_pointers(
            [
                update("LAST", "P", "last", "3", true, "t3"),
                update("LAST", "P", "last", "10", true, "t10"),
                update("LAST", "P", "last", "9", true, "t9"),
                // A min pointer on the same item: its attributes join the item.
                update("FIRST", "P", "first", "4", false, "f4"),
                update("FIRST", "P", "first", "2", false, "f2"),
                update("LAST", "Q", "last", "1", true, "q1"),
            ]
            .into_iter(),
        )
        .unwrap();
    let items: Vec<Item> = files.pointer_items().into_iter().map(|(i, _)| i).collect();
    let want_p = Item::from([
        ("PK".to_string(), s("P")),
        ("SK".to_string(), s("P")),
        ("last".to_string(), n("10")),
        ("lastAt".to_string(), s("t10")),
        ("first".to_string(), n("2")),
        ("firstAt".to_string(), s("f2")),
    ]);
    let want_q = Item::from([
        ("PK".to_string(), s("Q")),
        ("SK".to_string(), s("Q")),
        ("last".to_string(), n("1")),
        ("lastAt".to_string(), s("q1")),
    ]);
    assert_eq!(items, vec![want_p, want_q]);
    let counts = files.pointer_summary();
    assert_eq!(counts["LAST"], 2);
    assert_eq!(counts["FIRST"], 1);
}
