//! The `sql2ddb worker` write path's CPU per item, for `scripts/bench.sh
//! --only worker`, beside the Lambda handler's (`worker_bench` of
//! sql2ddb-lambda): the items of an export (`sql2ddb export --compression
//! none`) become the pages a reader would enqueue, encoded as SQS message
//! bodies before the clock starts. A [`Worker`] then takes them from an
//! in-memory queue that holds the bodies and decodes each when it is
//! received, as `SqsQueue` does, and writes them into a DynamoDB endpoint
//! (the null sink), recording each batch in a progress table (another
//! endpoint). Prints the figures as JSON.
//!
//! With `--workers N`, N workers take the pages from the one queue, each with
//! its own writer, limits and progress store handle, as N `sql2ddb worker`
//! processes would: they share `--max-wcu` (given to each, as to the
//! processes) through the run's progress table.
//!
//! queue_worker_bench --endpoint URL --progress-endpoint URL --items DIR --table NAME [--page 500] [--concurrency N] [--workers N] [--max-wcu W]

// The allocator of the binary whose write path this measures.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_engine::rejects::RejectsFile;
use sql2ddb_engine::serverless::{load_mapping, Plan};
use sql2ddb_engine::sink::{BatchSink, Destination, SinkOptions};
use sql2ddb_engine::worker::{Worker, WorkerOptions};
use sql2ddb_engine::RunId;
use sql2ddb_queue::{codec, AckHandle, Message, QueueDepth, QueueError, Received, WorkQueue};
use sql2ddb_testkit::bench_input::{arg, cpu_seconds, each_page, progress_store};

const RUN: &str = "bench-queue-worker";

/// The benchmark's run.
fn run() -> RunId {
    RUN.parse().expect("a run id")
}

/// SQS as a worker sees it, in memory: message bodies waiting, each decoded
/// when received (as `SqsQueue::receive` does), held until acknowledged or
/// released; [`BodyQueue::drained`] once every body is acknowledged.
struct BodyQueue {
    state: Mutex<Bodies>,
}

#[derive(Default)]
struct Bodies {
    ready: VecDeque<(u64, String)>,
    held: HashMap<u64, String>,
    next: u64,
}

impl BodyQueue {
    fn new(bodies: Vec<String>) -> BodyQueue {
        let mut state = Bodies::default();
        for body in bodies {
            state.ready.push_back((state.next, body));
            state.next += 1;
        }
        BodyQueue {
            state: Mutex::new(state),
        }
    }

    fn id(handle: &AckHandle) -> Result<u64, QueueError> {
        handle
            .0
            .parse()
            .map_err(|_| QueueError::UnknownHandle(handle.0.clone()))
    }
}

impl WorkQueue for BodyQueue {
    async fn send(&self, messages: Vec<Message>) -> Result<usize, QueueError> {
        let mut state = self.state.lock().unwrap();
        for message in &messages {
            let id = state.next;
            state.next += 1;
            state.ready.push_back((id, codec::encode_message(message)));
        }
        Ok(messages.len())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Received>, QueueError> {
        let taken: Vec<(u64, String)> = {
            let mut state = self.state.lock().unwrap();
            let n = max.clamp(1, 10).min(state.ready.len());
            let taken: Vec<_> = state.ready.drain(..n).collect();
            for (id, body) in &taken {
                state.held.insert(*id, body.clone());
            }
            taken
        };
        if taken.is_empty() {
            // A short poll: nothing more will come, the last batches are being written.
            tokio::time::sleep(wait.min(Duration::from_millis(1))).await;
        }
        Ok(taken
            .into_iter()
            .map(|(id, body)| Received {
                message: codec::decode(&body).expect("the bench's own bodies decode"),
                handle: AckHandle(id.to_string()),
                receive_count: 1,
            })
            .collect())
    }

    async fn ack(&self, handle: &AckHandle) -> Result<(), QueueError> {
        let id = BodyQueue::id(handle)?;
        match self.state.lock().unwrap().held.remove(&id) {
            Some(_) => Ok(()),
            None => Err(QueueError::UnknownHandle(handle.0.clone())),
        }
    }

    async fn extend(&self, handle: &AckHandle, _visibility: Duration) -> Result<(), QueueError> {
        let id = BodyQueue::id(handle)?;
        match self.state.lock().unwrap().held.contains_key(&id) {
            true => Ok(()),
            false => Err(QueueError::UnknownHandle(handle.0.clone())),
        }
    }

    async fn release(&self, handle: &AckHandle) -> Result<(), QueueError> {
        let id = BodyQueue::id(handle)?;
        let mut state = self.state.lock().unwrap();
        let body = state
            .held
            .remove(&id)
            .ok_or_else(|| QueueError::UnknownHandle(handle.0.clone()))?;
        state.ready.push_front((id, body));
        Ok(())
    }

    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        let state = self.state.lock().unwrap();
        Ok(QueueDepth {
            visible: state.ready.len() as u64,
            in_flight: state.held.len() as u64,
            dead_letter: None,
        })
    }
}

