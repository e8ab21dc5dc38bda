//! The jobs against DynamoDB as the service may behave, not as an emulator
//! does: the built binary through testkit's fault proxy with every fault on
//! at once (throttles of both kinds, 429, 408, 500, 503, dropped
//! connections, slow answers past the attempt timeout, an expired token,
//! unprocessed items and keys answered in another spelling of the same
//! values, the first sight of each item held back) on every operation.
//! Each job ends with every row exactly once and exact counts; with a retry
//! budget too small to succeed it exits nonzero, names the rows it did not
//! write, and counts nothing as written that is not in the table.
//!
//! `real_service_N_…` are the cases of the issue they are named after.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value as Json;
use sql2ddb_core::{AttrValue, Item};
use sql2ddb_testkit::support::item_by_value;
use sql2ddb_testkit::{FaultConfig, FaultProxy};

use crate::common::*;
use crate::distributed::Fixture;
use crate::update::{is_order, ADD_VISITS};

/// Orders, each with zero to four lines embedded, and the newest order in a
/// pointer item: numbers, JSON (maps, lists), binary and arrays on the items.
const FIXTURE: &str = "
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL,
  total numeric(10,2) NOT NULL, created_at timestamptz NOT NULL, meta jsonb NOT NULL, photo bytea, tags text[]);
INSERT INTO {schema}.orders
  SELECT o, o % 40 + 1, (ARRAY['new','paid','sent'])[o % 3 + 1], ((o * 37) % 10000) / 100.0,
         timestamptz '2024-01-01 00:00:00+00' + o * interval '1 hour',
         jsonb_build_object('n', o, 'ratio', o / 8.0, 'gift', o % 2 = 0, 'notes', jsonb_build_array('x', o * 1.5)),
         CASE WHEN o % 4 = 0 THEN decode(md5(o::text), 'hex') END,
         ARRAY['t' || (o % 3), 't' || (o % 5)]
  FROM generate_series(1, 300) o;
CREATE TABLE {schema}.order_lines (order_id int NOT NULL, line_no int NOT NULL, sku text NOT NULL,
  qty int NOT NULL, price numeric(10,2) NOT NULL, PRIMARY KEY (order_id, line_no));
INSERT INTO {schema}.order_lines
  SELECT o, l, 'SKU-' || ((o * 7 + l) % 100), (o + l) % 9 + 1, ((o * l) % 1000) / 100.0
  FROM generate_series(1, 300) o, generate_series(1, 4) l WHERE l <= o % 5;
";

/// Rows of `orders`.
const ORDERS: u64 = 300;

const MAPPING: &str = pg_mapping!(
    "page_size = 20\nread_parallelism = 2",
    r#"[writer]
concurrency = 4
WRITER

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "ORDER#{order_id:06}"
sk = "ORDER"

[[entity.embed]]
name = "lines"
from = "SCHEMA.order_lines"
parent_key = ["order_id"]
order_by = ["line_no"]
exclude = ["order_id"]

[[pointer]]
entity = "order"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = { attribute = "orderId", column = "order_id" }
attributes = { createdAt = { column = "created_at", format = "rfc3339" }, customerId = "{customer_id}" }
"#
);

/// Every fault the service may produce, on every operation, seeded: a
/// third of the calls faulted, one answer held past the attempt timeout,
/// and each item's first sight answered as unprocessed.
fn every_fault(seed: u64) -> FaultConfig {
    FaultConfig {
        first_sight_unprocessed: true,
        slow_for: sql2ddb_dynamo::client::ATTEMPT_TIMEOUT + Duration::from_secs(1),
        ..FaultConfig::every_fault(0.3, seed, 1)
    }
}

/// Half the calls of `operations` faulted, every kind (one slow answer
/// among them): with a budget of one attempt, some of the rows cannot be
/// written, and some can.
fn beyond_one_attempt(seed: u64, operations: &[&str]) -> FaultConfig {
    FaultConfig {
        slow_for: sql2ddb_dynamo::client::ATTEMPT_TIMEOUT + Duration::from_secs(1),
        operations: operations.iter().map(|o| o.to_string()).collect(),
        ..FaultConfig::every_fault(0.5, seed, 1)
    }
}

/// The scenario of the orders.
async fn orders(prefix: &str) -> Scenario {
    Scenario::new(prefix).postgres(FIXTURE).start().await
}

