//! `update` against a table at its capacity: the testkit proxy's model of
//! DynamoDB's partitions throttles the job's Scan pages (read units) and
//! its conditional writes (write units) as the service may; the job still
//! changes every matching item exactly once and nothing else.

use sql2ddb_testkit::capacity::CapacityConfig;
use sql2ddb_testkit::FaultConfig;

use crate::common::count;

use super::{
    assert_counts_add_up, assert_orders_closed, job, shop, update_via, CLOSE_ORDERS, PER_TYPE,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_throttled_on_reads_and_writes_changes_every_match_once() {
    let sc = shop().await;
    let before = sc.items().await;
    // Two partitions of 30 WCU/s and 2 RCU/s, a table of 50 WCU/s, no
    // burst credit, 2 model seconds per real second: 1,000 one-unit
    // updates need 20 model seconds (10 real), and the four segments'
    // first pages (about 4 read units in all) come at once.
    let mut model = CapacityConfig {
        time_scale: 2.0,
        burst: false,
        ..CapacityConfig::provisioned(50, 2, 30)
    };
    model.partition_rcu = 2;
    let proxy = sc.proxy(FaultConfig::default()).await;
    proxy.set_capacity(Some(model)).unwrap();
    let run = update_via(&sc, &proxy.url(), &job(&sc, CLOSE_ORDERS)).await;
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