impl BodyQueue {
    /// Once every body is acknowledged.
    async fn drained(&self) {
        loop {
            {
                let state = self.state.lock().unwrap();
                if state.ready.is_empty() && state.held.is_empty() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The sink a worker of `plan` builds (the mapping's writer: concurrency,
/// adaptive, attempts), writing to `endpoint`.
async fn worker_sink(
    plan: &Plan,
    endpoint: &str,
    concurrency: usize,
    max_wcu: Option<u64>,
    rejects: Arc<RejectsFile>,
) -> Arc<BatchSink> {
    let client = sql2ddb_dynamo::connect(
        &sql2ddb_dynamo::Endpoint::Url(endpoint.into()),
        Some("us-east-1"),
    )
    .await
    .unwrap();
    let opts = SinkOptions {
        concurrency: Some(concurrency),
        fixed_concurrency: false,
        max_wcu,
        retry: RetryPolicy::default(),
        retry_budget: None,
        dry_run: false,
        destination: Destination::Table,
    };
    BatchSink::for_plan(plan, &opts, &client, client.calls(), rejects)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let endpoint = arg(&args, "--endpoint").expect("--endpoint URL");
    let progress = arg(&args, "--progress-endpoint").expect("--progress-endpoint URL");
    let dir = arg(&args, "--items").expect("--items DIR");
    let table = arg(&args, "--table").expect("--table NAME");
    let page: usize = arg(&args, "--page").map_or(500, |p| p.parse().unwrap());

    // Only the bodies are kept, as a queue would hold them.
    let mut bodies = Vec::new();
    each_page(&run(), std::path::Path::new(&dir), page, |batch| {
        bodies.push(codec::encode(&batch))
    });
    let pages = bodies.len();
    let mapping = format!(
        "version = 1\n[source]\nurl = \"postgres://127.0.0.1/unused\"\n[target]\ntable = \"{table}\"\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\npk = {{ name = \"PK\", type = \"S\" }}\nsk = {{ name = \"SK\", type = \"S\" }}\n[[entity]]\nname = \"order\"\nfrom = \"orders\"\npk = \"X#{{id}}\"\nsk = \"Y\"\n"
    );
    let plan = load_mapping(&mapping, &|_| None).unwrap();
    // As `sql2ddb worker` does: batches at once = the writer's concurrency.
    let concurrency =
        arg(&args, "--concurrency").map_or(plan.writer.concurrency, |c| c.parse().unwrap());
    let workers: usize = arg(&args, "--workers").map_or(1, |w| w.parse().unwrap());
    let max_wcu: Option<u64> = arg(&args, "--max-wcu").map(|w| w.parse().unwrap());
    let dir =
        std::env::temp_dir().join(format!("sql2ddb-queue-worker-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = progress_store(progress, &table, &run()).await;
    let queue = Arc::new(BodyQueue::new(bodies));
    let visibility = Duration::from_secs(60);
    let opts = WorkerOptions {
        concurrency,
        poll: Duration::from_secs(1),
        ..WorkerOptions::default()
    };
    let mut fleet = Vec::new();
    for w in 0..workers {
        let rejects = Arc::new(RejectsFile::new(dir.join(format!("rejects-{w}.jsonl"))));
        let sink = worker_sink(&plan, &endpoint, concurrency, max_wcu, rejects.clone()).await;
        let worker = Worker::new(
            queue.clone(),
            visibility,
            sink,
            store.clone(),
            &table,
            rejects,
        );
        fleet.push(Arc::new(worker));
    }

    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let reports = futures::future::join_all(
        fleet
            .into_iter()
            .map(|worker| worker.work(&opts, queue.drained())),
    )
    .await;
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    let reports: Vec<_> = reports.into_iter().map(Result::unwrap).collect();
    let sum =
        |f: fn(&sql2ddb_engine::worker::WorkerReport) -> u64| reports.iter().map(f).sum::<u64>();
    assert_eq!(
        (sum(|r| r.messages), sum(|r| r.left), sum(|r| r.rejected)),
        (pages as u64, 0, 0),
        "{reports:?}"
    );
    let shared = reports.iter().map(|r| r.fleet_workers).max().unwrap_or(1);
    println!(
        "{}",
        serde_json::json!({ "items": sum(|r| r.items_written), "pages": pages, "seconds": wall, "cpu_seconds": cpu, "workers": workers, "fleet_workers": shared })
    );
}
