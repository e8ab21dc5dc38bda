//! The null sink as `sql2ddb update` sees it: a parallel Scan with a filter
//! returns every synthetic item once, page after page, and each conditional
//! `UpdateItem` or `DeleteItem` is counted. `sdk_load::load_synthetic`
//! writes the very same items into a real (in-process dynoxide) table.

mod support;

use std::collections::BTreeMap;

use sql2ddb_core::{AttrValue, Item};
use sql2ddb_dynamo::update::{
    read_page, write_item, ConditionalWrite, ItemOutcome, PageRequest, Placeholders,
};
use sql2ddb_dynamo::{Dynamo, RetryPolicy};
use sql2ddb_testkit::{sdk_load, NullSink};
use support::{client, keys, unique, TestkitProcess, Upstream};
use tokio::io::AsyncReadExt;

/// Every item of `table` by its SK, read as an update job reads it: a
/// parallel Scan of `segments`, filtered on `status`, page after page.
/// Returns the items, the pages and the read units reported.
async fn scan(client: &Dynamo, table: &str, segments: u32) -> (BTreeMap<String, Item>, u64, f64) {
    let mut placeholders = Placeholders::default();
    placeholders.names.insert("#st".into(), "status".into());
    let (mut items, mut pages, mut units) = (BTreeMap::new(), 0, 0.0);
    for segment in 0..segments {
        let req = PageRequest {
            table: table.into(),
            index: None,
            key_condition: None,
            segment: Some((segment, segments)),
            filter: Some("attribute_exists(#st)".into()),
            placeholders: placeholders.clone(),
            limit: None,
        };
        let mut start = None;
        loop {
            let page = read_page(client, &req, start, &RetryPolicy::default())
                .await
                .unwrap();
            assert_eq!(page.scanned, page.items.len() as u64);
            pages += 1;
            units += page.read_units;
            for item in page.items {
                let AttrValue::S(sk) = &item["SK"] else {
                    panic!("SK is not a string: {item:?}")
                };
                assert!(
                    items.insert(sk.clone(), item).is_none(),
                    "an item came twice"
                );
            }
            match page.next {
                Some(next) => start = Some(next),
                None => break,
            }
        }
    }
    (items, pages, units)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_scan_of_the_sink_reads_every_item_once_in_pages() {
    let sink = NullSink::start_scannable(0, keys(), 30_000).await.unwrap();
    let client = client(&sink.url()).await;
    let (items, pages, units) = scan(&client, "orders", 4).await;
    assert_eq!(items.len(), 30_000);
    assert!(
        pages >= 8,
        "7,500 items of ~250 bytes per segment take two 1 MB pages: {pages} pages"
    );
    assert!(units > 0.0, "the reads report what they consumed");
    let stats = sink.stats();
    assert_eq!(stats.scan_calls, pages);
    assert_eq!(stats.scanned_items, 30_000);
    let table = sql2ddb_dynamo::update::describe(&client, "orders", &RetryPolicy::default())
        .await
        .unwrap();
    assert_eq!(table.item_count, 30_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_updates_and_deletes_are_counted() {
    let sink = NullSink::start_scannable(0, keys(), 10).await.unwrap();
    let client = client(&sink.url()).await;
    let (items, _, _) = scan(&client, "orders", 1).await;
    let mut write = ConditionalWrite {
        table: "orders".into(),
        update: Some("SET #st = :closed".into()),
        condition: "attribute_exists(PK) AND attribute_exists(#st)".into(),
        placeholders: Placeholders::default(),
        own_mark: None,
    };
    write
        .placeholders
        .names
        .insert("#st".into(), "status".into());
    write
        .placeholders
        .values
        .insert(":closed".into(), AttrValue::S("closed".into()));
    let policy = RetryPolicy::default();
    for item in items.values().take(7) {
        let done = write_item(&client, &write, &keys(), item, &policy, None, None)
            .await
            .unwrap();
        assert_eq!(done.outcome, ItemOutcome::Written { write_units: 1.0 });
    }
    write.update = None;
    let item = items.values().last().unwrap();
    write_item(&client, &write, &keys(), item, &policy, None, None)
        .await
        .unwrap();
    let stats = sink.stats();
    assert_eq!((stats.update_items, stats.delete_items), (7, 1));
    assert_eq!(stats.items, 0, "no BatchWriteItem was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loader_writes_the_items_the_sink_scans() {
    let sink = NullSink::start_scannable(0, keys(), 2_500).await.unwrap();
    let upstream = Upstream::start().await;
    let table = unique("synthetic");
    let loaded =
        sdk_load::load_synthetic(&upstream.client, &upstream.dynamo, &table, keys(), 2_500, 4)
            .await
            .unwrap();
    assert_eq!(loaded.items, 2_500);
    let (in_table, _, _) = scan(&upstream.dynamo, &table, 3).await;
    let (in_sink, _, _) = scan(&client(&sink.url()).await, &table, 2).await;
    assert_eq!(in_table.len(), 2_500);
    let differ = in_table
        .iter()
        .find(|(sk, item)| in_sink.get(*sk) != Some(item));
    assert!(
        differ.is_none(),
        "a loaded item differs from the scanned one: {differ:?} vs {:?}",
        differ.and_then(|(sk, _)| in_sink.get(sk))
    );
    assert_eq!(in_sink.len(), 2_500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_loads_and_serves_synthetic_items() {
    let upstream = Upstream::start().await;
    let table = unique("loaded");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sql2ddb-testkit"))
        .args([
            "load",
            "--endpoint",
            upstream.local.url(),
            "--table",
            &table,
        ])
        .args(["--keys", "PK:S,SK:S", "--items", "300"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["items"], 300);
    let (in_table, _, _) = scan(&upstream.dynamo, &table, 2).await;
    assert_eq!(in_table.len(), 300);

    let mut sink =
        TestkitProcess::start(&["null-sink", "--keys", "PK:S,SK:S", "--scan-items", "300"]).await;
    let (in_sink, _, _) = scan(&client(&sink.url).await, &table, 3).await;
    assert!(in_sink == in_table, "the sink serves the loaded items");
    sink.terminate();
    let mut rest = String::new();
    sink.stdout.read_to_string(&mut rest).await.unwrap();
    assert!(sink.child.wait().await.unwrap().success());
    let stats: serde_json::Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(stats["scanned_items"], 300);
}
