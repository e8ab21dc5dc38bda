//! The time-boxed reader chain: a 30,000-row migration whose reader gets a
//! 2-second deadline per invocation. The test plays the Lambda service: it
//! invokes the reader, takes the re-invocation the reader asked for, and
//! invokes it again until the chain ends, while the worker handler drains
//! the queue as an event source mapping would.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_engine::serverless::{load_mapping, MessageWriter};
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_lambda::reader::{InvokeFuture, Invoker, Reader, ReaderEvent};
use sql2ddb_lambda::Settings;
use support::*;

const ROWS: u64 = 30_000;
const PAGE: u64 = 500;

/// The Lambda service's side of `Invoke`: the requested invocations, kept
/// for the test to deliver.
#[derive(Default)]
struct RecordedInvocations(Mutex<Vec<ReaderEvent>>);

impl Invoker for RecordedInvocations {
    fn invoke(&self, event: &ReaderEvent) -> InvokeFuture<'_> {
        self.0.lock().unwrap().push(event.clone());
        Box::pin(async { Ok(()) })
    }
}

fn mapping(schema: &str, table: &str, dynamo: &str) -> String {
    format!(
        r#"
version = 1
[source]
url = "{pg}"
page_size = {PAGE}
read_parallelism = 2
[target]
table = "{table}"
endpoint = "{dynamo}"
region = "us-east-1"
create = true
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}

[[entity]]
name = "item"
from = "{schema}.items"
pk = "ITEM#{{id}}"
sk = "ITEM"
[entity.attributes]
entity = "item"
"#,
        pg = pg_url()
    )
}

