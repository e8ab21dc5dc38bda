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

/// A user whose replication privileges come from its default role
/// follows as one that holds them itself: `run --follow` is not refused,
/// loads, and follows; a user with neither is refused before anything is
/// created, every missing privilege named.
#[tokio::test]
async fn a_user_with_its_privileges_through_a_default_role_follows() {
    let sc = crate::common::Scenario::new("follow_my_role")
        .mariadb("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20)); INSERT INTO t VALUES (1, 'a'), (2, 'b');")
        .start()
        .await;
    let d = sc.my().name.clone();
    let role = format!("{d}_role");
    let (with_role, without) = (format!("{d}_r"), format!("{d}_n"));
    sc.my()
        .exec(&format!(
            "CREATE ROLE `{role}`;
             GRANT REPLICATION SLAVE, BINLOG MONITOR, RELOAD ON *.* TO `{role}`;
             CREATE USER '{with_role}'@'%';
             GRANT `{role}` TO '{with_role}'@'%';
             SET DEFAULT ROLE `{role}` FOR '{with_role}'@'%';
             GRANT SELECT ON `{d}`.* TO '{with_role}'@'%';
             CREATE USER '{without}'@'%';
             GRANT SELECT ON `{d}`.* TO '{without}'@'%';"
        ))
        .await;
    let mapping = sc.mapping(
        r#"version = 1
[source]
url = "mysql://root@127.0.0.1:3306/test"
[target]
table = "TABLE"
create = true
pk = { name = "PK", type = "S" }

[[entity]]
name = "t"
from = "t"
pk = "T#{id}"
"#,
    );
    let as_user = |user: &str| sc.my().url.replacen("root@", &format!("{user}@"), 1);
    let follow = |user: String| {
        let source = as_user(&user);
        let server_id = crate::common::replica_server_id();
        let mapping = mapping.clone();
        let sc = &sc;
        async move {
            sc.run(
                &mapping,
                &[
                    "--source",
                    &source,
                    "--follow",
                    "--follow-until-idle",
                    "1",
                    "--server-id",
                    &server_id,
                    "--quiet",
                ],
            )
            .await
        }
    };
    let refused = follow(without.clone()).await;
    let created_by_refused = sc.table_exists(&sc.table).await;
    let by_role = follow(with_role.clone()).await;
    let items = sc.items().await;
    sc.my()
        .exec(&format!(
            "DROP USER '{with_role}'@'%'; DROP USER '{without}'@'%'; DROP ROLE `{role}`;"
        ))
        .await;
    assert_eq!(refused.code, 78, "{}", refused.stderr);
    for privilege in ["REPLICATION SLAVE", "REPLICATION CLIENT", "RELOAD"] {
        assert!(
            refused.stderr.contains(privilege),
            "{privilege}: {}",
            refused.stderr
        );
    }
    assert!(!created_by_refused, "a refused follow created the table");
    assert_eq!(by_role.code, 0, "{}\n{}", by_role.stdout, by_role.stderr);
    assert_eq!(items.len(), 2, "{items:?}");
}
