//! The worker handler's partial batch response: of 10 messages, the 3 whose
//! batches cannot be written (their pointer update fails at the fault
//! proxy) are reported, exactly those; redelivered, they are written.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_engine::serverless::{load_mapping, read_until, MessageWriter, ReaderOutcome};
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_engine::RunOptions;
use sql2ddb_testkit::{FaultConfig, FaultProxy};
use support::*;

fn mapping(schema: &str, table: &str, endpoint: &str) -> String {
    let head = mapping_head("page_size = 10", table, endpoint);
    format!(
        r#"{head}
[[entity]]
name = "customer"
from = "{schema}.customers"
pk = "CUSTOMER#{{id}}"
sk = "PROFILE"

[[entity]]
name = "order"
from = "{schema}.orders"
pk = "ORDER#{{id}}"
sk = "ORDER"

[[pointer]]
entity = "order"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = {{ attribute = "orderId", column = "id" }}
"#
    )
}

/// Faults every pointer update (`UpdateItem`); item writes and progress
/// records (`BatchWriteItem`, `PutItem`) go through.
fn pointer_faults(rate: f64) -> FaultConfig {
    FaultConfig {
        internal_error: rate,
        operations: vec!["UpdateItem".into()],
        ..FaultConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_failed_messages_are_reported_and_redelivery_writes_them() {
    let pg = PgSchema::filled(
        "lambda_worker",
        "CREATE TABLE {schema}.customers (id bigint PRIMARY KEY, name text NOT NULL);
         INSERT INTO {schema}.customers SELECT i, 'C' || i FROM generate_series(1, 70) AS i;
         CREATE TABLE {schema}.orders (id bigint PRIMARY KEY, total int NOT NULL);
         INSERT INTO {schema}.orders SELECT i, i * 3 FROM generate_series(1, 30) AS i;",
    )
    .await;
    let dynamo = Dynamo::start().await;
    let proxy = FaultProxy::start(&dynamo.url, pointer_faults(0.0))
        .await
        .unwrap();
    let moto = Moto::sqs();
    let sqs = sqs(moto.url()).await;
    let table = unique("lambda_worker");
    // Failed messages come back after 2 s, as with a real queue.
    let urls = work_queue(&sqs, &table, Duration::from_secs(2)).await;
    let runs = tempfile::tempdir().unwrap();
    let text = mapping(&pg.name, &table, &proxy.url());
    let plan = load_mapping(&text, &|_| None).unwrap();

    // The reader enqueues 10 pages: 7 of customers, 3 of orders.
    let opts = RunOptions {
        queue: Some(urls.queue.clone()),
        sqs_endpoint: Some(moto.url().to_string()),
        runs_dir: runs.path().to_path_buf(),
        ..RunOptions::default()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let step = read_until(&plan, &opts, deadline, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(step.outcome, ReaderOutcome::Finished);

    let mut messages = Vec::new();
    while messages.len() < 10 {
        let got = receive(&sqs, &urls.queue, 1).await;
        assert!(!got.is_empty(), "only {} messages came", messages.len());
        messages.extend(got);
    }
    assert_eq!(messages.len(), 10);
    let orders: BTreeSet<String> = messages
        .iter()
        .filter(|m| {
            let batch = sql2ddb_queue::codec::decode(m.body.as_deref().unwrap()).unwrap();
            batch.entity() == "order"
        })
        .map(|m| m.message_id.clone().unwrap())
        .collect();
    assert_eq!(orders.len(), 3);

    let setup = WorkerSetup {
        run: RunOptions {
            sqs_endpoint: Some(moto.url().to_string()),
            runs_dir: runs.path().to_path_buf(),
            // Few, quick retries: the faults do not pass.
            retry: RetryPolicy {
                base: Duration::from_millis(5),
                cap: Duration::from_millis(20),
                max_attempts: 2,
                throttle_budget: None,
            },
            ..RunOptions::default()
        },
        ..WorkerSetup::default()
    };
    let writer = MessageWriter::connect(&plan, &setup).await.unwrap();
    proxy.set_config(pointer_faults(1.0)).unwrap();
    let failed = invoke_worker(&writer, &messages).await;
    assert_eq!(failed.iter().cloned().collect::<BTreeSet<_>>(), orders);
    assert_eq!(failed.len(), 3);
    settle(&sqs, &urls.queue, &messages, &failed).await;

    let store = ProgressStore::new(dynamo.handle.clone(), default_table(&table));
    let recorded = store.load(&step.run_id).await.unwrap();
    assert_eq!(
        recorded.batches.len(),
        7,
        "the written batches are recorded"
    );
    assert!(!sql2ddb_engine::verify::summarize(&recorded).complete);

    // Redelivery after the visibility timeout, the fault gone.
    proxy.set_config(pointer_faults(0.0)).unwrap();
    let mut again = Vec::new();
    while again.len() < 3 {
        let got = receive(&sqs, &urls.queue, 5).await;
        assert!(!got.is_empty(), "the failed messages did not come back");
        again.extend(got);
    }
    let ids: BTreeSet<String> = again
        .iter()
        .map(|m| m.message_id.clone().unwrap())
        .collect();
    assert_eq!(ids, orders);
    let failed = invoke_worker(&writer, &again).await;
    assert!(failed.is_empty(), "{failed:?}");
    settle(&sqs, &urls.queue, &again, &[]).await;

    let recorded = store.load(&step.run_id).await.unwrap();
    assert!(sql2ddb_engine::verify::summarize(&recorded).complete);
    let items = items(&dynamo, &table).await;
    assert_eq!(
        items.len(),
        70 + 30 + 1,
        "customers, orders and the pointer"
    );
    assert_eq!(items["LAST_ORDER"]["orderId"], n(30));
}
