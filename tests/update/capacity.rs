//! `update` against a table at its capacity: the testkit proxy's model of
//! DynamoDB's partitions throttles the job's Scan pages (read units) and
//! its conditional writes (write units) as the service may; the job still
//! changes every matching item exactly once and nothing else.

use sql2ddb_testkit::capacity::CapacityConfig;
use sql2ddb_testkit::FaultConfig;

use crate::common::count;

use super::{
    assert_counts_add_up, assert_orders_closed, assert_visited_once, job, shop, ADD_VISITS,
    CLOSE_ORDERS, PER_TYPE,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_throttled_on_reads_and_writes_changes_every_match_once() {
    let sc = shop().await;
    let before = sc.items().await;
    // Two partitions of 10 WCU/s and 2 RCU/s, a table of 20 WCU/s, no
    // burst credit, 5 model seconds per real second: 1,000 one-unit
    // updates need 50 model seconds (10 real). Each bucket starts with one
    // model second banked (10 write units a partition), and the job's first
    // 64 writes go out at once, about 32 a partition: writes are refused
    // however slow the host is. The four segments' first pages (about 4
    // read units in all) come at once, so reads are refused too.
    let mut model = CapacityConfig {
        time_scale: 5.0,
        burst: false,
        ..CapacityConfig::provisioned(20, 2, 10)
    };
    model.partition_rcu = 2;
    let proxy = sc.proxy(FaultConfig::default()).await;
    proxy.set_capacity(Some(model)).unwrap();
    let path = job(&sc, CLOSE_ORDERS);
    let endpoint = proxy.url();
    let run = sc
        .sql2ddb(&[
            "update",
            &path,
            "--endpoint",
            &endpoint,
            "--concurrency",
            "64",
            "--json",
            "--quiet",
        ])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let r = run.report();
    assert_counts_add_up(&r);
    assert_eq!(count(&r, "scanned"), 3 * PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "updated"), PER_TYPE as u64, "{r}");
    assert_eq!((count(&r, "skipped"), count(&r, "failed")), (0, 0), "{r}");
    let stats = proxy.capacity_stats().unwrap();
    let usage = &stats.tables[&sc.table];
    assert!(stats.refused_reads > 0, "no read was throttled: {stats:?}");
    assert!(
        usage.refused_writes > 0,
        "no write was throttled: {stats:?}"
    );
    // Each order written once: a refused write costs nothing and is sent again.
    assert_eq!(usage.admitted_writes, PER_TYPE as u64, "{usage:?}");

    assert_orders_closed(&before, &sc.items().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_throttled_past_its_retry_budget_exits_75_and_its_resume_changes_each_match_once()
{
    let sc = shop().await;
    let before = sc.items().await;
    // One partition of 10 write units a second, no burst credit, in real
    // time: the 1,000 orders need 100 s, each write's budget is 1 s.
    let proxy = sc.proxy(FaultConfig::default()).await;
    proxy
        .set_capacity(Some(CapacityConfig {
            time_scale: 1.0,
            burst: false,
            ..CapacityConfig::provisioned(100_000, 1, 10)
        }))
        .unwrap();
    // Not idempotent: a change applied twice would show.
    let path = job(&sc, ADD_VISITS);
    let endpoint = proxy.url();
    let run = sc
        .sql2ddb(&[
            "update",
            &path,
            "--endpoint",
            &endpoint,
            "--concurrency",
            "16",
            "--retry-budget",
            "1s",
            "--json",
            "--quiet",
        ])
        .await;
    assert_eq!(run.code, 75, "{}", run.stderr);
    let r = run.report();
    assert_eq!(r["status"], "throttled", "{r}");
    assert_counts_add_up(&r);
    assert_eq!(count(&r, "failed"), 0, "no item is at fault: {r}");
    assert!(count(&r, "pending") > 0, "{r}");
    let failures = std::path::Path::new(r["failures_file"].as_str().unwrap());
    assert!(
        !sc.path().join(failures).exists(),
        "nothing in failed.jsonl"
    );
    assert!(run.stderr.contains("kept refusing"), "{}", run.stderr);

    // Later, with room in the table, the printed command finishes the job.
    let line = run
        .stderr
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("sql2ddb update "))
        .unwrap_or_else(|| panic!("no command printed:\n{}", run.stderr));
    assert!(line.contains("--retry-budget 1s"), "{line}");
    proxy.set_capacity(None).unwrap();
    let words: Vec<&str> = line.split_whitespace().skip(1).collect();
    let mut args = words.clone();
    args.extend_from_slice(&["--json", "--quiet"]);
    let resumed = sc.sql2ddb(&args).await;
    assert_eq!(resumed.code, 0, "{line}\n{}", resumed.stderr);
    let r = resumed.report();
    assert_eq!(count(&r, "updated"), PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "failed"), 0, "{r}");
    assert_counts_add_up(&r);
    assert_visited_once(&sc, &before).await;
}
