//! The worker handler's CPU per item, for `scripts/bench.sh --only lambda`:
//! the items of an export (`sql2ddb export --compression none`) become the
//! pages a reader would enqueue (encoded before the clock starts); the
//! handler is then called in this process with SQS events of `--batch`
//! messages, one event after another as one execution environment takes
//! them, writing into a DynamoDB endpoint (the null sink) and recording each
//! batch in a progress table (another endpoint). Prints the figures as JSON.
//!
//! worker_bench --endpoint URL --progress-endpoint URL --items DIR --table NAME [--page 500] [--batch 10]

// The allocator of the binary whose write path this measures.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use sql2ddb_engine::serverless::{load_mapping, MessageWriter};
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_testkit::bench_input::{arg, cpu_seconds, each_page, progress_store};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let endpoint = arg(&args, "--endpoint").expect("--endpoint URL");
    let progress = arg(&args, "--progress-endpoint").expect("--progress-endpoint URL");
    let dir = arg(&args, "--items").expect("--items DIR");
    let table = arg(&args, "--table").expect("--table NAME");
    let page: usize = arg(&args, "--page").map_or(500, |p| p.parse().unwrap());
    let batch: usize = arg(&args, "--batch").map_or(10, |p| p.parse().unwrap());

    let run: sql2ddb_engine::RunId = "bench-lambda".parse().unwrap();
    // Only the bodies are kept, as a queue would hold them.
    let mut pages = Vec::new();
    let items = each_page(&run, std::path::Path::new(&dir), page, |batch| {
        pages.push(sql2ddb_queue::codec::encode(&batch))
    });

    let store = progress_store(progress, &table, &run).await;
    let mapping = format!(
        "version = 1\n[source]\nurl = \"postgres://127.0.0.1/unused\"\n[target]\ntable = \"{table}\"\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\npk = {{ name = \"PK\", type = \"S\" }}\nsk = {{ name = \"SK\", type = \"S\" }}\n[[entity]]\nname = \"order\"\nfrom = \"orders\"\npk = \"X#{{id}}\"\nsk = \"Y\"\n"
    );
    let plan = load_mapping(&mapping, &|_| None).unwrap();
    let runs = std::env::temp_dir().join("sql2ddb-worker-bench");
    let setup = WorkerSetup {
        run: sql2ddb_engine::RunOptions {
            runs_dir: runs.clone(),
            ..sql2ddb_engine::RunOptions::default()
        },
        ..WorkerSetup::default()
    };
    let writer = MessageWriter::connect(&plan, &setup)
        .await
        .unwrap()
        .with_progress_store(store);

    let events: Vec<SqsEvent> = pages
        .chunks(batch)
        .enumerate()
        .map(|(e, bodies)| {
            let mut event = SqsEvent::default();
            for (i, body) in bodies.iter().enumerate() {
                let mut m = SqsMessage::default();
                m.message_id = Some(format!("{e}-{i}"));
                m.body = Some(body.clone());
                event.records.push(m);
            }
            event
        })
        .collect();
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    for event in events {
        let out = sql2ddb_lambda::worker::handle(
            &writer,
            lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default()),
        )
        .await
        .unwrap();
        assert!(out.batch_item_failures.is_empty(), "{out:?}");
    }
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(runs);
    println!(
        "{}",
        serde_json::json!({ "items": items, "pages": pages.len(), "seconds": wall, "cpu_seconds": cpu })
    );
}
