//! The writer against the testkit's capacity model of a table, on a paused
//! clock: 8 partitions of 250 write units a second, a table of 2,000, no
//! burst credit. What it shows is what the pacer is for: every item
//! written, near the time the table's capacity allows, and few items sent
//! only to be refused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sql2ddb_core::capacity::attr_hash;
use sql2ddb_core::{write_units, AttrValue, EncodedItem, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::{
    AdaptiveConcurrency, BatchWriteApi, BatchWriter, CallError, Failure, Pacer, RetryPolicy,
};
use sql2ddb_testkit::capacity::{CapacityConfig, TableModel, WriteDemand};
use tokio::time::Instant;

/// A call's round trip.
const LATENCY: Duration = Duration::from_millis(3);

/// The model behind a `BatchWriteItem` client, on tokio's clock.
struct Model {
    table: Mutex<TableModel>,
    start: Instant,
    pacer: Arc<Pacer>,
    log: Mutex<Vec<(f64, bool, usize, usize)>>,
}

impl BatchWriteApi for &Model {
    async fn batch_put(
        &self,
        _table: &str,
        _keys: &[KeyAttr],
        items: &[&EncodedItem],
    ) -> Result<Vec<usize>, CallError> {
        tokio::time::sleep(LATENCY / 2).await;
        let now = (Instant::now() - self.start).as_secs_f64();
        let demands: Vec<WriteDemand> = items
            .iter()
            .map(|m| WriteDemand {
                key_hash: attr_hash(&m.key[0]).unwrap(),
                units: write_units(m.size),
                total_units: write_units(m.size),
            })
            .collect();
        let refused = self.table.lock().unwrap().admit_writes(now, &demands);
        for (i, r) in refused.iter().enumerate() {
            if r.is_some() {
                let paced = self.pacer.key_rate(&items[i].key[0]).is_some();
                let n = refused.iter().filter(|r| r.is_some()).count();
                self.log.lock().unwrap().push((now, paced, n, items.len()));
            }
        }
        tokio::time::sleep(LATENCY / 2).await;
        let unprocessed: Vec<usize> = (0..items.len()).filter(|&i| refused[i].is_some()).collect();
        if unprocessed.len() == items.len() {
            return Err(CallError {
                failure: Failure::Throttled,
                message: "ProvisionedThroughputExceededException".into(),
            });
        }
        Ok(unprocessed)
    }
}

fn keys() -> Vec<KeyAttr> {
    vec![KeyAttr::new("PK", KeyType::S), KeyAttr::new("SK", KeyType::S)]
}

fn item(pk: String, sk: u64) -> EncodedItem {
    let mut item = Item::new();
    item.insert("PK".into(), AttrValue::S(pk));
    item.insert("SK".into(), AttrValue::S(format!("ITEM#{sk:010}")));
    EncodedItem::new(&item, &keys(), serde_json::Value::Null, 1)
}

/// The bench's three data sets of `n` items, in the order a run reads them.
fn data_set(name: &str, n: u64) -> Vec<EncodedItem> {
    (1..=n)
        .map(|g| match name {
            "uniform" => item(format!("ITEM#{g}"), g),
            "collection" => item(format!("CUSTOMER#{}", (g - 1) / 200), g),
            "skewed" if g % 5 == 0 => item(format!("CUSTOMER#{}", (g / 5) % 4), g),
            _ => item(format!("CUSTOMER#{}", 1000 + g), g),
        })
        .collect()
}

struct Load {
    seconds: f64,
    ideal: f64,
    refused: u64,
    written: u64,
}

/// Writes `items` in pages of `page` taken by `writers` tasks, one
/// concurrency of 8 calls and one pacer between them.
async fn load(items: Vec<EncodedItem>, page: usize, writers: usize) -> Load {
    let config = CapacityConfig {
        burst: false,
        ..CapacityConfig::provisioned(2000, 8, 250)
    };
    let table = TableModel::new(&config);
    let mut per_partition = vec![0u64; 8];
    for m in &items {
        per_partition[table.partition_of(attr_hash(&m.key[0]).unwrap())] += write_units(m.size);
    }
    let total: u64 = per_partition.iter().sum();
    let ideal = (total as f64 / 2000.0).max(*per_partition.iter().max().unwrap() as f64 / 250.0);
    let pacer = Arc::new(Pacer::new());
    let model = Box::leak(Box::new(Model {
        table: Mutex::new(table),
        start: Instant::now(),
        pacer: pacer.clone(),
        log: Mutex::new(Vec::new()),
    }));
    let model: &'static Model = model;
    let concurrency = Arc::new(AdaptiveConcurrency::new(8));
    let policy = RetryPolicy::default().with_throttle_budget(Duration::from_secs(600));
    let pages: Arc<Mutex<Vec<Vec<EncodedItem>>>> = Arc::new(Mutex::new(
        items.chunks(page).rev().map(|c| c.to_vec()).collect(),
    ));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..writers {
        let writer = BatchWriter::new(model, "t", keys(), policy)
            .with_concurrency(concurrency.clone())
            .with_pacer(pacer.clone());
        let pages = pages.clone();
        tasks.spawn(async move {
            let mut written = 0;
            loop {
                let page = pages.lock().unwrap().pop();
                let Some(page) = page else { break };
                let out = writer.write(page).await;
                assert!(out.failed.is_empty() && out.unwritten.is_empty() && out.rejected.is_empty());
                written += out.written;
            }
            written
        });
    }
    let watch = pacer.clone();
    let sampler = tokio::spawn(async move {
        let mut last = vec![0u64; 8];
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let u = model.table.lock().unwrap().usage();
            let d: Vec<u64> = u.partition_write_units.iter().zip(&last).map(|(a, b)| a - b).collect();
            last = u.partition_write_units.clone();
            let ks: Vec<String> = (0..12).map(|k| format!("{:.0}", watch.key_rate(&AttrValue::S(format!("CUSTOMER#{k}"))).unwrap_or(-1.0))).collect();
            eprintln!("keys {ks:?}");
            eprintln!("t={:.1} rate={:?} {:?} sum={}", (Instant::now() - model.start).as_secs_f64(), watch.snapshot().rate.map(|r| r as u64), d, d.iter().sum::<u64>());
        }
    });
    let mut written = 0;
    while let Some(w) = tasks.join_next().await {
        written += w.unwrap();
    }
    sampler.abort();
    let usage = model.table.lock().unwrap().usage();
    {
        let log = model.log.lock().unwrap();
        let mut per_sec = vec![(0, 0); 20];
        for (t, paced, _, _) in log.iter() {
            let e = &mut per_sec[(*t as usize).min(19)];
            if *paced { e.0 += 1 } else { e.1 += 1 }
        }
        let whole = log.iter().filter(|(_, _, n, len)| n == len).count();
        eprintln!("refusals per second (paced key, new key): {per_sec:?}; in whole refusals: {whole}; {:?}", pacer.snapshot());
    }
    Load {
        seconds: (Instant::now() - model.start).as_secs_f64(),
        ideal,
        refused: usage.refused_writes,
        written,
    }
}

