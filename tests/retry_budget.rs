//! Throttling never fails a run by itself, end to end: the built binary
//! writes through the testkit proxy's capacity model (no burst credit, one
//! partition key taking most writes, in real time) in front of a real
//! DynamoDB-compatible server. With a small `--retry-budget` the run stops
//! with exit 75, status `throttled`, nothing rejected, the rows not written
//! pending, and its printed `--resume` finishes the copy exactly; with a
//! generous budget the same run simply completes. A queue worker leaves a
//! batch the table keeps refusing on the queue and exits 75; a worker
//! started later writes it.

use sql2ddb_queue::WorkQueue;
use sql2ddb_testkit::capacity::CapacityConfig;
use sql2ddb_testkit::FaultConfig;

use crate::common::*;
use crate::distributed::Fixture;

/// Rows of the events table: four in five belong to account 1.
const ROWS: i64 = 1_000;

const MAPPING: &str = pg_mapping!(
    "page_size = 250",
    r#"[writer]
concurrency = 4

[[entity]]
name = "event"
from = "SCHEMA.events"
pk = "ACCOUNT#{account}"
sk = "EVENT#{id:08}"
"#
);

/// Four partitions of 50 write units a second, no burst credit, in real
/// time: the partition of `ACCOUNT#1` takes its 800 items in 16 s at best,
/// the table itself has room for everything at once.
fn hot_partition() -> CapacityConfig {
    CapacityConfig {
        time_scale: 1.0,
        burst: false,
        ..CapacityConfig::provisioned(100_000, 4, 50)
    }
}

/// The events in PostgreSQL, a proxy with the hot-partition model in front
/// of the server, and the mapping.
async fn scenario(prefix: &str) -> (Scenario, sql2ddb_testkit::FaultProxy, String) {
    let sc = Scenario::new(prefix)
        .postgres(&format!(
            "CREATE TABLE {{schema}}.events (id bigint PRIMARY KEY, account int NOT NULL, amount numeric(10,2) NOT NULL);
             INSERT INTO {{schema}}.events
             SELECT i, CASE WHEN i % 5 = 0 THEN i ELSE 1 END, (i % 1000) / 100.0
             FROM generate_series(1, {ROWS}) AS i;"
        ))
        .start()
        .await;
    let proxy = sc.proxy(FaultConfig::default()).await;
    proxy.set_capacity(Some(hot_partition())).unwrap();
    let mapping = sc.mapping(MAPPING);
    (sc, proxy, mapping)
}

/// Every source row's item is in the table, as mapped, and nothing else.
async fn assert_table_equals_source(sc: &Scenario) {
    let items = sc.items().await;
    assert_eq!(items.len(), ROWS as usize);
    for i in 1..=ROWS {
        let account = if i % 5 == 0 { i } else { 1 };
        let key = (format!("ACCOUNT#{account}"), format!("EVENT#{i:08}"));
        let got = items.get(&key).unwrap_or_else(|| panic!("row {i} missing"));
        let want = item(vec![
            ("PK", s(key.0.clone())),
            ("SK", s(key.1.clone())),
            ("id", n(i)),
            ("account", n(account)),
            ("amount", n(decimal(i % 1000, 2))),
        ]);
        assert_item(&key, got, &want);
    }
}

