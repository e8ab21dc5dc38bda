//! Each destination takes the pages it can and refuses the others, without
//! a server: nothing listens at the endpoint, so a page that reached
//! DynamoDB would fail.

use std::sync::Arc;

use sql2ddb_core::{BatchPart, EncodedItem, KeyAttr, KeyType, UpdateChange, UpdatePage, WorkBatch};
use sql2ddb_dynamo::{connect, Endpoint, RetryPolicy};
use sql2ddb_mapping::Plan;
use sql2ddb_queue::Message;

use super::{build_sink, BatchSink, Destination, SinkOptions};
use crate::export::{Compression, ItemFiles, S3Options};
use crate::progress::RunProgress;
use crate::rejects::RejectsFile;

fn plan() -> Plan {
    // One attempt (the writes of a table sink retry as the mapping says).
    let text = "version = 1\n[source]\nurl = \"sqlite://unused.db\"\n[target]\ntable = \"shop\"\npk = { name = \"PK\", type = \"S\" }\n[writer]\nmax_attempts = 1\n[[entity]]\nname = \"customer\"\nfrom = \"customers\"\npk = \"C#{id}\"\n";
    Plan::parse(text, "m.toml".as_ref(), &|_| None).unwrap()
}

fn options(destination: Destination, dry_run: bool) -> SinkOptions {
    SinkOptions {
        concurrency: Some(1),
        fixed_concurrency: true,
        max_wcu: None,
        // One attempt: a call that reached the endpoint fails at once.
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        retry_budget: None,
        dry_run,
        destination,
    }
}

fn keys(n: usize) -> Vec<EncodedItem> {
    let attrs = [KeyAttr::new("PK", KeyType::S)];
    (0..n)
        .map(|i| {
            let key: sql2ddb_core::Item = [(
                "PK".to_string(),
                sql2ddb_core::AttrValue::S(format!("C#{i}")),
            )]
            .into();
            EncodedItem::new(&key, &attrs, serde_json::json!({ "id": i }), 10)
        })
        .collect()
}

fn migration(items: usize) -> WorkBatch {
    WorkBatch {
        run_id: "r".parse().unwrap(),
        entity: "customer".into(),
        segment: 0,
        page: 0,
        part: BatchPart::WHOLE,
        rows_read: items as u64,
        items: keys(items),
        pointers: Vec::new(),
    }
}

fn update_page(n: usize) -> UpdatePage {
    UpdatePage {
        run_id: "u".parse().unwrap(),
        entity: "archive".into(),
        segment: 0,
        page: 0,
        part: BatchPart::WHOLE,
        rows_read: n as u64,
        keys: keys(n),
        change: UpdateChange {
            table: "shop".into(),
            keys: vec![KeyAttr::new("PK", KeyType::S)],
            update: Some("SET #s = :s".into()),
            condition: "attribute_exists(#k)".into(),
            names: [("#s", "status"), ("#k", "PK")]
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .into(),
            values: [(":s".to_string(), sql2ddb_core::AttrValue::S("x".into()))].into(),
            own_mark: None,
        },
    }
}

async fn sink(destination: Destination, dry_run: bool, dir: &std::path::Path) -> Arc<BatchSink> {
    let client = connect(
        &Endpoint::Url("http://127.0.0.1:1".into()),
        Some("us-east-1"),
    )
    .await
    .unwrap();
    let calls = client.calls().clone();
    let rejects = Arc::new(RejectsFile::new(dir.join("rejects.jsonl")));
    let opts = options(destination.clone(), dry_run);
    match destination {
        Destination::Updates => Arc::new(BatchSink::for_updates(&client, &opts, rejects)),
        _ => build_sink(&plan(), &opts, &client, &calls, rejects).sink,
    }
}

#[tokio::test]
async fn a_worker_of_an_update_job_refuses_a_migrations_page() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(Destination::Updates, false, dir.path()).await;
    assert!(!sink.writes_migrations());
    let err = sink
        .write(Message::Migration(migration(3)))
        .await
        .expect_err("a migration's page needs a mapping");
    assert!(err.to_string().contains("run r is a migration"), "{err}");
}

#[tokio::test]
async fn a_dry_run_counts_every_page_as_written_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(Destination::Table, true, dir.path()).await;
    assert!(sink.writes_migrations());
    assert!(sink.pointer_target().is_none());
    let page = sink.write(Message::Migration(migration(3))).await.unwrap();
    assert_eq!((page.written, page.bytes, page.failed), (3, 30, 0));
    let update = sink.write(Message::Update(update_page(4))).await.unwrap();
    assert_eq!((update.written, update.failed), (4, 0));
}

#[tokio::test]
async fn a_table_sink_sends_an_update_page_to_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let sink = sink(Destination::Table, false, dir.path()).await;
    assert!(sink.pointer_target().is_some());
    // Nothing listens: the page reached the table's calls, which failed.
    let out = sink.write(Message::Update(update_page(2))).await;
    assert!(
        !matches!(out, Ok(ref o) if o.written == 2),
        "an update page was counted written without a call: {out:?}"
    );
}

#[tokio::test]
async fn an_export_writes_a_migrations_page_to_its_files_and_refuses_an_update_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out").display().to_string();
    let dest = crate::export::Destination::open(&out, &S3Options::default())
        .await
        .unwrap();
    let files = Arc::new(ItemFiles::new(
        Arc::new(dest),
        Compression::None,
        None,
        vec!["PK".into()],
        RunProgress::new(),
    ));
    let sink = sink(Destination::Files(files.clone()), true, dir.path()).await;
    let page = sink.write(Message::Migration(migration(3))).await.unwrap();
    assert_eq!(page.written, 3);
    let written = files.finish().await.unwrap();
    assert_eq!(written.iter().map(|f| f.items).sum::<u64>(), 3);
    let err = sink
        .write(Message::Update(update_page(1)))
        .await
        .expect_err("files cannot take an update job's page");
    assert!(err.to_string().contains("an export writes files"), "{err}");
}
