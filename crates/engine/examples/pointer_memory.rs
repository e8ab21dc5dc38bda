//! A worker's memory over a long run of pointer writes, for `scripts/bench.sh
//! --only pointer-memory`: a [`Worker`] takes `--messages` queue messages
//! (default 1,000,000), each one item and one pointer update of a pointer
//! item of its own (`CUSTOMER#n`, as a per-customer `LAST_ORDER` gives),
//! from a queue that makes each message when it is received, and writes
//! them into a DynamoDB endpoint (the null sink), recording each batch in a
//! progress table (another endpoint). The resident set size is sampled as
//! the messages go; a worker whose memory grew with the pointer items it
//! touched would show it here. Prints the figures as JSON.
//!
//! pointer_memory --endpoint URL --progress-endpoint URL --table NAME [--messages N]

// The allocator of the binary whose write path this measures.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sql2ddb_core::{
    AttrValue, BatchPart, BatchPointer, EncodedItem, Item, KeyAttr, KeyType, PointerUpdate,
    WorkBatch,
};
use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_engine::rejects::RejectsFile;
use sql2ddb_engine::serverless::load_mapping;
use sql2ddb_engine::sink::{BatchSink, Destination, SinkOptions};
use sql2ddb_engine::worker::{Worker, WorkerOptions};
use sql2ddb_engine::RunId;
use sql2ddb_queue::{codec, AckHandle, Message, QueueDepth, QueueError, Received, WorkQueue};
use sql2ddb_testkit::bench_input::{arg, cpu_seconds, progress_store};
use tokio::sync::Notify;

const RUN: &str = "bench-pointer-memory";

/// The benchmark's run.
fn run() -> RunId {
    RUN.parse().expect("a run id")
}

/// Points of the run (in tenths of the messages) where the RSS is sampled.
const SAMPLES: [u64; 4] = [1, 2, 5, 10];

/// Message `n`: the item `ORDER#n` and the update of pointer item
/// `CUSTOMER#n` to it, encoded as a queue body.
fn body(n: u64) -> String {
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    let (pk, sk) = (
        AttrValue::S(format!("ORDER#{n:09}")),
        AttrValue::S("A".into()),
    );
    let mut item = Item::new();
    item.insert("PK".into(), pk.clone());
    item.insert("SK".into(), sk.clone());
    item.insert("total".into(), AttrValue::N((n % 1000).to_string()));
    let size = sql2ddb_core::limits::item_size(&item);
    let update = PointerUpdate {
        name: "LAST_ORDER".into(),
        pk: AttrValue::S(format!("CUSTOMER#{n:09}")),
        sk: Some(AttrValue::S("LAST_ORDER".into())),
        attribute: "order_id".into(),
        value: AttrValue::N(n.to_string()),
        is_max: true,
        attributes: Item::new(),
        cleared: Vec::new(),
    };
    codec::encode(&WorkBatch {
        run_id: run(),
        entity: "order".into(),
        segment: 0,
        page: n,
        part: BatchPart::WHOLE,
        rows_read: 1,
        items: vec![EncodedItem::new(
            &item,
            &keys,
            serde_json::json!({ "order_id": n }),
            size,
        )],
        pointers: vec![BatchPointer {
            update,
            item_key: vec![pk, sk],
        }],
    })
}

/// The resident set size and its peak so far, in kB (`/proc/self/status`).
fn rss_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// SQS as a worker sees it, for `total` messages made as they are
/// received: only the messages in flight are held.
struct MadeQueue {
    state: Mutex<Made>,
    total: u64,
    drained: Notify,
}

#[derive(Default)]
struct Made {
    next: u64,
    held: HashMap<u64, String>,
    acked: u64,
    samples: Vec<serde_json::Value>,
}

impl MadeQueue {
    fn id(handle: &AckHandle) -> Result<u64, QueueError> {
        handle
            .0
            .parse()
            .map_err(|_| QueueError::UnknownHandle(handle.0.clone()))
    }
}