/// The rows of a run's rejects file (none when the report names no file).
fn rejects(sc: &Scenario, report: &serde_json::Value) -> Vec<serde_json::Value> {
    match report["rejects_file"].is_null() {
        true => Vec::new(),
        false => rejects_of(sc.path(), report),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_partition_past_a_small_budget_exits_75_and_its_resume_completes_exactly() {
    let (sc, proxy, mapping) = scenario("budget_small").await;
    let progress = format!("{}_progress", sc.table);
    let endpoint = proxy.url();
    let run = sc
        .sql2ddb(&[
            "run",
            &mapping,
            "--endpoint",
            &endpoint,
            "--progress-table",
            &progress,
            "--retry-budget",
            "2s",
            "--json",
            "--quiet",
        ])
        .await;
    assert_eq!(run.code, EX_TEMPFAIL, "stderr:\n{}", run.stderr);
    let report = run.report();
    assert_eq!(report["status"], "throttled", "{report}");
    assert!(
        run.stderr.contains("kept refusing writes"),
        "{}",
        run.stderr
    );
    // Nothing is the rows' fault: no reject, no failure; what is not
    // written is pending, and the counts add up.
    let e = run.entity("event");
    let figure = |name: &str| e[name].as_u64().unwrap();
    assert_eq!((figure("rejected"), figure("failed")), (0, 0), "{e}");
    assert!(figure("pending") > 0, "{e}");
    assert_eq!(
        figure("items_written") + figure("pending"),
        figure("rows_read"),
        "{e}"
    );
    assert!(rejects(&sc, &report).is_empty(), "{report}");
    let stats = proxy.capacity_stats().unwrap();
    assert!(
        stats.tables[&sc.table]
            .partition_refused_writes
            .iter()
            .filter(|n| **n > 0)
            .count()
            == 1,
        "one partition refused: {stats:?}"
    );
    assert!(
        sc.items().await.len() < ROWS as usize,
        "the hot partition's items are not all written"
    );

    // Later, the table takes the load: the printed command (with its
    // endpoint, progress table and budget) writes exactly what is left.
    let run_id = report["run_id"].as_str().unwrap();
    let command = crate::e2e_resume::printed_command(&run.stderr);
    for words in [["--resume", run_id], ["--retry-budget", "2s"]] {
        assert!(command.windows(2).any(|w| w == words), "{command:?}");
    }
    proxy.set_capacity(None).unwrap();
    let mut command = command;
    command.extend(["--json", "--quiet"].map(String::from));
    let resumed = crate::e2e_resume::run_printed(sc.path(), &command).await;
    assert_eq!(resumed.code, 0, "{command:?}\n{}", resumed.stderr);
    assert_eq!(resumed.report()["status"], "ok");
    let e = resumed.entity("event");
    let figure = |name: &str| e[name].as_u64().unwrap();
    assert_eq!(figure("rows_read"), ROWS as u64, "{e}");
    assert_eq!(figure("items_written"), ROWS as u64, "{e}");
    assert_eq!(
        (figure("rejected"), figure("failed"), figure("pending")),
        (0, 0, 0),
        "{e}"
    );
    assert!(rejects(&sc, &resumed.report()).is_empty());
    assert_table_equals_source(&sc).await;

    let url = sc.dynamo.url.clone();
    let verify = sc
        .sql2ddb(&[
            "verify",
            &mapping,
            "--run",
            run_id,
            "--progress-table",
            &progress,
            "--endpoint",
            &url,
        ])
        .await;
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    let deep = sc
        .sql2ddb(&[
            "verify",
            &mapping,
            "--deep",
            "--endpoint",
            &url,
            "--retry-budget",
            "1m",
        ])
        .await;
    assert_eq!(deep.code, 0, "{}\n{}", deep.stdout, deep.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_hot_partition_with_a_generous_budget_is_written_whole() {
    let (sc, proxy, mapping) = scenario("budget_large").await;
    let endpoint = proxy.url();
    let run = sc
        .sql2ddb(&[
            "run",
            &mapping,
            "--endpoint",
            &endpoint,
            "--retry-budget",
            "10m",
            "--json",
            "--quiet",
        ])
        .await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let report = run.report();
    assert_eq!(report["status"], "ok");
    let e = run.entity("event");
    assert_eq!(e["items_written"], ROWS);
    assert_eq!(
        (e["rejected"].as_u64(), e["failed"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(rejects(&sc, &report).is_empty());
    let stats = proxy.capacity_stats().unwrap();
    let usage = &stats.tables[&sc.table];
    assert!(
        usage.partition_refused_writes.iter().any(|n| *n > 0),
        "the hot partition refused writes: {usage:?}"
    );
    assert_eq!(usage.admitted_writes, ROWS as u64, "{usage:?}");
    // The hot key was paced on its own, and the report says so.
    let pacing = &report["writer"]["pacing"];
    assert!(pacing["keys_paced"].as_u64().unwrap() >= 1, "{pacing}");
    assert!(pacing["items_held"].as_u64().unwrap() > 0, "{pacing}");
    assert_table_equals_source(&sc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_leaves_a_batch_the_table_keeps_refusing_on_the_queue_and_exits_75() {
    // One page of 1,000 items, a queue that hands an unfinished message
    // out again after 2 s, and a table of one partition of 50 write units
    // a second: the page needs 20 s, its budget is 2 s.
    let f = Fixture::new("budget_worker", 1_000, 2, 10).await;
    let run_id = f.read_into_queue().await;
    let proxy = f.sc.proxy(FaultConfig::default()).await;
    proxy
        .set_capacity(Some(CapacityConfig {
            time_scale: 1.0,
            burst: false,
            ..CapacityConfig::provisioned(100_000, 1, 50)
        }))
        .unwrap();
    let endpoint = proxy.url();
    let worker = |budget: &'static str| {
        f.spawn(&[
            "worker",
            &f.mapping,
            "--queue",
            &f.urls.queue,
            "--sqs-endpoint",
            f.moto.url(),
            "--endpoint",
            &endpoint,
            "--until-done",
            "--run",
            &run_id,
            "--poll",
            "1",
            "--retry-budget",
            budget,
            "--json",
        ])
    };
    let refused = worker("2s").wait().await;
    assert_eq!(refused.code, EX_TEMPFAIL, "{}", refused.stderr);
    let report = refused.report();
    assert_eq!(report["stopped"], "throttled", "{report}");
    let figure = |name: &str| report[name].as_u64().unwrap();
    // The page is two messages of 500: the table's 50 units a second write
    // at most one within its budget (the writer paces its items to the
    // rate the table admits); the other stays queued.
    assert!(figure("messages") <= 1, "{report}");
    assert_eq!(figure("rejected"), 0, "{report}");
    assert!(figure("throttled") >= 1, "{report}");
    assert!(
        refused.stderr.contains("left on the queue")
            && refused.stderr.contains("--retry-budget 2s"),
        "{}",
        refused.stderr
    );
    // Not deleted: every message of the page is still in the queue, those
    // the table refused and any the worker took and gave back as it stopped.
    let depth = f.queue.depth().await.unwrap();
    let queued = depth.visible + depth.in_flight;
    assert_eq!(
        queued,
        figure("throttled") + figure("released"),
        "{depth:?} {report}"
    );

    // Later, with room in the table: the message comes back and is written.
    proxy.set_capacity(None).unwrap();
    let done = worker("10m").wait().await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(done.report()["messages"], queued);
    assert_eq!(figure("messages") + queued, 2, "{report}");
    f.assert_verified_and_complete(&run_id).await;
    f.clean_up().await;
}
