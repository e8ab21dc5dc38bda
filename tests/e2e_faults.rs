//! Resilience end to end: the built binary writes through the fault-injection
//! proxy (throttling, 5xx, unprocessed items, delays, dropped connections) in
//! front of a real DynamoDB-compatible server, and every row still arrives
//! exactly as mapped; throttling lowers concurrency; the capacity cap holds by
//! the proxy's own count; a permanent failure exhausts its budget and is
//! reported with its keys; an endpoint lost or holding every request ends
//! the run (on its own, or at the first SIGTERM) with a report and the
//! command that continues it; a table throttled past the retries ends it
//! with "try again later" (EX_TEMPFAIL).

use std::path::Path;
use std::time::{Duration, Instant};

use sql2ddb_core::AttrValue;
use sql2ddb_testkit::{FaultConfig, FaultProxy};

use crate::common::*;

const MAPPING: &str = pg_mapping!(
    "page_size = 2000",
    r#"[writer]
concurrency = 8
WRITER

[[entity]]
name = "event"
from = "SCHEMA.events"
pk = "EVENT#{id:08}"
sk = "E"
"#
);

/// `rows` events in PostgreSQL, a server behind a proxy configured by `faults`,
/// and the mapping with `writer` as its `[writer]` settings.
async fn scenario(
    prefix: &str,
    rows: i64,
    faults: FaultConfig,
    writer: &str,
) -> (Scenario, FaultProxy, String) {
    let sc = Scenario::new(prefix)
        .postgres(&format!(
            "CREATE TABLE {{schema}}.events (id bigint PRIMARY KEY, kind text NOT NULL, amount numeric(10,2) NOT NULL, note text);
             INSERT INTO {{schema}}.events
             SELECT i, 'kind-' || (i % 13), (i % 10000) / 100.0, CASE WHEN i % 5 = 0 THEN NULL ELSE repeat('n', (i % 40)::int) END
             FROM generate_series(1, {rows}) AS i;"
        ))
        .start()
        .await;
    let proxy = sc.proxy(faults).await;
    let mapping = sc.mapping(&MAPPING.replace("WRITER", writer));
    (sc, proxy, mapping)
}

/// `sql2ddb run` through the proxy, with a JSON report.
async fn run(sc: &Scenario, proxy: &FaultProxy, mapping: &str, extra: &[&str]) -> Run {
    let endpoint = proxy.url();
    let mut args = vec!["run", mapping, "--endpoint", &endpoint];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "--quiet"]);
    sc.sql2ddb(&args).await
}