/// A run's shape: pages of 5,000 rows (the default), two written at once
/// (8 calls of 25 items fill from two pages).
async fn run(set: &str) -> (Load, f64, f64) {
    let n = 20_000;
    let l = load(data_set(set, n), std::env::var("P").map_or(5000, |v| v.parse().unwrap()), std::env::var("W").map_or(2, |v| v.parse().unwrap())).await;
    assert_eq!(l.written, n, "{set}: every item written");
    let ratio = l.seconds / l.ideal;
    let refused = l.refused as f64 / n as f64;
    eprintln!(
        "{set}: {:.2} s, ideal {:.2} s, time/ideal {ratio:.3}, refused {} ({:.1}%)",
        l.seconds,
        l.ideal,
        l.refused,
        refused * 100.0
    );
    (l, ratio, refused)
}

#[tokio::test(start_paused = true)]
async fn uniform_keys_are_written_at_the_tables_rate_with_few_refusals() {
    let (_, ratio, refused) = run("uniform").await;
    assert!(ratio <= 1.05, "time/ideal {ratio:.3}");
    assert!(refused <= 0.10, "refused {refused:.3}");
}

#[tokio::test(start_paused = true)]
async fn collections_read_in_key_order_are_written_with_few_refusals() {
    let (_, ratio, refused) = run("collection").await;
    assert!(ratio <= 1.05, "time/ideal {ratio:.3}");
    assert!(refused <= 0.10, "refused {refused:.3}");
}

#[tokio::test(start_paused = true)]
async fn hot_keys_wait_without_holding_back_the_rest() {
    // The busiest partition holds four hot keys' and its share of the
    // others' items: the load takes its time, not more; the others' items
    // are not held behind the hot keys'.
    let (_, ratio, refused) = run("skewed").await;
    assert!(ratio <= 1.05, "time/ideal {ratio:.3}");
    assert!(refused <= 0.15, "refused {refused:.3}");
}
