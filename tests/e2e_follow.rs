//! `run --follow` on PostgreSQL: the scenario of [`crate::follow_scenario`]
//! read from a logical replication slot. One table holds values large
//! enough to be TOASTed, which an update of another column leaves out of
//! the change: those rows are read again.

use crate::follow_scenario::{
    refuses_a_table_without_a_primary_key, survives_a_kill_and_cuts_over, Db,
};

#[tokio::test]
async fn follow_survives_a_kill_and_cuts_over_to_an_equal_table() {
    survives_a_kill_and_cuts_over(Db::Postgres, "follow").await;
}

#[tokio::test]
async fn a_table_without_a_primary_key_is_refused_for_follow() {
    refuses_a_table_without_a_primary_key(Db::Postgres, "follow_nokey").await;
}
