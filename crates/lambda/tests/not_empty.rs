//! The reader's first invocation of a new run into a table that already
//! holds items is refused, naming the function's setting
//! (`SQL2DDB_IF_NOT_EMPTY`), before a page is sent; told to append, it
//! reads and sends as before.

mod support;

use std::sync::Arc;
use std::time::Duration;

use sql2ddb_core::{KeyAttr, KeyType};
use sql2ddb_engine::IfNotEmpty;
use sql2ddb_lambda::reader::{Reader, ReaderEvent};
use sql2ddb_lambda::Settings;
use sql2ddb_testkit::sdk::types::AttributeValue;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_run_into_a_table_with_items_is_refused_unless_the_function_says_append() {
    let pg = PgSchema::filled("lambda_not_empty", &items_sql(300)).await;
    let dynamo = Dynamo::start().await;
    let moto = Moto::sqs();
    let sqs = sqs(moto.url()).await;
    let table = unique("lambda_not_empty");
    let urls = work_queue(&sqs, &table, Duration::from_secs(60)).await;
    // The table exists and holds an item someone else put there.
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    sql2ddb_dynamo::ensure_table(&dynamo.handle, &table, &keys, true)
        .await
        .unwrap();
    dynamo
        .client
        .put_item()
        .table_name(&table)
        .item("PK", AttributeValue::S("OTHER#1".into()))
        .item("SK", AttributeValue::S("OTHER".into()))
        .send()
        .await
        .unwrap();
    let runs = tempfile::tempdir().unwrap();
    let settings = Settings {
        mapping: Some(items_mapping(&pg.name, &table, &dynamo.url, 100)),
        queue_url: Some(urls.queue.clone()),
        sqs_endpoint: Some(moto.url().to_string()),
        runs_dir: runs.path().to_path_buf(),
        ..Settings::default()
    };
    let reader = |settings: Settings| Reader {
        settings,
        invoker: Arc::new(RecordedInvocations::default()),
    };

    let refused = reader(settings.clone())
        .handle(event(ReaderEvent::default(), Duration::from_secs(60)))
        .await
        .expect_err("the table holds an item")
        .to_string();
    for part in [
        format!("table {table} already holds 1 item"),
        "SQL2DDB_IF_NOT_EMPTY=append".to_string(),
        "SQL2DDB_IF_NOT_EMPTY=truncate".to_string(),
    ] {
        assert!(refused.contains(&part), "{part}: {refused}");
    }
    assert!(!refused.contains("--if-not-empty"), "{refused}");
    assert!(
        receive(&sqs, &urls.queue, 1).await.is_empty(),
        "nothing sent"
    );

    let appended = reader(Settings {
        if_not_empty: IfNotEmpty::Append,
        ..settings
    })
    .handle(event(ReaderEvent::default(), Duration::from_secs(60)))
    .await
    .unwrap();
    assert_eq!(appended.outcome, "finished", "{appended:?}");
    assert_eq!(appended.rows_read, 300);
    assert!(!receive(&sqs, &urls.queue, 1).await.is_empty());
}