impl WorkQueue for MadeQueue {
    async fn send(&self, _messages: Vec<Message>) -> Result<usize, QueueError> {
        unreachable!("a worker sends nothing")
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Received>, QueueError> {
        let taken: Vec<(u64, String)> = {
            let mut state = self.state.lock().unwrap();
            let n = (max.clamp(1, 10) as u64).min(self.total - state.next);
            let taken: Vec<_> = (state.next..state.next + n).map(|i| (i, body(i))).collect();
            state.next += n;
            for (id, body) in &taken {
                state.held.insert(*id, body.clone());
            }
            taken
        };
        if taken.is_empty() {
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
        let id = MadeQueue::id(handle)?;
        let mut state = self.state.lock().unwrap();
        if state.held.remove(&id).is_none() {
            return Err(QueueError::UnknownHandle(handle.0.clone()));
        }
        state.acked += 1;
        let acked = state.acked;
        if SAMPLES.iter().any(|t| acked == self.total * t / 10) {
            let (rss, peak) = rss_kb();
            state.samples.push(serde_json::json!({
                "messages": acked, "rss_kb": rss, "peak_rss_kb": peak
            }));
        }
        if state.next == self.total && state.held.is_empty() {
            self.drained.notify_one();
        }
        Ok(())
    }

    async fn extend(&self, handle: &AckHandle, _visibility: Duration) -> Result<(), QueueError> {
        let id = MadeQueue::id(handle)?;
        match self.state.lock().unwrap().held.contains_key(&id) {
            true => Ok(()),
            false => Err(QueueError::UnknownHandle(handle.0.clone())),
        }
    }

    async fn release(&self, _handle: &AckHandle) -> Result<(), QueueError> {
        unreachable!("the null sink takes every write")
    }

    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        let state = self.state.lock().unwrap();
        Ok(QueueDepth {
            visible: self.total - state.next,
            in_flight: state.held.len() as u64,
            dead_letter: None,
        })
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let endpoint = arg(&args, "--endpoint").expect("--endpoint URL");
    let progress = arg(&args, "--progress-endpoint").expect("--progress-endpoint URL");
    let table = arg(&args, "--table").expect("--table NAME");
    let total: u64 = arg(&args, "--messages").map_or(1_000_000, |m| m.parse().unwrap());

    let mapping = format!(
        "version = 1\n[source]\nurl = \"postgres://127.0.0.1/unused\"\n[target]\ntable = \"{table}\"\nendpoint = \"{endpoint}\"\nregion = \"us-east-1\"\npk = {{ name = \"PK\", type = \"S\" }}\nsk = {{ name = \"SK\", type = \"S\" }}\n[[entity]]\nname = \"order\"\nfrom = \"orders\"\npk = \"ORDER#{{id}}\"\nsk = \"A\"\n"
    );
    let plan = load_mapping(&mapping, &|_| None).unwrap();
    let concurrency = plan.writer.concurrency;
    let dir = std::env::temp_dir().join(format!("sql2ddb-pointer-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rejects = Arc::new(RejectsFile::new(dir.join("rejects.jsonl")));
    let client = sql2ddb_dynamo::connect(
        &sql2ddb_dynamo::Endpoint::Url(endpoint.clone()),
        Some("us-east-1"),
    )
    .await
    .unwrap();
    let opts = SinkOptions {
        concurrency: Some(concurrency),
        fixed_concurrency: false,
        max_wcu: None,
        retry: RetryPolicy::default(),
        retry_budget: None,
        dry_run: false,
        destination: Destination::Table,
    };
    let sink = BatchSink::for_plan(&plan, &opts, &client, client.calls(), rejects.clone());
    let store = progress_store(progress, &table, &run()).await;
    let queue = Arc::new(MadeQueue {
        state: Mutex::new(Made::default()),
        total,
        drained: Notify::new(),
    });
    let worker = Arc::new(Worker::new(
        queue.clone(),
        Duration::from_secs(60),
        sink.clone(),
        store,
        &table,
        rejects,
    ));
    let opts = WorkerOptions {
        concurrency,
        poll: Duration::from_secs(1),
        ..WorkerOptions::default()
    };

    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let report = worker.work(&opts, queue.drained.notified()).await.unwrap();
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        (report.messages, report.left, report.rejected),
        (total, 0, 0),
        "{report:?}"
    );
    let pointers: u64 = sink
        .pointer_stats
        .lock()
        .unwrap()
        .values()
        .map(|s| s.moved + s.already_newer)
        .sum();
    assert_eq!(pointers, total, "every pointer update written");
    let samples = std::mem::take(&mut queue.state.lock().unwrap().samples);
    println!(
        "{}",
        serde_json::json!({
            "messages": total, "pointer_items": total, "seconds": wall,
            "cpu_seconds": cpu, "samples": samples
        })
    );
}
