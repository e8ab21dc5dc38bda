//! The end-to-end tests: the built binary against real PostgreSQL, MariaDB
//! and SQLite sources, a DynamoDB-compatible server and SQS (moto's server).
//!
//! One test binary with a module per topic, so the dependency tree is linked
//! once rather than once per topic. Run one topic with its module path, e.g.
//! `cargo test --workspace --test e2e e2e_mysql::` (`--workspace` reuses the
//! workspace build; `-p sql2ddb` resolves features for the cli alone and
//! builds part of the workspace again).

mod common;
mod distributed;
mod follow_scenario;

mod bad_input;
mod check_source;
mod cli_usage;
mod e2e_dialects;
mod e2e_distributed;
mod e2e_faults;
mod e2e_follow;
mod e2e_follow_binlog_edges;
mod e2e_follow_edges;
mod e2e_follow_mysql;
mod e2e_follow_refusals;
mod e2e_handover;
mod e2e_mysql;
mod e2e_postgres;
mod e2e_resume;
mod e2e_single_table;
mod e2e_sqlite;
mod export;
mod follow_status;
mod get;
mod if_not_empty;
mod init;
mod init_design;
mod init_shapes;
mod nothing_lost;
mod output_format;
mod plan;
mod readme;
mod real_service;
mod report_streams;
mod retry_budget;
mod secrets;
mod snapshot;
mod update;
mod update_queue;
mod verify_deep;
