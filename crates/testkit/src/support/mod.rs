//! What the workspace's tests share, defined once: names no other test
//! uses, where the test databases are, PostgreSQL schemas and MariaDB
//! databases of the test's own, a DynamoDB-compatible server of the
//! test's own, moto's server for SQS, S3 and the other AWS services and
//! clients of it, a loopback HTTP server that answers as told, reading a table back whole, comparing items as DynamoDB
//! compares them, a progress store of the test's own, and source data
//! several tests migrate.
//!
//! Every service can be pointed elsewhere by an environment variable
//! (`SQL2DDB_TEST_PG_URL`, `SQL2DDB_TEST_MYSQL_URL`,
//! `SQL2DDB_TEST_DYNAMODB_URL`, `SQL2DDB_TEST_SQS_URL`,
//! `SQL2DDB_TEST_S3_URL`); unset or empty, the local default is used. The
//! tests name their schemas, tables and queues with [`unique_name`], so they
//! can share one server.

mod aws;
mod db;
mod dynamo;
mod fixtures;
mod http;
mod moto;
mod progress;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::LazyLock;

use sql2ddb_core::{AttrValue, Item};

pub use aws::{aws_config, s3_client, without_a_region, Bucket, TEST_REGION};
pub use db::{exec, sqlite_file, MyDatabase, PgSchema};
pub use dynamo::{scan_all, Dynamo};
pub use fixtures::{items_sql, mapping_head};
pub use http::{answering_server, Answer, Captured, Requests};
pub use moto::Moto;
pub use progress::{progress_store, run_meta};

/// The local PostgreSQL the tests use unless `SQL2DDB_TEST_PG_URL` says otherwise.
pub const DEFAULT_PG_URL: &str = "postgres://root@127.0.0.1:5432/test";

/// The local MariaDB the tests use unless `SQL2DDB_TEST_MYSQL_URL` says otherwise.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// A name no other test, in this process or another, uses: `prefix`, the
/// process id, a counter and the clock's nanoseconds, joined by `_` (valid
/// in a table, queue, schema or database name; lower case, so an unquoted
/// SQL identifier keeps it as it is).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    format!(
        "{prefix}_{}_{}_{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The environment variable `var`, trimmed, if it is set and not empty.
pub fn env_var(var: &str) -> Option<String> {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// PostgreSQL as the tests reach it: `SQL2DDB_TEST_PG_URL`, else [`DEFAULT_PG_URL`].
pub fn pg_url() -> &'static str {
    static URL: LazyLock<String> = LazyLock::new(|| {
        env_var("SQL2DDB_TEST_PG_URL").unwrap_or_else(|| DEFAULT_PG_URL.to_string())
    });
    &URL
}

/// MariaDB as the tests reach it (a database every test may use to create
/// its own): `SQL2DDB_TEST_MYSQL_URL`, else [`DEFAULT_MYSQL_URL`].
pub fn mysql_url() -> &'static str {
    static URL: LazyLock<String> = LazyLock::new(|| {
        env_var("SQL2DDB_TEST_MYSQL_URL").unwrap_or_else(|| DEFAULT_MYSQL_URL.to_string())
    });
    &URL
}

/// A value as DynamoDB compares it: a number by its value (`1.50` is
/// `1.5`), a set in any order (sorted here), maps and lists by their
/// elements.
pub fn by_value(v: &AttrValue) -> AttrValue {
    let number = |n: &String| format!("{}", n.parse::<f64>().expect("a number"));
    let sorted = |s: &[String]| {
        let mut s = s.to_vec();
        s.sort();
        s
    };
    match v {
        AttrValue::N(n) => AttrValue::N(number(n)),
        AttrValue::NS(s) => AttrValue::NS(sorted(&s.iter().map(number).collect::<Vec<_>>())),
        AttrValue::SS(s) => AttrValue::SS(sorted(s)),
        AttrValue::BS(s) => {
            let mut s = s.clone();
            s.sort();
            AttrValue::BS(s)
        }
        AttrValue::M(m) => AttrValue::M(m.iter().map(|(k, v)| (k.clone(), by_value(v))).collect()),
        AttrValue::L(l) => AttrValue::L(l.iter().map(by_value).collect()),
        other => other.clone(),
    }
}

/// An item as DynamoDB compares it: every attribute [`by_value`].
pub fn item_by_value(item: &Item) -> Item {
    item.iter().map(|(k, v)| (k.clone(), by_value(v))).collect()
}
