//! The benchmark's bare-SDK load: it reads an export's lines, and every item
//! reaches the sink, 25 to a call.

use sql2ddb_core::{KeyAttr, KeyType};
use sql2ddb_testkit::{sdk_load, NullSink};

#[tokio::test]
async fn every_exported_item_is_sent_25_to_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let line = |i: u32| {
        format!(
            r#"{{"Item":{{"PK":{{"S":"CUSTOMER#{i}"}},"SK":{{"S":"ORDER#{i:010}"}},"total":{{"N":"12.5"}},"shipped":{{"BOOL":true}}}}}}"#
        )
    };
    let first: Vec<String> = (0..40).map(line).collect();
    let second: Vec<String> = (40..60).map(line).collect();
    std::fs::write(dir.path().join("part-00-00001.json"), first.join("\n")).unwrap();
    std::fs::write(
        dir.path().join("part-01-00001.json"),
        second.join("\n") + "\n",
    )
    .unwrap();
    // Compressed files are not read: the load says which files it wants.
    std::fs::write(dir.path().join("part-02-00001.json.gz"), b"\x1f\x8b").unwrap();

    let items = sdk_load::read_items(dir.path()).unwrap();
    assert_eq!(items.len(), 60);
    let batches = sdk_load::batches(items);
    assert_eq!(
        batches.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![25, 25, 10]
    );

    let keys = vec![
        KeyAttr {
            name: "PK".into(),
            kind: KeyType::S,
        },
        KeyAttr {
            name: "SK".into(),
            kind: KeyType::S,
        },
    ];
    let sink = NullSink::start(keys).await.unwrap();
    let client = sql2ddb_testkit::sdk::client(&sink.url());
    let stats = sdk_load::send(&client, "t", batches, 4).await.unwrap();
    assert_eq!((stats.items, stats.calls), (60, 3));
    assert_eq!(sink.stats().items, 60);
    assert_eq!(sink.stats().batch_write_calls, 3);

    let empty = tempfile::tempdir().unwrap();
    let err = sdk_load::read_items(empty.path()).unwrap_err().to_string();
    assert!(err.contains("--compression none"), "{err}");
}
