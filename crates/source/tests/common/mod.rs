//! Helpers shared by the source's integration tests: fresh schemas and
//! databases, cleanup guards and reading an entity to the end.
#![allow(dead_code)]

use sqlx::Connection;

use sql2ddb_core::{Row, SqlValue};
use sql2ddb_source::{PageQuery, Source};

pub use sql2ddb_testkit::support::{mysql_url, pg_url, unique_name as unique};

/// A fresh PostgreSQL schema named after `prefix`, created with `setup`
/// (`{s}` stands for its name), dropped at the end.
pub async fn pg_schema(prefix: &str, setup: &str) -> (String, Cleanup) {
    let name = unique(prefix);
    let guard = Cleanup {
        url: pg_url().to_string(),
        sql: format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"),
    };
    let mut conn = sqlx::PgConnection::connect(pg_url()).await.unwrap();
    let sql = format!(
        "CREATE SCHEMA \"{name}\"; {}",
        setup.replace("{s}", &format!("\"{name}\""))
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
        .unwrap();
    (name, guard)
}

/// A fresh MariaDB database named after `prefix`, filled by `setup` (`{d}`
/// stands for its name), dropped at the end.
pub async fn my_database(prefix: &str, setup: &str) -> (String, Cleanup) {
    let name = unique(prefix);
    let guard = Cleanup {
        url: mysql_url().to_string(),
        sql: format!("DROP DATABASE IF EXISTS `{name}`"),
    };
    let mut conn = sqlx::MySqlConnection::connect(mysql_url()).await.unwrap();
    let sql = format!(
        "CREATE DATABASE `{name}`; {}",
        setup.replace("{d}", &format!("`{name}`"))
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
        .unwrap();
    (name, guard)
}

/// A temp SQLite file filled by `setup`, and its `sqlite://` URL.
pub async fn sqlite_file(setup: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("source.db");
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(setup.to_string()))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    (dir, format!("sqlite://{}", path.display()))
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

/// Runs a cleanup statement on drop, even when the test panicked.
pub struct Cleanup {
    pub url: String,
    pub sql: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (url, sql) = (self.url.clone(), self.sql.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                use sqlx::Connection;
                if url.starts_with("postgres") {
                    if let Ok(mut c) = sqlx::PgConnection::connect(&url).await {
                        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                            .execute(&mut c)
                            .await;
                    }
                } else if let Ok(mut c) = sqlx::MySqlConnection::connect(&url).await {
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut c)
                        .await;
                }
            });
        })
        .join()
        .unwrap();
    }
}
