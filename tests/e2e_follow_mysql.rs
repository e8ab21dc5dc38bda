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
