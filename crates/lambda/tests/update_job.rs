//! An update job (`sql2ddb update --queue`) run by the Lambda handlers: the
//! reader function, given the job instead of a mapping, scans with a short
//! deadline per invocation and re-invokes itself with its cursors; the
//! worker function, set up from the same job, applies the queued keys. A
//! non-idempotent change (`ADD visits :one`) lands exactly once per
//! matching item, and the run's records prove it complete.

mod support;

use std::sync::Arc;
use std::time::Duration;

use sql2ddb_core::{KeyAttr, KeyType};
use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_dynamo::{ensure_table_spec, TableSpec};
use sql2ddb_engine::serverless::{load_job, JobFile, MessageWriter};
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_engine::RunOptions;
use sql2ddb_lambda::reader::{Reader, ReaderEvent};
use sql2ddb_lambda::Settings;
use sql2ddb_testkit::sdk::types::{AttributeValue, PutRequest, WriteRequest};
use support::*;

/// Customers and orders, `PER_TYPE` each; the job matches the orders.
const PER_TYPE: usize = 1000;

fn job(table: &str, dynamo: &str) -> String {
    format!(
        r#"version = 1
[target]
table = "{table}"
endpoint = "{dynamo}"
region = "us-east-1"
[update]
name = "count-visits"
scan = {{ segments = 2 }}
page_size = 100
where = "begins_with(SK, :o)"
set = "ADD visits :one"
values = {{ ":o" = "ORDER#", ":one" = 1 }}
"#
    )
}

async fn load_table(dynamo: &Dynamo, table: &str) {
    let keys = vec![
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    ensure_table_spec(
        &dynamo.handle,
        &TableSpec::new(table.to_string(), keys),
        true,
    )
    .await
    .unwrap();
    let s = |v: String| AttributeValue::S(v);
    let items: Vec<_> = (0..PER_TYPE)
        .flat_map(|i| {
            [
                [("PK", s(format!("C#{i}"))), ("SK", s("PROFILE".into()))],
                [("PK", s(format!("C#{i}"))), ("SK", s(format!("ORDER#{i}")))],
            ]
        })
        .collect();
    for chunk in items.chunks(25) {
        let requests = chunk
            .iter()
            .map(|attrs| {
                let item = attrs.iter().map(|(k, v)| (k.to_string(), v.clone()));
                let put = PutRequest::builder()
                    .set_item(Some(item.collect()))
                    .build()
                    .unwrap();
                WriteRequest::builder().put_request(put).build()
            })
            .collect();
        dynamo
            .client
            .batch_write_item()
            .request_items(table, requests)
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_job_runs_as_a_time_boxed_reader_chain_and_queue_fed_workers() {
    let dynamo = Dynamo::start().await;
    let table = unique("lambda_update");
    load_table(&dynamo, &table).await;
    let moto = Moto::sqs();
    let sqs = sqs(moto.url()).await;
    let urls = work_queue(&sqs, &table, Duration::from_secs(60)).await;
    let runs = tempfile::tempdir().unwrap();
    let text = job(&table, &dynamo.url);
    let invocations = Arc::new(RecordedInvocations::default());
    let reader = Reader {
        settings: Settings {
            mapping: Some(text.clone()),
            queue_url: Some(urls.queue.clone()),
            sqs_endpoint: Some(moto.url().to_string()),
            runs_dir: runs.path().to_path_buf(),
            reader_margin: Duration::from_millis(300),
            ..Settings::default()
        },
        invoker: invocations.clone(),
    };
    let JobFile::Update(loaded) = load_job(&text, &|_| None).unwrap() else {
        panic!("the job was taken for a mapping");
    };
    let setup = WorkerSetup {
        run: RunOptions {
            sqs_endpoint: Some(moto.url().to_string()),
            runs_dir: runs.path().to_path_buf(),
            ..RunOptions::default()
        },
        ..WorkerSetup::default()
    };
    let writer = MessageWriter::connect_job(&loaded, &setup).await.unwrap();

    // The chain: each invocation has 400 ms, so it reads a page per segment
    // and hands on.
    let mut next = Some(ReaderEvent::default());
    let mut responses = Vec::new();
    let mut received = 0;
    while let Some(ev) = next.take() {
        assert!(responses.len() < 100, "the chain does not end");
        let response = reader
            .handle(event(ev, Duration::from_millis(400)))
            .await
            .unwrap();
        let requested: Vec<_> = invocations.0.lock().unwrap().drain(..).collect();
        assert_eq!(requested.len(), usize::from(response.reinvoked));
        next = requested.into_iter().next();
        responses.push(response);
        // The event source mapping delivers what was sent meanwhile.
        received += drain(&writer, &sqs, &urls.queue).await;
    }
    let run_id = responses[0].run_id.clone();
    assert!(responses.len() > 2, "{responses:?}");
    let (last, earlier) = responses.split_last().unwrap();
    assert_eq!(last.outcome, "finished", "{last:?}");
    assert!(
        earlier.iter().all(|r| r.outcome == "time_up"),
        "{responses:?}"
    );
    let matched: u64 = responses.iter().map(|r| r.rows_read).sum::<u64>();
    assert!(matched >= PER_TYPE as u64, "{responses:?}");

    // Invoked again, a read run does nothing.
    let again = ReaderEvent {
        run_id: Some(run_id.clone()),
        resume: true,
        ..ReaderEvent::default()
    };
    let again = reader
        .handle(event(again, Duration::from_secs(2)))
        .await
        .unwrap();
    assert_eq!(again.outcome, "already_finished", "{again:?}");

    let store = ProgressStore::new(dynamo.handle.clone(), default_table(&table));
    let started = std::time::Instant::now();
    loop {
        received += drain(&writer, &sqs, &urls.queue).await;
        let summary = sql2ddb_engine::verify::summarize(&store.load(&run_id).await.unwrap());
        if summary.complete {
            assert_eq!(summary.entities[0].rows_read, Some(PER_TYPE as u64));
            assert_eq!(summary.entities[0].written, PER_TYPE as u64);
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "{summary:?}");
    }
    assert!(received > 0);

    // Every order once, nothing else.
    let items = dynamo.scan_all(&table).await;
    assert_eq!(items.len(), 2 * PER_TYPE);
    for item in &items {
        let order =
            matches!(&item["SK"], sql2ddb_core::AttrValue::S(sk) if sk.starts_with("ORDER#"));
        match order {
            true => {
                assert_eq!(item["visits"], n(1), "{item:?}");
                assert_eq!(item["sql2ddb_run"], s(run_id.as_str()), "{item:?}");
            }
            false => assert_eq!(item.len(), 2, "{item:?}"),
        }
    }
    sql2ddb_queue::delete_queue(&sqs, &urls.queue)
        .await
        .unwrap();
    sql2ddb_queue::delete_queue(&sqs, &urls.dead_letter)
        .await
        .unwrap();
}
