//! The time-boxed reader chain: a 50,000-row migration whose reader gets a
//! 2-second deadline per invocation (`SQL2DDB_TEST_CHAIN_ROWS` changes the
//! rows: a multiple of 1,000, two segments of whole pages). The test plays
//! the Lambda service: it invokes the reader, takes the re-invocation the reader asked for, and
//! invokes it again until the chain ends, while the worker handler drains
//! the queue as an event source mapping would.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_engine::serverless::{load_mapping, MessageWriter};
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_engine::RunOptions;
use sql2ddb_lambda::reader::{Reader, ReaderEvent};
use sql2ddb_lambda::Settings;
use support::*;

/// Rows migrated, unless `SQL2DDB_TEST_CHAIN_ROWS` says otherwise.
const ROWS: u64 = 50_000;
const PAGE: u64 = 500;

fn rows() -> u64 {
    std::env::var("SQL2DDB_TEST_CHAIN_ROWS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(ROWS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_time_boxed_reader_chain_migrates_every_row_once() {
    let rows = rows();
    let pg = PgSchema::filled("lambda_chain", &items_sql(rows)).await;
    let dynamo = Dynamo::start().await;
    let moto = Moto::sqs();
    let sqs = sqs(moto.url()).await;
    let table = unique("lambda_chain");
    let urls = work_queue(&sqs, &table, Duration::from_secs(60)).await;
    let runs = tempfile::tempdir().unwrap();
    let text = items_mapping(&pg.name, &table, &dynamo.url, PAGE);
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
        run: RunOptions {
            sqs_endpoint: Some(moto.url().to_string()),
            runs_dir: runs.path().to_path_buf(),
            ..RunOptions::default()
        },
        ..WorkerSetup::default()
    };

    // Workers drain the queue while the reader chain runs.
    // A drain is never cut short: its batches are recorded before its
    // messages are counted, so stopping in the middle of one would count
    // fewer messages than the run recorded.
    let stop = Arc::new(AtomicBool::new(false));
    let workers = {
        let (sqs, queue, stop) = (sqs.clone(), urls.queue.clone(), stop.clone());
        let writer = MessageWriter::connect(&plan, &setup).await.unwrap();
        tokio::spawn(async move {
            let mut received = 0;
            loop {
                let n = drain(&writer, &sqs, &queue).await;
                received += n;
                if n == 0 && stop.load(Ordering::SeqCst) {
                    return received;
                }
            }
        })
    };

    let chain_started = std::time::Instant::now();
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
    eprintln!(
        "{} reader invocations in {:?}; rows_read answered: {:?}; margins (ms): {:?}",
        responses.len(),
        chain_started.elapsed(),
        responses.iter().map(|r| r.rows_read).collect::<Vec<_>>(),
        responses
            .iter()
            .map(|r| r.message.as_str())
            .filter_map(|m| m.strip_prefix("stopped ")?.split(' ').next())
            .collect::<Vec<_>>(),
    );
    assert!(
        responses.len() > 1,
        "one invocation read everything: {responses:?}"
    );
    // Each invocation reads at least one page: the chain always moves on.
    assert!(
        responses.len() as u64 <= rows.div_ceil(PAGE) + 1,
        "{responses:?}"
    );
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
    let store = ProgressStore::new(dynamo.handle.clone(), default_table(&table));
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
    eprintln!(
        "the workers finished {:?} after the chain",
        started.elapsed()
    );
    stop.store(true, Ordering::SeqCst);
    let received = workers.await.unwrap();

    let recorded = store.load(&run_id).await.unwrap();
    let summary = sql2ddb_engine::verify::summarize(&recorded);
    assert!(summary.complete);
    let counted = &summary.entities[0];
    assert_eq!(counted.rows_read, Some(rows));
    assert_eq!(counted.written, rows);
    // Every invocation that read recorded its snapshot: as many as invocations.
    let meta = recorded.meta.as_ref().unwrap();
    let reading = responses
        .iter()
        .filter(|r| r.outcome != "already_finished")
        .count();
    assert_eq!(meta.snapshots.len(), reading, "{responses:?}");
    // No page was enqueued twice: each page sent once, received once, recorded once.
    let pages: u64 = recorded.totals.iter().map(|t| t.pages).sum();
    assert_eq!(pages, rows.div_ceil(PAGE));
    assert_eq!(recorded.batches.len() as u64, pages);
    assert_eq!(received, pages, "messages received = pages sent");

    assert_items(&items(&dynamo, &table).await, rows);
}
