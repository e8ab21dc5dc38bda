//! What the source's integration tests share: fresh schemas and databases
//! (the test-support module's, with their `{s}` and `{d}` placeholders), a
//! SQLite file in a temporary directory, and reading an entity to the end.
#![allow(dead_code, unused_imports)] // each test binary uses part of it

use sql2ddb_core::{Row, SqlValue};
use sql2ddb_source::{PageQuery, Source};
use sql2ddb_testkit::support;

pub use sql2ddb_testkit::support::{mysql_url, pg_url, MyDatabase, PgSchema};

/// A fresh PostgreSQL schema named after `prefix`, created with `setup`
/// (`{s}` stands for its name); the second value drops it when dropped.
pub async fn pg_schema(prefix: &str, setup: &str) -> (String, PgSchema) {
    let schema = PgSchema::filled(prefix, &setup.replace("{s}", "\"{schema}\"")).await;
    (schema.name.clone(), schema)
}

/// A fresh MariaDB database named after `prefix`, filled by `setup` (`{d}`
/// stands for its name); the second value drops it when dropped.
pub async fn my_database(prefix: &str, setup: &str) -> (String, MyDatabase) {
    let db = MyDatabase::create(prefix).await;
    db.exec(&setup.replace("{d}", &format!("`{}`", db.name)))
        .await;
    (db.name.clone(), db)
}

/// A temp SQLite file filled by `setup`, and its `sqlite://` URL.
pub async fn sqlite_file(setup: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = support::sqlite_file(&dir.path().join("source.db"), setup).await;
    (dir, url)
}

/// A text value.
pub fn text(s: &str) -> SqlValue {
    SqlValue::Text(s.to_string())
}

/// Reads every page; checks each page's size and that cursors strictly advance.
pub async fn read_all(source: &Source, q: &PageQuery) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut after: Option<Vec<SqlValue>> = None;
    loop {
        let page = source.read_page(q, after.as_deref()).await.unwrap();
        assert!(page.len() <= q.page_size());
        let Some(last) = page.last() else { break };
        after = Some(q.key_of(last));
        let done = page.len() < q.page_size();
        rows.extend(page);
        if done {
            // One more read must come back empty.
            assert!(source
                .read_page(q, after.as_deref())
                .await
                .unwrap()
                .is_empty());
            break;
        }
    }
    rows
}
