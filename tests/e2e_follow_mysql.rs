//! `run --follow` on MariaDB: the scenario of [`crate::follow_scenario`]
//! read from the binary log, from the full load's snapshot position; the
//! follower's position is kept in the run's directory and a resume goes on
//! from it.

use crate::follow_scenario::{
    refuses_a_table_without_a_primary_key, survives_a_kill_and_cuts_over, Db,
};

#[tokio::test]
async fn binlog_follow_survives_a_kill_and_cuts_over_to_an_equal_table() {
    survives_a_kill_and_cuts_over(Db::MariaDb, "follow_my").await;
}

#[tokio::test]
async fn a_mariadb_table_without_a_primary_key_is_refused_for_follow() {
    refuses_a_table_without_a_primary_key(Db::MariaDb, "follow_my_nokey").await;
}

/// A MySQL/MariaDB follow has no slot: asking for one, or to drop it, is a
/// usage error that says where the position is instead.
#[tokio::test]
async fn a_mariadb_follow_has_no_slot_to_name_or_drop() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = crate::common::write_mapping(
        dir.path(),
        r#"version = 1
[source]
url = "mysql://root@127.0.0.1:3306/test"
[target]
table = "follow_no_slot"
pk = { name = "PK", type = "S" }

[[entity]]
name = "customer"
from = "customers"
pk = "CUST#{customer_id}"
"#,
    );
    let by_slot = crate::common::sql2ddb(dir.path(), &["follow", &mapping, "--slot", "s1"]).await;
    assert_eq!(by_slot.code, 64, "{}", by_slot.stderr);
    assert!(
        by_slot.stderr.contains("has no replication slot")
            && by_slot.stderr.contains("--run RUN_ID"),
        "{}",
        by_slot.stderr
    );
    let drop = crate::common::sql2ddb(
        dir.path(),
        &["follow", &mapping, "--run", "r1", "--drop-slot"],
    )
    .await;
    assert_eq!(drop.code, 64, "{}", drop.stderr);
    assert!(
        drop.stderr.contains("keeps no slot") && drop.stderr.contains("binlog-position"),
        "{}",
        drop.stderr
    );
}
