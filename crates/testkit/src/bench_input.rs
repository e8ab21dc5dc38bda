//! What the queue-consumer benchmark drivers share (the Lambda handler's and
//! the `sql2ddb worker` path's examples): their flags, the items of an
//! export read back, the pages those items make (a page at a time), the
//! progress table their run is recorded in, and the CPU time used.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use sql2ddb_core::{AttrValue, BatchPart, EncodedItem, KeyAttr, KeyType, RunId, WorkBatch};
use sql2ddb_dynamo::progress::{EntityMeta, ProgressStore, RunMeta};

/// The value after flag `name` in `args`, if given.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The first `count` items of the export's `.json` files in `dir`, in file order.
pub fn read_first_items(dir: &Path, count: usize) -> Vec<BTreeMap<String, AttrValue>> {
    export_items(dir).take(count).collect()
}

/// The items of the export's `.json` files in `dir`, in file order, read as
/// they are asked for.
fn export_items(dir: &Path) -> impl Iterator<Item = BTreeMap<String, AttrValue>> {
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
    files.into_iter().flat_map(|f| {
        std::io::BufReader::new(std::fs::File::open(&f).unwrap())
            .lines()
            .map(|line| line.unwrap())
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str::<Line>(&line).unwrap().item)
    })
}

/// The export's items in `dir` as run `run`'s batches of `page` items each
/// (entity `order`, segment 0), as a reader would hand them on: encoded,
/// with their key values (the benchmark's table is keyed by the strings
/// `PK` and `SK`) and a source key of the orders' shape (`{"order_id":N}`,
/// N counting from 1). Each batch goes to `take` as soon as it is made, and
/// only one page of attribute maps is held at a time, so a driver that
/// keeps what `take` makes of them (a message body: about 54 bytes an
/// item) holds that and no copy of every item, at 10M rows too. Returns the
/// number of items.
pub fn each_page(run: &RunId, dir: &Path, page: usize, mut take: impl FnMut(WorkBatch)) -> usize {
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    let mut items = export_items(dir);
    let mut count = 0;
    for index in 0.. {
        let chunk: Vec<EncodedItem> = items
            .by_ref()
            .take(page)
            .map(|item| {
                count += 1;
                let size = sql2ddb_core::limits::item_size(&item);
                // The source key a reader of the orders table gives.
                let source_key = serde_json::json!({ "order_id": count as u64 });
                EncodedItem::new(&item, &keys, source_key, size)
            })
            .collect();
        if chunk.is_empty() {
            break;
        }
        take(WorkBatch {
            run_id: run.clone(),
            entity: "order".into(),
            segment: 0,
            page: index,
            part: BatchPart::WHOLE,
            rows_read: chunk.len() as u64,
            items: chunk,
            pointers: Vec::new(),
        });
    }
    count
}

/// The progress table of `table` on `endpoint`, created if missing, with
/// run `run` (the one entity `order`, one segment) recorded in it.
pub async fn progress_store(endpoint: String, table: &str, run: &RunId) -> ProgressStore {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_becomes_pages_in_file_order_with_the_orders_source_keys() {
        let dir = tempfile::tempdir().unwrap();
        let line = |n: u32| {
            format!(
                "{{\"Item\":{{\"PK\":{{\"S\":\"C#{n}\"}},\"SK\":{{\"S\":\"O#{n}\"}},\"q\":{{\"N\":\"{n}\"}}}}}}\n"
            )
        };
        // Two files, read in name order whatever order they were written in;
        // blank lines are not items.
        std::fs::write(dir.path().join("b.json"), line(4) + &line(5)).unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            line(1) + "\n" + &line(2) + &line(3),
        )
        .unwrap();
        std::fs::write(dir.path().join("manifest.txt"), "not items").unwrap();

        let mut batches = Vec::new();
        let count = each_page(&"r".parse().unwrap(), dir.path(), 2, |b| batches.push(b));
        assert_eq!(count, 5);
        let shape: Vec<(u64, u64, usize)> = batches
            .iter()
            .map(|b| (b.page, b.rows_read, b.items.len()))
            .collect();
        assert_eq!(shape, [(0, 2, 2), (1, 2, 2), (2, 1, 1)]);
        let items: Vec<&EncodedItem> = batches.iter().flat_map(|b| &b.items).collect();
        for (i, m) in items.iter().enumerate() {
            let n = i + 1;
            assert_eq!(
                m.key,
                [
                    AttrValue::S(format!("C#{n}")),
                    AttrValue::S(format!("O#{n}"))
                ]
            );
            assert_eq!(m.source_key.get(), format!("{{\"order_id\":{n}}}"));
            assert_eq!(
                m.item.get(),
                format!("{{\"PK\":{{\"S\":\"C#{n}\"}},\"SK\":{{\"S\":\"O#{n}\"}},\"q\":{{\"N\":\"{n}\"}}}}")
            );
        }
        assert_eq!(read_first_items(dir.path(), 3).len(), 3);
    }
}