/// The event source mapping: receives, invokes the worker, deletes what it
/// did not report failed; returns how many messages it received.
async fn drain(writer: &MessageWriter, sqs: &aws_sdk_sqs::Client, queue: &str) -> u64 {
    let messages = receive(sqs, queue, 1).await;
    if messages.is_empty() {
        return 0;
    }
    let response = sql2ddb_lambda::worker::handle(
        writer,
        event(sqs_event(&messages), Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let failed: Vec<String> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert!(failed.is_empty(), "no write fails here: {failed:?}");
    settle(sqs, queue, &messages, &failed).await;
    messages.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_time_boxed_reader_chain_migrates_every_row_once() {
    let pg = PgSchema::create(
        "lambda_chain",
        &format!(
            "CREATE TABLE {{schema}}.items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
             INSERT INTO {{schema}}.items SELECT i, 'Name ' || i, i % 100 FROM generate_series(1, {ROWS}) AS i;"
        ),
    )
    .await;
    let dynamo = Dynamo::start().await;
    let moto = moto_server::MotoServer::start();
    let sqs = sqs(moto.url()).await;
    let table = unique("lambda_chain");
    let urls =
        sql2ddb_queue::create_queue(&sqs, &table.replace('_', "-"), Duration::from_secs(60), 5)
            .await
            .unwrap();
    let runs = tempfile::tempdir().unwrap();
    let text = mapping(&pg.name, &table, &dynamo.url);
    let settings = Settings {
        mapping: Some(text.clone()),
        queue_url: Some(urls.queue.clone()),
        sqs_endpoint: Some(moto.url().to_string()),
        runs_dir: runs.path().to_path_buf(),
        // The floor of 10 s is for real functions; this chain's are 2 s long.
        reader_margin: Duration::from_millis(300),
        ..Settings::default()
    };
    let invocations = Arc::new(RecordedInvocations::default());
    let reader = Reader {
        settings,
        invoker: invocations.clone(),
    };
    let plan = load_mapping(&text, &|_| None).unwrap();
    let setup = WorkerSetup {
        sqs_endpoint: Some(moto.url().to_string()),
        runs_dir: runs.path().to_path_buf(),
        ..WorkerSetup::default()
    };

    // Workers drain the queue while the reader chain runs.
    let stop = Arc::new(tokio::sync::Notify::new());
    let workers = {
        let (sqs, queue, stop) = (sqs.clone(), urls.queue.clone(), stop.clone());
        let writer = MessageWriter::connect(&plan, &setup).await.unwrap();
        tokio::spawn(async move {
            let mut received = 0;
            let stopped = stop.notified();
            tokio::pin!(stopped);
            loop {
                tokio::select! {
                    _ = &mut stopped => return received,
                    n = drain(&writer, &sqs, &queue) => received += n,
                }
            }
        })
    };

    let mut next = Some(ReaderEvent::default());
    let mut responses = Vec::new();
    while let Some(ev) = next.take() {
        assert!(responses.len() < 200, "the chain does not end");
        let response = reader
            .handle(event(ev, Duration::from_secs(2)))
            .await
            .unwrap();
        let requested = invocations.0.lock().unwrap().drain(..).collect::<Vec<_>>();
        assert_eq!(requested.len(), usize::from(response.reinvoked));
        if let Some(ev) = requested.into_iter().next() {
            assert_eq!(ev.run_id.as_deref(), Some(response.run_id.as_str()));
            assert!(ev.resume);
            next = Some(ev);
        }
        responses.push(response);
    }
    let run_id = responses[0].run_id.clone();
    let last = responses.last().unwrap();
    assert!(
        last.outcome == "finished" || last.outcome == "already_finished",
        "{last:?}"
    );
    eprintln!("{} reader invocations", responses.len());
    assert!(
        responses.len() > 1,
        "one invocation read everything: {responses:?}"
    );
    // Each invocation reads at least one page: the chain always moves on.
    assert!(responses.len() as u64 <= ROWS / PAGE + 1, "{responses:?}");
    assert!(responses[..responses.len() - 1]
        .iter()
        .all(|r| r.outcome == "time_up"));

    // A finished run's invocation does nothing and says so.
    let again = reader
        .handle(event(
            ReaderEvent {
                mapping: None,
                run_id: Some(run_id.clone()),
                resume: true,
            },
            Duration::from_secs(2),
        ))
        .await
        .unwrap();
    assert_eq!(again.outcome, "already_finished");
    assert!(!again.reinvoked);
    assert!(invocations.0.lock().unwrap().is_empty());

    // Workers drain the rest.
    let store = ProgressStore::new(dynamo.client.clone(), default_table(&table));
    let started = std::time::Instant::now();
    loop {
        let recorded = store.load(&run_id).await.unwrap();
        if sql2ddb_engine::verify::summarize(&recorded).complete {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "workers never finished"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.notify_one();
    let received = workers.await.unwrap();

    let recorded = store.load(&run_id).await.unwrap();
    let summary = sql2ddb_engine::verify::summarize(&recorded);
    assert!(summary.complete);
    let counted = &summary.entities[0];
    assert_eq!(counted.rows_read, Some(ROWS));
    assert_eq!(counted.written, ROWS);
    // Every invocation that read recorded its snapshot: as many as invocations.
    let meta = recorded.meta.as_ref().unwrap();
    let reading = responses
        .iter()
        .filter(|r| r.outcome != "already_finished")
        .count();
    assert_eq!(meta.snapshots.len(), reading, "{responses:?}");
    // No page was enqueued twice: each page sent once, received once, recorded once.
    let pages: u64 = recorded.totals.iter().map(|t| t.pages).sum();
    assert_eq!(pages, ROWS / PAGE);
    assert_eq!(recorded.batches.len() as u64, pages);
    assert_eq!(received, pages, "messages received = pages sent");

    let items = dynamo.items(&table).await;
    assert_eq!(items.len() as u64, ROWS);
    for i in 1..=ROWS {
        let item = &items[&format!("ITEM#{i}")];
        assert_eq!(item["SK"].as_s().unwrap(), "ITEM");
        assert_eq!(item["entity"].as_s().unwrap(), "item");
        assert_eq!(item["id"].as_n().unwrap(), &i.to_string());
        assert_eq!(item["name"].as_s().unwrap(), &format!("Name {i}"));
        assert_eq!(item["qty"].as_n().unwrap(), &(i % 100).to_string());
        assert_eq!(item.len(), 6, "{item:?}");
    }
    pg.drop_schema().await;
}
