//! What the queue-consumer benchmark drivers share (the Lambda handler's and
//! the `sql2ddb worker` path's examples): their flags, the items of an
//! export read back, the pages those items make, the progress table their
//! run is recorded in, and the CPU time used.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use sql2ddb_core::{AttrValue, BatchPart, EncodedItem, KeyAttr, KeyType, WorkBatch};
use sql2ddb_dynamo::progress::{EntityMeta, ProgressStore, RunMeta};

/// The value after flag `name` in `args`, if given.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Every item of the export's `.json` files in `dir`, in file order.
pub fn read_items(dir: &Path) -> Vec<BTreeMap<String, AttrValue>> {
    read_first_items(dir, usize::MAX)
}

/// The first `count` items of the export's `.json` files in `dir`, in file order.
pub fn read_first_items(dir: &Path, count: usize) -> Vec<BTreeMap<String, AttrValue>> {
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(rename = "Item")]
        item: BTreeMap<String, AttrValue>,
    }
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut items = Vec::new();
    for f in files {
        let reader = std::io::BufReader::new(std::fs::File::open(&f).unwrap());
        for line in reader.lines() {
            if items.len() == count {
                return items;
            }
            let line = line.unwrap();
            if !line.trim().is_empty() {
                items.push(serde_json::from_str::<Line>(&line).unwrap().item);
            }
        }
    }
    items
}

/// The items as run `run`'s batches of `page` items each (entity `order`,
/// segment 0), as a reader would hand them on: encoded, with their key
/// values (the benchmark's table is keyed by the strings `PK` and `SK`) and
/// a source key of the orders' shape (`{"order_id":N}`, N counting from 1).
pub fn pages(run: &str, all: &[BTreeMap<String, AttrValue>], page: usize) -> Vec<WorkBatch> {
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    all.chunks(page)
        .enumerate()
        .map(|(i, chunk)| {
            let items: Vec<EncodedItem> = chunk
                .iter()
                .enumerate()
                .map(|(j, item)| {
                    let size = sql2ddb_core::limits::item_size(item);
                    // The source key a reader of the orders table gives.
                    let order_id = (i * page + j + 1) as u64;
                    let source_key = serde_json::json!({ "order_id": order_id });
                    EncodedItem::new(item, &keys, source_key, size)
                })
                .collect();
            WorkBatch {
                run_id: run.into(),
                entity: "order".into(),
                segment: 0,
                page: i as u64,
                part: BatchPart::WHOLE,
                rows_read: items.len() as u64,
                items,
                pointers: Vec::new(),
                update: None,
            }
        })
        .collect()
}

/// The progress table of `table` on `endpoint`, created if missing, with
/// run `run` (the one entity `order`, one segment) recorded in it.
pub async fn progress_store(endpoint: String, table: &str, run: &str) -> ProgressStore {
    let client =
        sql2ddb_dynamo::connect(&sql2ddb_dynamo::Endpoint::Url(endpoint), Some("us-east-1"))
            .await
            .unwrap();
    let store = ProgressStore::new(client, format!("{table}-sql2ddb-progress"));
    store.ensure().await.unwrap();
    let meta = RunMeta {
        mapping: "bench".into(),
        source: "bench".into(),
        table: table.into(),
        entities: vec![EntityMeta {
            name: "order".into(),
            segments: 1,
            bounds: Vec::new(),
        }],
        started: "2024-01-01T00:00:00Z".into(),
        queue: None,
        snapshots: Vec::new(),
    };
    store.record_run(run, &meta).await.unwrap();
    store
}

/// User + system CPU seconds of this process so far.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which may hold spaces) close with ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // The kernel's USER_HZ, 100 on Linux.
    ticks / 100.0
}