/// What the mapping makes of the source: a run straight to the server (no
/// proxy) into a table of its own. Returns its items and its report.
async fn wanted(sc: &Scenario) -> (Items, Json) {
    let table = format!("{}_want", sc.table);
    let mapping = sc.mapping(&MAPPING.replace("TABLE", &table).replace("WRITER", ""));
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "the run without faults: {}", run.stderr);
    (sc.dynamo.scan(&table).await, run.report())
}

/// `sql2ddb run` of the orders' mapping (with `writer` under `[writer]`)
/// through `proxy`, with a JSON report.
async fn run_through(sc: &Scenario, proxy: &FaultProxy, writer: &str, extra: &[&str]) -> Run {
    let mapping = sc.mapping(&MAPPING.replace("WRITER", writer));
    let endpoint = proxy.url();
    let mut args = vec!["run", &mapping, "--endpoint", &endpoint];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "--quiet"]);
    bounded(sc, &args).await
}

/// The binary run in the scenario's directory to its end, given up (and
/// killed) after [`PATIENCE`]: a job that hangs fails its test.
async fn bounded(sc: &Scenario, args: &[&str]) -> Run {
    Proc::spawn(sc.path(), args).wait().await
}

/// A failed run's message, with what the proxy did.
fn said(run: &Run, proxy: &FaultProxy) -> String {
    format!(
        "exit {}\nstderr:\n{}\nstdout:\n{}\nproxy: {:?}",
        run.code,
        run.stderr,
        run.stdout,
        proxy.stats()
    )
}

/// The table holds exactly the items of `want`: the same keys, each once,
/// each item the same by value.
fn assert_same_table(got: &Items, want: &Items) {
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{} items missing (first {:?}), {} extra (first {:?})",
        missing.len(),
        missing.first(),
        extra.len(),
        extra.first()
    );
    for (key, w) in want {
        assert_item(key, &item_by_value(&got[key]), &item_by_value(w));
    }
}

/// The order ids of the order items of a table.
fn order_ids(items: &Items) -> BTreeSet<u64> {
    items
        .keys()
        .filter_map(|(pk, _)| pk.strip_prefix("ORDER#"))
        .map(|id| id.parse().unwrap())
        .collect()
}

/// The order ids a run's rejects file names as not written, each with a
/// reason that says so.
fn failed_orders(sc: &Scenario, report: &Json) -> BTreeSet<u64> {
    rejects_of(sc.path(), report)
        .iter()
        .map(|r| {
            let reason = r["reason"].as_str().unwrap_or_default();
            assert!(reason.contains("not written"), "{r}");
            r["key"]["order_id"].as_u64().unwrap()
        })
        .collect()
}

/// `verify --run` of the run's progress table, straight to the server: the
/// run is complete and every row counted once, as written.
async fn assert_recorded(sc: &Scenario, mapping_writer: &str, run_id: &str, rows: u64) {
    let mapping = sc.mapping(&MAPPING.replace("WRITER", mapping_writer));
    let args = [
        "verify",
        &mapping,
        "--run",
        run_id,
        "--endpoint",
        &sc.dynamo.url,
        "--json",
    ];
    let v = bounded(sc, &args).await;
    assert_eq!(v.code, 0, "verify:\n{}\n{}", v.stdout, v.stderr);
    let state = v.report();
    assert_eq!(state["complete"], true, "{state}");
    let e = &state["entities"][0];
    assert_eq!(
        figures(e, &["rows_read", "rows_recorded", "written"]),
        [rows; 3],
        "{state}"
    );
}

