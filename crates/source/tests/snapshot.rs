//! Point-in-time reads, source side: after `take_snapshot`, every read —
//! on a connection the pool had, or one it opens later — sees the source as
//! it was, whatever is written meanwhile. Against real PostgreSQL, MariaDB
//! and SQLite.

mod common;

use common::{my_database, mysql_url, pg_schema, pg_url, sqlite_file};
use sql2ddb_source::{Relation, Source};
use sqlx::Connection;

/// Counts `table` from `n` reads at once, so the pool hands out (and opens)
/// as many connections as it may.
async fn counts(source: &Source, table: &str, n: usize) -> Vec<u64> {
    let from = Relation::Table(table);
    let reads = (0..n).map(|_| source.count(&from));
    futures::future::join_all(reads)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test]
async fn postgres_connections_opened_after_the_snapshot_read_it() {
    let (schema, _drop) = pg_schema(
        "snap_src",
        "CREATE TABLE {s}.t (id int PRIMARY KEY); INSERT INTO {s}.t SELECT generate_series(1, 10);",
    )
    .await;
    let table = format!("{schema}.t");
    // Four connections allowed; only the one `connect` opened exists, and
    // the snapshot keeps it: every read below runs on a new connection.
    let source = Source::connect_for_snapshot(pg_url(), 4).await.unwrap();
    let snapshot = source.take_snapshot().await.unwrap().expect("a snapshot");
    assert_eq!(snapshot.kind, "postgres");
    let mut other = sqlx::PgConnection::connect(pg_url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{schema}\".t SELECT generate_series(11, 15); DELETE FROM \"{schema}\".t WHERE id = 1"
    )))
    .execute(&mut other)
    .await
    .unwrap();
    assert_eq!(counts(&source, &table, 3).await, vec![10, 10, 10]);
    // And again, on the connections now idle in the pool.
    assert_eq!(counts(&source, &table, 3).await, vec![10, 10, 10]);
    source.close().await;
}

#[tokio::test]
async fn mysql_reads_see_the_snapshot() {
    let (db, _drop) = my_database(
        "snap_src",
        "CREATE TABLE {d}.t (id int PRIMARY KEY); INSERT INTO {d}.t VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10);",
    )
    .await;
    let table = format!("{db}.t");
    let source = Source::connect_for_snapshot(mysql_url(), 4).await.unwrap();
    let snapshot = source.take_snapshot().await.unwrap().expect("a snapshot");
    assert_eq!(snapshot.kind, "mysql");
    let mut other = sqlx::MySqlConnection::connect(mysql_url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO `{db}`.t VALUES (11),(12); DELETE FROM `{db}`.t WHERE id = 1"
    )))
    .execute(&mut other)
    .await
    .unwrap();
    assert_eq!(counts(&source, &table, 3).await, vec![10, 10, 10]);
    source.close().await;
}

#[tokio::test]
async fn sqlite_reads_share_one_read_transaction() {
    let (_dir, url) = sqlite_file(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE t (id INTEGER PRIMARY KEY);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10)
         INSERT INTO t SELECT i FROM n;",
    )
    .await;
    let source = Source::connect_for_snapshot(&url, 4).await.unwrap();
    let snapshot = source.take_snapshot().await.unwrap().expect("a snapshot");
    assert_eq!(snapshot.kind, "sqlite");
    assert!(!snapshot.taken_at.is_empty());
    // The application writes to the file (WAL mode lets it, while the run reads).
    let path = url.trim_start_matches("sqlite://");
    let mut writer = sqlx::SqliteConnection::connect(&format!("sqlite://{path}"))
        .await
        .unwrap();
    sqlx::raw_sql("INSERT INTO t VALUES (11), (12); DELETE FROM t WHERE id = 1")
        .execute(&mut writer)
        .await
        .unwrap();
    assert_eq!(counts(&source, "t", 3).await, vec![10, 10, 10]);
    source.close().await;
    // Without a snapshot each read sees the file as it is.
    let plain = Source::connect(&url, 4).await.unwrap();
    assert!(plain.take_snapshot().await.unwrap().is_none());
    assert_eq!(counts(&plain, "t", 2).await, vec![11, 11]);
    plain.close().await;
}
