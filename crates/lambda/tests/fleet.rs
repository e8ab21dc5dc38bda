//! Worker functions share the write-capacity cap as a fleet: each
//! execution environment (one `MessageWriter`) beats in-line into the
//! run's progress table before it writes a batch, and its writes keep to
//! the cap divided by the members alive. One that stops beating (frozen,
//! no invocation) gives its share back after 5 s; another member's
//! whole-call throttle halves its calls in flight.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sql2ddb_core::{AttrValue, BatchPart, EncodedItem, KeyAttr, KeyType, RunId, WorkBatch};
use sql2ddb_dynamo::progress::{default_table, FleetBeat, ProgressStore};
use sql2ddb_engine::serverless::{load_mapping, MessageWriter, Plan};
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_engine::RunOptions;

use support::*;
use tempfile::TempDir;

const CAP: u64 = 400;

/// Page `page` of run `run`: two orders.
fn message(run: &RunId, page: u64) -> String {
    orders(run, page, 2)
}

/// Page `page` of run `run`: `count` orders.
fn orders(run: &RunId, page: u64, count: u64) -> String {
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    let items = (0..count)
        .map(|i| {
            let id = page * 1_000 + i;
            let item: BTreeMap<String, AttrValue> = [
                ("PK".to_string(), s(format!("ORDER#{id}"))),
                ("SK".to_string(), s("ORDER")),
                ("id".to_string(), n(id)),
            ]
            .into();
            let size = sql2ddb_core::limits::item_size(&item);
            EncodedItem::new(&item, &keys, serde_json::json!({ "id": id }), size)
        })
        .collect::<Vec<_>>();
    sql2ddb_queue::codec::encode(&WorkBatch {
        run_id: run.clone(),
        entity: "order".into(),
        segment: 0,
        page,
        part: BatchPart::WHOLE,
        rows_read: items.len() as u64,
        items,
        pointers: Vec::new(),
    })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The members with a `FLEET#` record in `run`'s partition.
async fn fleet_records(dynamo: &Dynamo, table: &str, run: &RunId) -> Vec<String> {
    let mut members: Vec<String> = dynamo
        .scan_all(&default_table(table))
        .await
        .into_iter()
        .filter(|item| item["PK"] == s(format!("RUN#{run}")))
        .filter_map(|item| match &item["SK"] {
            AttrValue::S(sk) => sk.strip_prefix("FLEET#").map(str::to_string),
            _ => None,
        })
        .collect();
    members.sort();
    members
}

/// Writes `body` as one invocation of `writer`'s environment would.
async fn invoke(writer: &MessageWriter, body: &str) {
    let out = writer.write_message(body).await.unwrap();
    assert_eq!(out.written, 2);
}

/// A table, its progress table with run `run` recorded, and the mapping
/// of its orders, on a server of the test's own; workers' setup with a cap
/// of `cap`.
async fn fixture(
    cap: u64,
) -> (
    Dynamo,
    String,
    RunId,
    ProgressStore,
    Plan,
    WorkerSetup,
    TempDir,
) {
    let dynamo = Dynamo::start().await;
    let table = unique("lambda_fleet");
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    sql2ddb_dynamo::ensure_table(&dynamo.handle, &table, &keys, true)
        .await
        .unwrap();
    let run: RunId = unique("run").parse().unwrap();
    let store: ProgressStore =
        sql2ddb_testkit::bench_input::progress_store(dynamo.url.clone(), &table, &run).await;
    let text = format!(
        "{}\n[[entity]]\nname = \"order\"\nfrom = \"orders\"\npk = \"ORDER#{{id}}\"\nsk = \"ORDER\"\n",
        mapping_head("", &table, &dynamo.url)
    );
    let plan = load_mapping(&text, &|_| None).unwrap();
    let runs = tempfile::tempdir().unwrap();
    let setup = WorkerSetup {
        run: RunOptions {
            runs_dir: runs.path().to_path_buf(),
            max_wcu: Some(cap),
            ..RunOptions::default()
        },
        ..WorkerSetup::default()
    };
    (dynamo, table, run, store, plan, setup, runs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_environments_share_the_cap_and_one_gone_gives_its_share_back() {
    let (dynamo, table, run, store, plan, setup, _runs) = fixture(CAP).await;
    // Two execution environments, each made at its cold start.
    let a = MessageWriter::connect(&plan, &setup).await.unwrap();
    let b = MessageWriter::connect(&plan, &setup).await.unwrap();
    let (member_a, member_b) = (
        a.fleet_member().unwrap().to_string(),
        b.fleet_member().unwrap().to_string(),
    );
    assert_ne!(member_a, member_b);
    assert_eq!(a.write_rate(), Some(CAP as f64), "alone before any beat");

    invoke(&a, &message(&run, 0)).await;
    assert_eq!(a.write_rate(), Some(CAP as f64), "the only member yet");
    invoke(&b, &message(&run, 1)).await;
    assert_eq!(b.write_rate(), Some(CAP as f64 / 2.0), "b joined a's fleet");
    // a's next invocation, a beat later, reads b's beat.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    invoke(&a, &message(&run, 2)).await;
    assert_eq!(a.write_rate(), Some(CAP as f64 / 2.0));
    let mut both = vec![member_a.clone(), member_b.clone()];
    both.sort();
    assert_eq!(fleet_records(&dynamo, &table, &run).await, both);

    // b is not invoked again (frozen): its last beat ages past 5 s.
    store
        .fleet_beat(
            &run,
            &FleetBeat {
                member: member_b.clone(),
                at_ms: now_ms() - 6_000,
                throttled_ms: 0,
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    invoke(&a, &message(&run, 3)).await;
    assert_eq!(a.write_rate(), Some(CAP as f64), "b's share came back to a");

    // A third environment, throttled whole by the table just now.
    let limit = a.calls_in_flight_limit();
    assert!(limit >= 2, "{limit}");
    let now = now_ms();
    store
        .fleet_beat(
            &run,
            &FleetBeat {
                member: "other-environment".into(),
                at_ms: now,
                throttled_ms: now,
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    invoke(&a, &message(&run, 4)).await;
    assert_eq!(a.write_rate(), Some(CAP as f64 / 2.0));
    assert!(
        a.calls_in_flight_limit() < limit,
        "a backed off for the other's throttle: {} of {limit}",
        a.calls_in_flight_limit()
    );
    let items = items(&dynamo, &table).await;
    assert_eq!(items.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_batch_beats_while_it_is_written() {
    // 60 items of 1 WCU at 10 WCU a second: seconds of writing.
    let (dynamo, table, run, store, plan, setup, _runs) = fixture(10).await;
    let a = MessageWriter::connect(&plan, &setup).await.unwrap();
    let member = a.fleet_member().unwrap().to_string();
    let started = now_ms();
    let out = a.write_message(&orders(&run, 0, 60)).await.unwrap();
    let took = now_ms() - started;
    assert_eq!(out.written, 60);
    assert!(took >= 2_500, "the cap paced the batch: {took} ms");
    // Its beat is a second old at most when the batch ends: the others
    // never counted it gone meanwhile.
    let beats = store
        .fleet_beat(
            &run,
            &FleetBeat {
                member: "reader".into(),
                at_ms: now_ms(),
                throttled_ms: 0,
            },
        )
        .await
        .unwrap();
    let last = beats.iter().find(|b| b.member == member).unwrap().at_ms;
    assert!(
        last + 1_500 >= now_ms(),
        "last beat {} ms before the end of a {took} ms batch",
        now_ms() - last
    );
    assert_eq!(items(&dynamo, &table).await.len(), 60);
}
