//! Mappings in S3: a reader event's `mapping` (or `SQL2DDB_MAPPING`) may be
//! `s3://bucket/key.toml`, read from moto's S3 by the reader and the worker
//! alike; a missing object or a bad mapping is reported with its URL.

mod support;

use std::sync::Arc;
use std::time::Duration;

use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_engine::serverless::MessageWriter;
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_engine::RunOptions;
use sql2ddb_lambda::reader::{Reader, ReaderEvent};
use sql2ddb_lambda::Settings;
use sql2ddb_testkit::support::Bucket;
use support::*;

const ROWS: u64 = 1_200;
const PAGE: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reader_given_an_s3_mapping_migrates_every_row() {
    let pg = PgSchema::filled("lambda_s3map", &items_sql(ROWS)).await;
    let dynamo = Dynamo::start().await;
    let moto = Moto::start();
    let sqs = sqs(moto.url()).await;
    let table = unique("lambda_s3map");
    let urls = work_queue(&sqs, &table, Duration::from_secs(60)).await;
    let bucket = Bucket::create(moto.url(), "mappings").await;
    bucket
        .put(
            "mappings/items.toml",
            items_mapping(&pg.name, &table, &dynamo.url, PAGE).as_bytes(),
        )
        .await;
    let url = format!("s3://{}/mappings/items.toml", bucket.name);

    let runs = tempfile::tempdir().unwrap();
    let settings = Settings {
        queue_url: Some(urls.queue.clone()),
        sqs_endpoint: Some(moto.url().to_string()),
        s3_endpoint: Some(moto.url().to_string()),
        runs_dir: runs.path().to_path_buf(),
        ..Settings::default()
    };
    // The worker loads the same object, as its function does from SQL2DDB_MAPPING.
    let plan = sql2ddb_lambda::mapping::load(&url, &settings.s3_options(), &|_| None)
        .await
        .unwrap();
    let setup = WorkerSetup {
        run: RunOptions {
            sqs_endpoint: Some(moto.url().to_string()),
            runs_dir: runs.path().to_path_buf(),
            ..RunOptions::default()
        },
        ..WorkerSetup::default()
    };
    let writer = MessageWriter::connect(&plan, &setup).await.unwrap();
    let invocations = Arc::new(RecordedInvocations::default());
    let reader = Reader {
        settings,
        invoker: invocations.clone(),
    };
    let ev = ReaderEvent {
        mapping: Some(url.clone()),
        ..ReaderEvent::default()
    };
    let response = reader
        .handle(event(ev, Duration::from_secs(120)))
        .await
        .unwrap();
    assert_eq!(response.outcome, "finished", "{response:?}");
    assert_eq!(response.rows_read, ROWS);
    assert!(invocations.0.lock().unwrap().is_empty());

    let store = ProgressStore::new(dynamo.handle.clone(), default_table(&table));
    let mut received = 0;
    while received < ROWS / PAGE {
        let n = drain(&writer, &sqs, &urls.queue).await;
        assert!(n > 0, "the queue ran dry after {received} messages");
        received += n;
    }
    let recorded = store.load(&response.run_id).await.unwrap();
    let summary = sql2ddb_engine::verify::summarize(&recorded);
    assert!(summary.complete, "{summary:?}");
    assert_eq!(summary.entities[0].written, ROWS);
    assert_items(&items(&dynamo, &table).await, ROWS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_bad_s3_mapping_is_named_by_its_url() {
    let moto = Moto::start();
    let bucket = Bucket::create(moto.url(), "mappings").await;
    let runs = tempfile::tempdir().unwrap();
    let missing = format!("s3://{}/no/such/mapping.toml", bucket.name);
    let reader = Reader {
        settings: Settings {
            // The function's own mapping (SQL2DDB_MAPPING), no event mapping.
            mapping: Some(missing.clone()),
            s3_endpoint: Some(moto.url().to_string()),
            runs_dir: runs.path().to_path_buf(),
            ..Settings::default()
        },
        invoker: Arc::new(RecordedInvocations::default()),
    };
    let e = reader
        .handle(event(ReaderEvent::default(), Duration::from_secs(30)))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("{e}");
    assert!(e.contains(&missing), "{e}");
    assert!(e.contains("NoSuchKey"), "{e}");

    let no_bucket = format!("s3://{}-absent/items.toml", bucket.name);
    let e = sql2ddb_lambda::mapping::load(&no_bucket, &reader.settings.s3_options(), &|_| None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&no_bucket), "{e}");
    assert!(e.contains("NoSuchBucket"), "{e}");

    // A mapping that does not parse: file:line:col, the file being the URL.
    bucket
        .put("bad.toml", b"version = 1\n[source]\nurl = \n")
        .await;
    let bad = format!("s3://{}/bad.toml", bucket.name);
    let ev = ReaderEvent {
        mapping: Some(bad.clone()),
        ..ReaderEvent::default()
    };
    let e = reader
        .handle(event(ev, Duration::from_secs(30)))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("{e}");
    assert!(e.contains(&format!("{bad}:3:")), "{e}");
}