/// The named counts of a report's object.
fn figures(object: &Json, names: &[&str]) -> Vec<u64> {
    names.iter().map(|n| count(object, n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_run_every_fault_once() {
    let sc = orders("rs_run").await;
    let (want, want_report) = wanted(&sc).await;
    let proxy = sc.proxy(every_fault(31)).await;

    let run = run_through(
        &sc,
        &proxy,
        "",
        &["--progress-table", "--read-parallelism", "2"],
    )
    .await;
    assert_eq!(run.code, 0, "{}", said(&run, &proxy));
    let e = run.entity("order");
    assert_eq!(e["rows_read"], ORDERS, "{e}");
    assert_eq!(e["items_written"], ORDERS, "{e}");
    assert_eq!(
        figures(&e, &["rejected", "failed", "pending"]),
        [0, 0, 0],
        "{e}"
    );
    let report = run.report();
    assert_eq!(report["status"], "ok");
    assert_eq!(
        report["pointers"][0]["value"], want_report["pointers"][0]["value"],
        "the pointer names the newest order"
    );
    // Every order once, exactly as mapped, and the pointer.
    let got = sc.items().await;
    assert_eq!(got.len() as u64, ORDERS + 1);
    assert_same_table(&got, &want);
    let stats = proxy.stats();
    assert!(stats.first_sight_items >= ORDERS, "{stats:?}");
    assert!(stats.expired_token == 1 && stats.faults() > 10, "{stats:?}");
    assert_recorded(&sc, "", report["run_id"].as_str().unwrap(), ORDERS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_run_budget_too_small() {
    let sc = orders("rs_runb").await;
    let proxy = sc.proxy(beyond_one_attempt(32, &["BatchWriteItem"])).await;

    let run = run_through(&sc, &proxy, "max_attempts = 1", &[]).await;
    assert_eq!(run.code, 1, "rows were not written: {}", said(&run, &proxy));
    let report = run.report();
    assert_eq!(report["status"], "failed");
    let e = run.entity("order");
    let failed = failed_orders(&sc, &report);
    assert!(!failed.is_empty());
    assert_eq!(
        e["failed"],
        failed.len() as u64,
        "each failed row named once"
    );
    assert_eq!(e["rejected"], 0, "no row is at fault");
    assert_eq!(e["rows_read"], ORDERS);
    assert_eq!(e["items_written"], ORDERS - failed.len() as u64, "{e}");
    // Nothing counted that is not in the table; nothing lost unnamed (a
    // failed row may be in the table: its answer was lost after it landed).
    let items = sc.items().await;
    let in_table = order_ids(&items);
    let all: BTreeSet<u64> = (1..=ORDERS).collect();
    let counted: BTreeSet<u64> = all.difference(&failed).copied().collect();
    let uncounted: Vec<&u64> = counted.difference(&in_table).collect();
    assert!(
        uncounted.is_empty(),
        "counted written, not in the table: {uncounted:?}"
    );
    // The pointer moved only to an order written and counted.
    if let Some(pointer) = items.get(&key("LAST_ORDER", "LAST_ORDER")) {
        let AttrValue::N(id) = &pointer["orderId"] else {
            panic!("{pointer:?}")
        };
        assert!(counted.contains(&id.parse().unwrap()), "{pointer:?}");
    }
}

/// The distributed fixture (rows of `ITEM#i`) in pages of 50, its mapping
/// given `writer` settings too.
async fn queue_fixture(
    prefix: &str,
    rows: i64,
    visibility: u64,
    receives: u32,
    writer: &str,
) -> Fixture {
    let f = Fixture::new(prefix, rows, visibility, receives).await;
    let text = std::fs::read_to_string(&f.mapping).unwrap();
    let text = text
        .replace(
            &format!("page_size = {}", crate::distributed::PAGE),
            "page_size = 50",
        )
        .replace("concurrency = 4", &format!("concurrency = 4\n{writer}"));
    std::fs::write(&f.mapping, text).unwrap();
    f
}

/// `run --queue` through `endpoint`, reading in `segments` segments.
fn queue_reader(f: &Fixture, endpoint: &str, segments: &str) -> Proc {
    f.spawn(&[
        "run",
        &f.mapping,
        "--queue",
        &f.urls.queue,
        "--sqs-endpoint",
        f.moto.url(),
        "--endpoint",
        endpoint,
        "--read-parallelism",
        segments,
        "--json",
        "--quiet",
    ])
}

/// A worker writing through `endpoint`, stopping as `stop` says.
fn queue_worker(f: &Fixture, endpoint: &str, stop: &[&str]) -> Proc {
    let mut args = vec![
        "worker",
        &f.mapping,
        "--queue",
        &f.urls.queue,
        "--sqs-endpoint",
        f.moto.url(),
        "--endpoint",
        endpoint,
        "--concurrency",
        "2",
        "--poll",
        "1",
        "--json",
    ];
    args.extend_from_slice(stop);
    f.spawn(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_queue_two_workers_every_fault_once() {
    const ROWS: i64 = 400;
    let f = queue_fixture("rs_queue", ROWS, 60, 5, "").await;
    let proxy = FaultProxy::start(&f.sc.dynamo.url, every_fault(33))
        .await
        .unwrap();
    let endpoint = proxy.url();
    let reader = queue_reader(&f, &endpoint, "2");
    let run_id = reader.run_id().await;
    let until_done = ["--until-done", "--run", &run_id];
    let workers: Vec<Proc> = (0..2)
        .map(|_| queue_worker(&f, &endpoint, &until_done))
        .collect();

    let read = reader.wait().await;
    assert_eq!(read.code, 0, "reader: {}", said(&read, &proxy));
    let report = read.report();
    assert_eq!(report["status"], "enqueued");
    assert_eq!(report["totals"]["rows_read"], ROWS);
    let done = wait_all(workers).await;
    let (mut rows, mut written) = (0, 0);
    for w in &done {
        assert_eq!(w.code, 0, "worker: {}", said(w, &proxy));
        let r = w.report();
        assert_eq!(
            (r["rejected"].as_u64(), r["stopped"].as_str()),
            (Some(0), Some("done")),
            "{r}"
        );
        rows += r["rows"].as_u64().unwrap();
        written += r["items_written"].as_u64().unwrap();
    }
    assert_eq!(
        (rows, written),
        (ROWS as u64, ROWS as u64),
        "each page written once"
    );
    f.assert_verified_and_complete(&run_id).await;
    assert!(proxy.stats().first_sight_items >= ROWS as u64);
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_queue_budget_too_small() {
    const ROWS: i64 = 400;
    const PAGE: u64 = 50;
    // A batch not written goes to the dead-letter queue at its second receive.
    let f = queue_fixture("rs_queueb", ROWS, 2, 1, "max_attempts = 1").await;
    // Faults an attempt cap ends (5xx, timeouts, dropped connections, an
    // expired token); throttling is retried within the retry budget
    // whatever the attempts, and a worker past it stops (see retry_budget).
    let faults = FaultConfig {
        provisioned_throughput_exceeded: 0.0,
        throttling: 0.0,
        unprocessed: 0.0,
        too_many_requests: 0.0,
        ..beyond_one_attempt(34, &["BatchWriteItem"])
    };
    let proxy = FaultProxy::start(&f.sc.dynamo.url, faults).await.unwrap();
    let endpoint = proxy.url();
    // One segment: page p holds the rows p·50+1 ..= p·50+50.
    let reader = queue_reader(&f, &endpoint, "1");
    let run_id = reader.run_id().await;
    let workers: Vec<Proc> = (0..2).map(|_| queue_worker(&f, &endpoint, &[])).collect();
    assert_eq!(reader.wait().await.code, 0);
    // Until nothing left in the queue can complete the run: every page
    // written or in the dead-letter queue.
    let watch = Proc::spawn(
        f.sc.path(),
        &[
            "verify",
            &f.mapping,
            "--run",
            &run_id,
            "--sqs-endpoint",
            f.moto.url(),
            "--watch",
            "--interval",
            "1",
        ],
    )
    .wait()
    .await;
    assert_eq!(watch.code, 1, "{}", said(&watch, &proxy));
    assert!(
        watch.stdout.contains("nothing left in the queue"),
        "{}",
        watch.stdout
    );
    for w in &workers {
        w.terminate();
    }
    for w in wait_all(workers).await {
        assert_eq!(w.code, 0, "worker: {}", said(&w, &proxy));
    }

    let v = f.command("verify", &run_id).await;
    assert_eq!(
        v.code, 1,
        "rows were not written: {}\n{}",
        v.stdout, v.stderr
    );
    let state = v.report();
    assert_eq!(state["complete"], false);
    let missing: BTreeSet<u64> = state["missing"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["first"].as_u64().unwrap()..=m["last"].as_u64().unwrap())
        .collect();
    assert!(!missing.is_empty(), "{state}");
    assert!(
        missing.iter().all(|p| *p < ROWS as u64 / PAGE),
        "{missing:?}"
    );
    // Each missing page waits in a queue: dead-lettered, or (when the
    // workers stopped before receiving it again) still in the queue, to be
    // received again or redriven. None is lost.
    let status = f.command("status", &run_id).await;
    let q = &status.report()["queue"];
    let waiting: u64 = ["dead_letter", "visible", "in_flight"]
        .iter()
        .map(|k| q[k].as_u64().unwrap())
        .sum();
    assert_eq!(waiting, missing.len() as u64, "{}", status.stdout);
    assert!(q["dead_letter"].as_u64().unwrap() > 0, "{}", status.stdout);
    // Counted: the rows of the recorded pages, each in the table.
    let e = &state["entities"][0];
    assert_eq!(e["rejected"], 0, "no row is at fault: {state}");
    let counted: BTreeSet<u64> = (1..=ROWS as u64)
        .filter(|i| !missing.contains(&((i - 1) / PAGE)))
        .collect();
    assert_eq!(e["written"], counted.len() as u64, "{state}");
    let in_table: BTreeSet<u64> =
        f.sc.items()
            .await
            .keys()
            .map(|(pk, _)| pk.strip_prefix("ITEM#").unwrap().parse().unwrap())
            .collect();
    let uncounted: Vec<&u64> = counted.difference(&in_table).collect();
    assert!(
        uncounted.is_empty(),
        "counted written, not in the table: {uncounted:?}"
    );
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_update_add_every_fault_once() {
    let sc = crate::update::shop().await;
    let before = sc.items().await;
    let orders = before.keys().filter(|k| is_order(k)).count() as u64;
    let proxy = sc.proxy(every_fault(35)).await;
    let job = crate::update::job(&sc, ADD_VISITS);
    let endpoint = proxy.url();
    let args = [
        "update",
        &job,
        "--endpoint",
        &endpoint,
        "--progress-table",
        "visits-progress",
        "--json",
        "--quiet",
    ];
    let run = bounded(&sc, &args).await;
    assert_eq!(run.code, 0, "{}", said(&run, &proxy));
    let r = run.report();
    assert_eq!(count(&r, "scanned"), before.len() as u64, "{r}");
    assert_eq!(count(&r, "matched"), orders, "{r}");
    assert_eq!(count(&r, "updated"), orders, "{r}");
    assert_eq!((count(&r, "skipped"), count(&r, "failed")), (0, 0), "{r}");
    let after = sc.items().await;
    assert_eq!(after.len(), before.len());
    for (k, was) in &before {
        let got = &after[k];
        if is_order(k) {
            assert_eq!(got["visits"], n(1), "{k:?}: changed once");
        } else {
            assert_eq!(got, was, "{k:?}");
        }
    }
    assert!(proxy.stats().faults() > 10, "{:?}", proxy.stats());
    let verify = [
        "verify",
        "--run",
        r["run_id"].as_str().unwrap(),
        "--progress-table",
        "visits-progress",
        "--endpoint",
        &sc.dynamo.url,
    ];
    let v = bounded(&sc, &verify).await;
    assert_eq!(v.code, 0, "{}\n{}", v.stdout, v.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_update_budget_too_small() {
    let sc = crate::update::shop().await;
    let before = sc.items().await;
    let orders: BTreeSet<String> = before
        .keys()
        .filter(|k| is_order(k))
        .map(|k| format!("{}|{}", k.0, k.1))
        .collect();
    // `update` has no budget option: 90% of its writes answered 500 or 503
    // outlast the default budget for about a quarter of the items (a call
    // answered so never reached the table).
    let faults = FaultConfig {
        seed: 36,
        internal_error: 0.45,
        service_unavailable: 0.45,
        operations: vec!["UpdateItem".into()],
        ..FaultConfig::default()
    };
    let proxy = sc.proxy(faults).await;
    let job = crate::update::job(&sc, ADD_VISITS);
    let endpoint = proxy.url();
    let args = [
        "update",
        &job,
        "--endpoint",
        &endpoint,
        "--concurrency",
        "256",
        "--json",
        "--quiet",
    ];
    let run = bounded(&sc, &args).await;
    assert_eq!(
        run.code,
        1,
        "items were not written: {}",
        said(&run, &proxy)
    );
    let r = run.report();
    let failures = sc.path().join(r["failures_file"].as_str().unwrap());
    let named: BTreeSet<String> = std::fs::read_to_string(&failures)
        .unwrap_or_else(|e| panic!("{}: {e}", failures.display()))
        .lines()
        .map(|l| {
            let l: Json = serde_json::from_str(l).unwrap();
            let part = |name: &str| l["key"][name]["S"].as_str().unwrap().to_string();
            format!("{}|{}", part("PK"), part("SK"))
        })
        .collect();
    assert!(!named.is_empty());
    assert_eq!(count(&r, "failed"), named.len() as u64, "{r}");
    assert_eq!(count(&r, "skipped"), 0, "{r}");
    assert_eq!(
        count(&r, "updated") + count(&r, "failed"),
        orders.len() as u64,
        "{r}"
    );
    // Exactly the items counted updated were changed, once.
    let after = sc.items().await;
    let changed: BTreeSet<String> = after
        .iter()
        .filter(|(_, it)| it.contains_key("visits"))
        .map(|(k, it)| {
            assert_eq!(it["visits"], n(1), "{k:?}");
            format!("{}|{}", k.0, k.1)
        })
        .collect();
    assert_eq!(count(&r, "updated"), changed.len() as u64);
    assert!(changed.is_disjoint(&named));
    let accounted: BTreeSet<String> = changed.union(&named).cloned().collect();
    assert_eq!(accounted, orders);
}

/// An entity's counts from a `verify --deep` report: expected, found,
/// identical, missing, extra, different, collapsed.
fn deep_counts(report: &Json, entity: &str) -> Vec<u64> {
    let e = report["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["entity"] == entity)
        .unwrap_or_else(|| panic!("no entity {entity} in {report}"));
    [
        "expected",
        "found",
        "identical",
        "missing",
        "extra",
        "different",
        "collapsed",
    ]
    .iter()
    .map(|k| e[*k].as_u64().unwrap())
    .collect()
}

/// `verify MAPPING --deep --json` through `proxy`.
async fn deep_through(sc: &Scenario, proxy: &FaultProxy, mapping: &str, extra: &[&str]) -> Run {
    let endpoint = proxy.url();
    let mut args = vec![
        "verify",
        mapping,
        "--deep",
        "--json",
        "--endpoint",
        &endpoint,
    ];
    args.extend_from_slice(extra);
    bounded(sc, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_verify_deep_every_fault_once() {
    let sc = orders("rs_deep").await;
    let mapping = sc.mapping(&MAPPING.replace("WRITER", ""));
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let proxy = sc.proxy(every_fault(37)).await;

    // By Scan, then by key (BatchGetItem, whose keys come back unprocessed).
    for extra in [&["--segments", "3"][..], &["--sample", "1"]] {
        let deep = deep_through(&sc, &proxy, &mapping, extra).await;
        assert_eq!(deep.code, 0, "{extra:?}: {}", said(&deep, &proxy));
        let report = deep.report();
        let n = ORDERS;
        assert_eq!(
            deep_counts(&report, "order"),
            [n, n, n, 0, 0, 0, 0],
            "{extra:?}"
        );
        assert_eq!(report["pointers"][0]["ok"], true, "{report}");
    }
    let stats = proxy.stats();
    assert!(
        stats.faults() > 5 && stats.unprocessed_items > 0,
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_verify_deep_budget_too_small() {
    let sc = orders("rs_deepb").await;
    let mapping = sc.mapping(&MAPPING.replace("WRITER", ""));
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    // verify has no budget option: every read answered 500 outlasts any.
    let faults = FaultConfig {
        internal_error: 1.0,
        operations: vec!["Scan".into()],
        ..FaultConfig::default()
    };
    let proxy = sc.proxy(faults).await;
    let deep = deep_through(&sc, &proxy, &mapping, &[]).await;
    assert_eq!(
        deep.code,
        EX_UNAVAILABLE,
        "the table could not be read: {}",
        said(&deep, &proxy)
    );
    assert!(
        deep.stderr.contains("InternalServerError"),
        "{}",
        deep.stderr
    );
    assert!(
        !deep.stdout.contains("\"identical\":300")
            && !deep.stderr.contains("exactly what the mapping"),
        "nothing read is counted identical: {}",
        deep.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_1_unprocessed_reencoded_items_are_all_written() {
    const ROWS: usize = 50;
    let values: Vec<String> = (1..=ROWS)
        .map(|i| {
            format!(
                "({i}, 'name {i}', {}, {}.{:02})",
                i % 15 + 1,
                i * 7,
                i % 100
            )
        })
        .collect();
    let sc = Scenario::new("rs_case1")
        .mariadb(&format!(
            "CREATE TABLE tagged (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL,
                 st SET('a', 'b', 'c', 'd') NOT NULL, price DECIMAL(10,2) NOT NULL);
             INSERT INTO tagged VALUES {};",
            values.join(", ")
        ))
        .start()
        .await;
    let mapping = sc.mapping(&format!(
        r#"version = 1
[source]
url = "{}"
page_size = 10
[target]
table = "TABLE"
create = true
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}

[[entity]]
name = "tagged"
from = "tagged"
pk = "TAG#{{id}}"
sk = "T"
"#,
        sc.my().url
    ));
    // Each item comes back unprocessed the first time, attributes and set
    // elements in another order, numbers spelled another way.
    let faults = FaultConfig {
        seed: 1,
        first_sight_unprocessed: true,
        reencode: true,
        ..FaultConfig::default()
    };
    let proxy = sc.proxy(faults).await;
    let endpoint = proxy.url();
    let run = bounded(
        &sc,
        &[
            "run",
            &mapping,
            "--endpoint",
            &endpoint,
            "--json",
            "--quiet",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", said(&run, &proxy));
    assert_eq!(run.entity("tagged")["items_written"], ROWS as u64);
    let items = sc.items().await;
    assert_eq!(items.len(), ROWS, "every item is in the table");
    let expected: Vec<Item> = (1..=ROWS)
        .map(|i| {
            let bits = i % 15 + 1;
            let st: Vec<String> = ["a", "b", "c", "d"]
                .iter()
                .enumerate()
                .filter(|(b, _)| bits & (1 << b) != 0)
                .map(|(_, s)| s.to_string())
                .collect();
            item(vec![
                ("PK", s(format!("TAG#{i}"))),
                ("SK", s("T")),
                ("id", n(i)),
                ("name", s(format!("name {i}"))),
                ("st", AttrValue::SS(st)),
                ("price", n(decimal((i * 700 + i % 100) as i64, 2))),
            ])
        })
        .collect();
    for want in &expected {
        let k = key_of(want);
        let got = items.get(&k).unwrap_or_else(|| panic!("no item {k:?}"));
        assert_item(&k, &item_by_value(got), &item_by_value(want));
    }
    let stats = proxy.stats();
    assert_eq!(stats.first_sight_items, ROWS as u64);
    // Held back items went to the table once each, and nothing written was
    // sent again: the writer resends only what came back, found by its key
    // in another spelling.
    assert_eq!(stats.items_forwarded, ROWS as u64, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_2_progress_table_500_does_not_fail_the_run() {
    let sc = orders("rs_case2").await;
    let (want, _) = wanted(&sc).await;
    let faults = FaultConfig {
        seed: 2,
        internal_error: 0.2,
        operations: vec!["PutItem".into()],
        ..FaultConfig::default()
    };
    let proxy = sc.proxy(faults).await;
    let run = run_through(
        &sc,
        &proxy,
        "",
        &["--progress-table", "--read-parallelism", "2"],
    )
    .await;
    assert_eq!(run.code, 0, "{}", said(&run, &proxy));
    let e = run.entity("order");
    assert_eq!(
        figures(&e, &["items_written", "failed"]),
        [ORDERS, 0],
        "{e}"
    );
    assert_same_table(&sc.items().await, &want);
    assert!(proxy.stats().internal_error > 0, "{:?}", proxy.stats());
    assert_recorded(&sc, "", run.report()["run_id"].as_str().unwrap(), ORDERS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_4_transient_codes_never_reject_rows() {
    let sc = orders("rs_case4").await;
    let (want, _) = wanted(&sc).await;
    let faults = FaultConfig {
        seed: 4,
        too_many_requests: 0.15,
        request_timeout: 0.15,
        ..FaultConfig::default()
    };
    let proxy = sc.proxy(faults).await;
    let run = run_through(&sc, &proxy, "", &[]).await;
    assert_eq!(run.code, 0, "{}", said(&run, &proxy));
    let e = run.entity("order");
    assert_eq!(
        figures(&e, &["items_written", "rejected", "failed"]),
        [ORDERS, 0, 0],
        "{e}"
    );
    assert_same_table(&sc.items().await, &want);
    let stats = proxy.stats();
    assert!(
        stats.too_many_requests > 0 && stats.request_timeout > 0,
        "{stats:?}"
    );
}