async fn assert_all_written(sc: &Scenario, rows: i64) {
    let items = sc.items().await;
    assert_eq!(items.len(), rows as usize);
    for i in 1..=rows {
        let key = (format!("EVENT#{i:08}"), "E".to_string());
        let got = items.get(&key).unwrap_or_else(|| panic!("row {i} missing"));
        let mut want = sql2ddb_core::Item::new();
        want.insert("PK".into(), s(key.0.clone()));
        want.insert("SK".into(), s("E"));
        want.insert("id".into(), n(i));
        want.insert("kind".into(), s(format!("kind-{}", i % 13)));
        want.insert("amount".into(), n(decimal(i % 10000, 2)));
        if i % 5 != 0 {
            want.insert("note".into(), AttrValue::S("n".repeat((i % 40) as usize)));
        }
        assert_item(&key, got, &want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_percent_of_calls_faulted_and_every_row_arrives() {
    // 20,000 rows are 800 calls: hundreds of faults of every kind, a
    // fifth of the time 100,000 rows took.
    const ROWS: i64 = 20_000;
    let (sc, proxy, mapping) = scenario("faults30", ROWS, FaultConfig::mix(0.30, 42), "").await;

    let run = run(&sc, &proxy, &mapping, &[]).await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let e = run.entity("event");
    assert_eq!(e["rows_read"], ROWS);
    assert_eq!(e["items_written"], ROWS);
    assert_eq!(e["failed"], 0);
    let stats = proxy.stats();
    assert!(stats.faults() > 0, "{stats:?}");
    let retries = e["retries"].as_u64().unwrap();
    assert!(retries > 0, "the report counts retries");
    assert!(run.report()["writer"]["throttled"].as_u64().unwrap() > 0);
    assert_all_written(&sc, ROWS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_throttling_lowers_concurrency_then_the_run_completes() {
    const ROWS: i64 = 20_000;
    let config = FaultConfig {
        throttle_all_for: Some(Duration::from_secs(5)),
        ..FaultConfig::default()
    };
    // Enough attempts to outlast five seconds of throttling.
    let (sc, proxy, mapping) = scenario("throttle", ROWS, config, "max_attempts = 40").await;

    let run = run(&sc, &proxy, &mapping, &[]).await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let report = run.report();
    let w = &report["writer"];
    assert_eq!(w["adaptive"], true);
    assert!(w["decreases"].as_u64().unwrap() > 0, "{w}");
    assert!(
        w["min_concurrency"].as_u64().unwrap() < w["max_concurrency"].as_u64().unwrap(),
        "{w}"
    );
    assert!(
        proxy.stats().provisioned_throughput_exceeded > 0,
        "the first seconds were throttled"
    );
    assert_eq!(run.entity("event")["items_written"], ROWS);
    // The timeline (report.html's charts) holds the same story second by
    // second: every item written in some second, every throttled call
    // counted, the limit lowered in the throttled seconds.
    let t = &report["timeline"];
    let series = |name: &str| -> Vec<u64> {
        t[name]
            .as_array()
            .unwrap_or_else(|| panic!("timeline.{name}: {t}"))
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    assert_eq!(
        series("items_written").iter().sum::<u64>(),
        ROWS as u64,
        "{t}"
    );
    let throttled = series("throttled_calls");
    assert_eq!(
        throttled.iter().sum::<u64>(),
        w["throttled"].as_u64().unwrap(),
        "{t}"
    );
    assert!(throttled.iter().any(|n| *n > 0), "{t}");
    let limits = series("concurrency");
    assert!(
        limits.iter().min() < w["max_concurrency"].as_u64().as_ref(),
        "{t}"
    );
    assert_eq!(limits.len(), throttled.len());
    assert_all_written(&sc, ROWS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capacity_cap_holds_by_the_proxys_count() {
    const ROWS: i64 = 6_000;
    const CAP: u64 = 500;
    let (sc, proxy, mapping) = scenario("wcucap", ROWS, FaultConfig::default(), "").await;
    let cap = CAP.to_string();

    let run = run(&sc, &proxy, &mapping, &["--max-wcu", &cap]).await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.report()["writer"]["max_wcu"], CAP);
    let stats = proxy.stats();
    // Every item is under 1 KB: one unit each, all of them through the proxy.
    assert_eq!(stats.write_units(), ROWS as u64);
    let busiest = stats.busiest_window(5);
    assert!(
        busiest <= CAP * 5 * 11 / 10,
        "busiest 5 s window: {busiest} units, cap {CAP}/s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_exhausts_its_budget_and_lists_the_keys() {
    const ROWS: i64 = 60;
    let config = FaultConfig {
        internal_error: 1.0,
        ..FaultConfig::default()
    };
    let (sc, proxy, mapping) = scenario("budget", ROWS, config, "max_attempts = 3").await;

    let run = run(&sc, &proxy, &mapping, &[]).await;
    assert_eq!(
        run.code, EXIT_FAILED,
        "the exit code says rows were not written; stderr:\n{}",
        run.stderr
    );
    let report = run.report();
    assert_eq!(report["status"], "failed");
    let e = run.entity("event");
    assert_eq!(e["failed"], ROWS);
    assert_eq!(e["items_written"], 0);
    // At most three calls per 25-item chunk; once one chunk has spent its
    // three, the run's budget is spent and chunks still going stop sooner.
    let calls = proxy.stats().internal_error;
    assert!(
        (3..=3 * (ROWS as u64).div_ceil(25)).contains(&calls),
        "{calls} calls"
    );
    let rejects = rejects_of(sc.path(), &report);
    let reason = |r: &serde_json::Value| r["reason"].as_str().unwrap().to_string();
    assert!(
        rejects
            .iter()
            .any(|r| reason(r).contains("not written after 3 attempts")),
        "{rejects:?}"
    );
    let mut ids: Vec<i64> = rejects
        .into_iter()
        .inspect(|r| {
            assert!(
                reason(r).contains("not written after 3 attempts")
                    || reason(r).contains("an earlier chunk spent its whole retry budget"),
                "{r}"
            )
        })
        .map(|r| r["key"]["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, (1..=ROWS).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_throttles_past_the_retries_says_try_again_later() {
    // Every call to look at the table is throttled: the run cannot start,
    // and nothing is lost by running it again later.
    let config = FaultConfig {
        throttling: 1.0,
        operations: vec!["DescribeTable".to_string()],
        ..FaultConfig::default()
    };
    let (sc, proxy, mapping) = scenario("throttled", 10, config, "").await;

    // The throttled look is retried for the retry budget (10 minutes by
    // default), then the run says to try again later.
    let started = Instant::now();
    let run = run(&sc, &proxy, &mapping, &["--retry-budget", "4s"]).await;
    assert_eq!(run.code, EX_TEMPFAIL, "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("ThrottlingException"), "{}", run.stderr);
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "retried for the budget"
    );
    assert_eq!(run.report()["status"], "throttled");
    assert!(proxy.stats().throttling > 1, "retried: {:?}", proxy.stats());
    assert!(!sc.table_exists(&sc.table).await, "nothing written");
}

/// Waits until `ready` holds, looking every 20 ms.
async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < PATIENCE, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `sql2ddb run` through the proxy with a progress table, two writers and
/// pages of 100 rows, paced at 500 items a second: the reader waits for
/// room in the writers' queue most of the time, as on a large table.
fn start_paced(sc: &Scenario, proxy: &FaultProxy, mapping: &str, extra: &[&str]) -> Proc {
    let progress = format!("{}_progress", sc.table);
    let endpoint = proxy.url();
    let mut args = vec![
        "run",
        mapping,
        "--endpoint",
        &endpoint,
        "--progress-table",
        &progress,
        "--page-size",
        "100",
        "--concurrency",
        "2",
        "--max-wcu",
        "500",
        "--json",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    Proc::spawn(sc.path(), &args)
}

/// The report a run saved in its run directory.
fn saved_report(sc: &Scenario, report: &serde_json::Value) -> serde_json::Value {
    let path = sc
        .path()
        .join(report["run_dir"].as_str().unwrap())
        .join("report.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", Path::new(&path).display()));
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_3_lost_endpoint_ends_the_run_with_a_report() {
    const ROWS: i64 = 3_000;
    let (sc, proxy, mapping) =
        scenario("lost", ROWS, FaultConfig::default(), "max_attempts = 3").await;
    let endpoint = proxy.url();
    let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();
    let running = start_paced(&sc, &proxy, &mapping, &[]);
    // The endpoint goes away (connections refused) once 500 items went through.
    until("500 items written", || proxy.stats().items_forwarded >= 500).await;
    drop(proxy);

    // It ends on its own (the hang guard is `wait`'s patience).
    let run = running.wait().await;
    // The run stopped on DynamoDB, which can no longer be reached.
    assert_eq!(run.code, EX_UNAVAILABLE, "stderr:\n{}", run.stderr);
    let report = run.report();
    assert_eq!(report["status"], "failed");
    assert!(report["error"].is_string(), "{report}");
    assert_eq!(saved_report(&sc, &report)["status"], "failed");
    let e = run.entity("event");
    let figure = |name: &str| e[name].as_u64().unwrap();
    assert!(figure("failed") > 0, "{e}");
    assert_eq!(
        figure("items_written") + figure("failed"),
        figure("rows_read"),
        "every row read is written or counted failed: {e}"
    );
    assert_eq!(figure("pending"), 0, "{e}");
    assert!(
        sc.items().await.len() as u64 >= figure("items_written"),
        "nothing counted that was not written"
    );

    // Once the endpoint is back, the printed command finishes the run.
    let run_id = report["run_id"].as_str().unwrap();
    let command = crate::e2e_resume::printed_command(&run.stderr);
    assert!(
        command.windows(2).any(|w| w == ["--resume", run_id]),
        "{command:?}"
    );
    let _back = FaultProxy::start_on(port, &sc.dynamo.url, FaultConfig::default())
        .await
        .unwrap();
    let resumed = crate::e2e_resume::run_printed(sc.path(), &command).await;
    assert_eq!(resumed.code, 0, "{command:?}\n{}", resumed.stderr);
    assert_all_written(&sc, ROWS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_3_first_sigterm_ends_a_stuck_run() {
    const ROWS: i64 = 3_000;
    let (sc, proxy, mapping) = scenario("stuck", ROWS, FaultConfig::default(), "").await;
    // A grace period shorter than a call's attempt timeout (30 s): the
    // writers are still stuck in their calls when it ends.
    let running = start_paced(&sc, &proxy, &mapping, &["--shutdown-grace", "5"]);
    until("300 items written", || proxy.stats().items_forwarded >= 300).await;
    // From now on the endpoint holds every request for an hour: the
    // writers' calls, the progress table's, the report's.
    let hold = FaultConfig {
        delay: 1.0,
        delay_ms: (3_600_000, 3_600_000),
        operations: [
            "BatchWriteItem",
            "PutItem",
            "GetItem",
            "Query",
            "Scan",
            "UpdateItem",
            "DescribeTable",
        ]
        .map(String::from)
        .to_vec(),
        ..FaultConfig::default()
    };
    proxy.set_config(hold).unwrap();
    until("a call held", || proxy.stats().delayed > 0).await;

    running.terminate();
    let run = running.wait().await;
    assert_eq!(run.code, 130, "stderr:\n{}", run.stderr);
    assert!(
        !run.stderr.contains("exiting at once"),
        "one signal was sent:\n{}",
        run.stderr
    );
    let report = run.report();
    assert_eq!(report["status"], "interrupted");
    assert_eq!(saved_report(&sc, &report)["status"], "interrupted");
    let e = run.entity("event");
    let figure = |name: &str| e[name].as_u64().unwrap();
    assert_eq!(
        figure("items_written") + figure("failed") + figure("pending"),
        figure("rows_read"),
        "{e}"
    );
    assert!(figure("pending") > 0, "the held pages stay pending: {e}");
    let run_id = report["run_id"].as_str().unwrap();
    assert!(
        run.stderr.contains(&format!("--resume {run_id}")),
        "{}",
        run.stderr
    );
}
