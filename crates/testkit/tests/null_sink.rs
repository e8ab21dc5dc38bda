//! The null sink: a real client and writer can target it, and it counts what
//! it was sent. Also the `sql2ddb-testkit` binary, run as a process.

mod support;

use std::sync::Arc;

use sql2ddb_core::{write_units, KeyAttr};
use sql2ddb_dynamo::{ensure_table, AdaptiveConcurrency, BatchWriter, ErrorKind, RetryPolicy};
use sql2ddb_testkit::NullSink;
use support::{calls, client, items, keys, refused, write_all, TestkitProcess};
use tokio::io::AsyncReadExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_targets_the_sink_and_the_sink_counts_every_item() {
    let sink = NullSink::start(keys()).await.unwrap();
    let client = client(&sink.url()).await;
    assert!(!ensure_table(&client, "anything", &keys(), false)
        .await
        .unwrap());
    let other_keys = vec![KeyAttr {
        name: "id".into(),
        kind: sql2ddb_core::KeyType::N,
    }];
    let err = ensure_table(&client, "anything", &other_keys, false)
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::Table,
        "the sink shows its key schema"
    );

    let writer = Arc::new(
        BatchWriter::new(
            calls(&sink.url()).await,
            "anything",
            keys(),
            RetryPolicy::default(),
        )
        .with_concurrency(Arc::new(AdaptiveConcurrency::new(8))),
    );
    let batch = items(0, 5000, 700);
    let out = write_all(writer, batch.clone(), 1000, 2).await;
    assert_eq!(out.written, 5000);
    assert_eq!(out.retries, 0);

    let stats = sink.stats();
    assert_eq!(stats.items, 5000);
    assert_eq!(stats.batch_write_calls, 200);
    assert_eq!(
        stats.bytes,
        batch.iter().map(|m| m.size as u64).sum::<u64>()
    );
    assert_eq!(
        stats.write_units,
        batch.iter().map(|m| write_units(m.size)).sum::<u64>()
    );
    let tables = sql2ddb_testkit::sdk::client(&sink.url())
        .list_tables()
        .send()
        .await
        .unwrap();
    assert_eq!(tables.table_names(), ["anything"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_its_url_then_its_counts_on_sigterm() {
    let mut sink =
        TestkitProcess::start(&["null-sink", "--port", "0", "--keys", "PK:S,SK:S"]).await;
    let url = sink.url.as_str();

    let writer = BatchWriter::new(calls(url).await, "t", keys(), RetryPolicy::default());
    assert_eq!(writer.write(items(0, 60, 10)).await.written, 60);

    sink.terminate();
    let mut rest = String::new();
    sink.stdout.read_to_string(&mut rest).await.unwrap();
    assert!(sink.child.wait().await.unwrap().success());
    let stats: serde_json::Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(stats["items"], 60);
    assert_eq!(stats["batch_write_calls"], 3);
}

#[tokio::test]
async fn the_binary_refuses_bad_arguments_clearly() {
    let said = refused(&["null-sink", "--keys", "PK:X"]);
    assert!(said.contains("NAME:S, NAME:N or NAME:B"), "{said}");
    let said = refused(&[
        "proxy",
        "--upstream",
        "http://127.0.0.1:1",
        "--delay-ms",
        "50",
    ]);
    assert!(said.contains("MIN-MAX"), "{said}");
    let said = refused(&[
        "proxy",
        "--upstream",
        "http://127.0.0.1:1",
        "--throttle-rate",
        "0.7",
        "--error-500-rate",
        "0.7",
    ]);
    assert!(said.contains("add up to"), "{said}");
}
