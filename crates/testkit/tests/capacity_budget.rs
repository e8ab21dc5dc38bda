//! The writer's retry budget against the capacity model alone, on tokio's
//! paused clock: a call is admitted or refused by [`TableModel`] at the
//! moment it is made, as the proxy would admit it, without a server or real
//! time. A hot partition without burst credit refuses its items for as long
//! as its rate says; a generous budget writes every item once, a small one
//! leaves the items the partition could not take in time unwritten (never
//! failed, never rejected) and writes the others once.

mod support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use sql2ddb_core::capacity::attr_hash;
use sql2ddb_core::{write_units, AttrValue, EncodedItem, Item, KeyAttr};
use sql2ddb_dynamo::{BatchWriteApi, BatchWriter, CallError, Failure, RetryPolicy};
use sql2ddb_testkit::capacity::{CapacityConfig, TableModel, WriteDemand};
use tokio::time::Instant;

/// `BatchWriteItem` answered by the model at the paused clock's time: the
/// refused requests come back unprocessed, a call refused whole gets
/// `ProvisionedThroughputExceededException`, as DynamoDB answers.
struct Modelled {
    model: Mutex<TableModel>,
    start: Instant,
    /// Times each item was admitted, by its sort key.
    admitted: Mutex<BTreeMap<String, u32>>,
}

impl Modelled {
    fn new(config: &CapacityConfig) -> Modelled {
        Modelled {
            model: Mutex::new(TableModel::new(config)),
            start: Instant::now(),
            admitted: Mutex::new(BTreeMap::new()),
        }
    }
}

fn sk(m: &EncodedItem) -> String {
    match &m.key[1] {
        AttrValue::S(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

impl BatchWriteApi for &Modelled {
    async fn batch_put(
        &self,
        _table: &str,
        _keys: &[KeyAttr],
        items: &[&EncodedItem],
    ) -> Result<Vec<usize>, CallError> {
        let now = self.start.elapsed().as_secs_f64();
        let demands: Vec<WriteDemand> = items
            .iter()
            .map(|m| WriteDemand {
                key_hash: attr_hash(&m.key[0]).unwrap(),
                units: write_units(m.size),
                total_units: write_units(m.size),
            })
            .collect();
        let refused = self.model.lock().unwrap().admit_writes(now, &demands);
        if refused.iter().all(Option::is_some) {
            return Err(CallError {
                failure: Failure::Throttled,
                message: "ProvisionedThroughputExceededException: the partition is at its limit"
                    .into(),
            });
        }
        let mut admitted = self.admitted.lock().unwrap();
        let mut unprocessed = Vec::new();
        for (i, (m, r)) in items.iter().zip(refused).enumerate() {
            match r {
                Some(_) => unprocessed.push(i),
                None => *admitted.entry(sk(m)).or_default() += 1,
            }
        }
        Ok(unprocessed)
    }
}

/// 300 items of partition key `HOT` and 300 of their own keys, in pages of
/// 150: each page holds 75 hot items.
fn pages() -> Vec<Vec<EncodedItem>> {
    let keys = support::keys();
    let all: Vec<EncodedItem> = (0..600)
        .map(|i| {
            let pk = if i % 2 == 0 {
                "HOT".to_string()
            } else {
                format!("COLD#{i}")
            };
            let mut item = Item::new();
            item.insert("PK".into(), AttrValue::S(pk));
            item.insert("SK".into(), AttrValue::S(format!("E#{i:04}")));
            EncodedItem::new(&item, &keys, serde_json::json!({ "id": i }), 100)
        })
        .collect();
    all.chunks(150).map(<[_]>::to_vec).collect()
}

/// Four partitions of 20 write units a second, no burst credit: `HOT`'s
/// 300 items need 15 s of its partition.
fn hot_partition() -> CapacityConfig {
    CapacityConfig {
        burst: false,
        ..CapacityConfig::provisioned(100_000, 4, 20)
    }
}

fn writer(client: &Modelled, budget: Duration) -> BatchWriter<&Modelled> {
    let policy = RetryPolicy {
        max_attempts: 3,
        ..RetryPolicy::default()
    }
    .with_throttle_budget(budget);
    BatchWriter::new(client, "t", support::keys(), policy)
}

#[tokio::test(start_paused = true)]
async fn a_generous_budget_writes_every_item_of_a_hot_partition_once() {
    let client = Modelled::new(&hot_partition());
    let writer = writer(&client, Duration::from_secs(600));
    for page in pages() {
        let out = writer.write(page).await;
        assert!(out.unwritten.is_empty(), "{:?}", out.unwritten.first());
        assert!(out.failed.is_empty() && out.rejected.is_empty());
        assert_eq!(out.written, 150);
    }
    let admitted = client.admitted.lock().unwrap();
    assert_eq!(admitted.len(), 600);
    assert!(
        admitted.values().all(|n| *n == 1),
        "each item admitted once"
    );
    let usage = client.model.lock().unwrap().usage();
    assert!(usage.refused_by_partition > 0, "the hot partition refused");
    // More refusals than hot items, past the three attempts of some: only
    // the budget could end them. (The writer paces the hot key to what its
    // partition admits, so far fewer than a writer resending at once.)
    assert!(usage.refused_writes > 300, "{usage:?}");
}

#[tokio::test(start_paused = true)]
async fn a_small_budget_leaves_what_the_hot_partition_could_not_take_unwritten() {
    let client = Modelled::new(&hot_partition());
    let partition = |pk: &AttrValue| {
        let model = client.model.lock().unwrap();
        model.partition_of(attr_hash(pk).unwrap())
    };
    let hot = partition(&AttrValue::S("HOT".into()));
    let writer = writer(&client, Duration::from_secs(2));
    // One page, as a run stops at the first page whose budget ran out: its
    // 75 hot items need almost 4 s of their partition, their budget is 2 s.
    let page = pages().remove(0);
    let out = writer.write(page).await;
    assert!(out.failed.is_empty() && out.rejected.is_empty());
    let unwritten: Vec<String> = out
        .unwritten
        .iter()
        .map(|(m, why)| {
            assert!(
                why.contains("ProvisionedThroughputExceededException")
                    || why.contains("unprocessed"),
                "{why}"
            );
            assert_eq!(partition(&m.key[0]), hot, "only the hot partition's items");
            sk(m)
        })
        .collect();
    assert!(!unwritten.is_empty());
    assert_eq!(out.written + unwritten.len() as u64, 150);
    let admitted = client.admitted.lock().unwrap();
    assert_eq!(admitted.len() as u64, out.written);
    assert!(admitted.values().all(|n| *n == 1), "nothing written twice");
    assert!(unwritten.iter().all(|k| !admitted.contains_key(k)));
}
