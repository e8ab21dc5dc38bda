use serde_json::Value as Json;
use sql2ddb_core::{KeyAttr, KeyType};

use super::{KeySchemaError, ScanError, SyntheticTable, PAGE_BYTES};

fn keys(kinds: &[KeyType]) -> Vec<KeyAttr> {
    ["PK", "SK"]
        .iter()
        .zip(kinds)
        .map(|(name, kind)| KeyAttr {
            name: name.to_string(),
            kind: *kind,
        })
        .collect()
}

fn last_key(table: &SyntheticTable, n: u64) -> Json {
    let mut key = String::new();
    table.write_key(n, &mut key);
    serde_json::from_str(&key).unwrap()
}

/// Every page of every segment, following `LastEvaluatedKey` as a client
/// does; returns how often each item came and the pages read.
fn scan_all(table: &SyntheticTable, total: u64, limit: Option<u64>) -> (Vec<u32>, u64) {
    let mut seen = vec![0u32; table.len() as usize];
    let mut pages = 0;
    for segment in 0..total {
        let mut start: Option<Json> = None;
        loop {
            let page = table.page(segment, total, start.as_ref(), limit).unwrap();
            pages += 1;
            for n in page.items.clone() {
                seen[n as usize] += 1;
            }
            if !page.more {
                break;
            }
            start = Some(last_key(table, page.items.end - 1));
        }
    }
    (seen, pages)
}

#[test]
fn every_item_comes_exactly_once_across_segments_and_pages() {
    let s_keys = keys(&[KeyType::S, KeyType::S]);
    for (len, total, limit) in [
        (20_000, 8, None),
        (20_000, 7, None),
        (10_001, 3, Some(1000)),
        (5, 8, None),
        (0, 4, None),
        (9_999, 1, Some(1)),
    ] {
        let table = SyntheticTable::new(len, s_keys.clone()).unwrap();
        let (seen, pages) = scan_all(&table, total, limit);
        assert!(
            seen.iter().all(|&c| c == 1),
            "{len} items in {total} segments (limit {limit:?}): some item missing or repeated"
        );
        if let Some(l) = limit {
            assert!(
                pages >= len / l,
                "a limit of {l} makes pages of at most {l} items"
            );
        }
    }
}

#[test]
fn numeric_and_single_keys_page_the_same_way() {
    for kinds in [&[KeyType::N, KeyType::N][..], &[KeyType::S], &[KeyType::N]] {
        let table = SyntheticTable::new(12_345, keys(kinds)).unwrap();
        let (seen, _) = scan_all(&table, 4, Some(500));
        assert!(seen.iter().all(|&c| c == 1), "{kinds:?}");
    }
}

#[test]
fn a_full_page_holds_about_one_megabyte() {
    let table = SyntheticTable::new(1_000_000, keys(&[KeyType::S, KeyType::S])).unwrap();
    let page = table.page(3, 8, None, None).unwrap();
    assert!(
        page.more,
        "a segment of 125,000 items takes more than one page"
    );
    let bytes: u64 = page.items.clone().map(|n| table.item_bytes(n)).sum();
    assert!(bytes <= PAGE_BYTES as u64, "{bytes} bytes in a page");
    // Sized by the widest item: the page is within a few bytes per item of 1 MB.
    assert!(
        bytes > PAGE_BYTES as u64 * 99 / 100,
        "{bytes} bytes: the page is not full"
    );
    let size = table.item_bytes(123_456);
    assert!((220..=280).contains(&size), "an item of {size} bytes");
}

#[test]
fn items_hold_their_own_keys_and_are_the_same_every_time() {
    let table = SyntheticTable::new(100, keys(&[KeyType::S, KeyType::S])).unwrap();
    let item = table.item(42);
    assert_eq!(item, table.item(42));
    assert_ne!(item, table.item(43));
    let key = last_key(&table, 42);
    assert_eq!(key["PK"]["S"], "CUSTOMER#0000004");
    assert_eq!(key["SK"]["S"], "ORDER#0000000042");
    assert_eq!(table.number_of(&key), Some(42));
    let item_json = sql2ddb_core::attr::map_to_dynamo_json(&item);
    assert_eq!(item_json["PK"], key["PK"]);
    assert_eq!(item_json["status"]["S"], "open");
}

#[test]
fn a_start_key_of_another_segment_or_no_item_is_refused() {
    let table = SyntheticTable::new(1000, keys(&[KeyType::S, KeyType::S])).unwrap();
    // Item 900 is in segment 3 of 4, not 0.
    let other = last_key(&table, 900);
    assert_eq!(
        table.page(0, 4, Some(&other), None),
        Err(ScanError::StartKey)
    );
    let mut wrong_pk = last_key(&table, 10);
    wrong_pk["PK"]["S"] = "CUSTOMER#9999999".into();
    assert_eq!(
        table.page(0, 4, Some(&wrong_pk), None),
        Err(ScanError::StartKey)
    );
    let beyond = last_key(&table, 1000);
    assert_eq!(table.number_of(&beyond), None);
    assert_eq!(
        table.page(4, 4, None, None),
        Err(ScanError::Segment {
            segment: 4,
            total: 4
        })
    );
    assert_eq!(
        SyntheticTable::new(10, keys(&[KeyType::B])).unwrap_err(),
        KeySchemaError::Unsupported
    );
}
