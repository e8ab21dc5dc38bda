//! A unique key whose columns may hold NULL (SQLite's primary keys over
//! non-INTEGER columns) is proven by its rows: none holds a NULL.

mod common;

use common::sqlite_file;
use sql2ddb_source::{KeyProof, Relation, Source};

#[tokio::test]
async fn nothing_lost_01_nullable_unique_key_is_proven_by_its_rows() {
    let (_dir, url) = sqlite_file(
        "CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT);
         INSERT INTO products VALUES ('A-1', 'a'), ('B-2', 'b');
         CREATE TABLE holes (sku TEXT PRIMARY KEY, name TEXT);
         INSERT INTO holes VALUES ('A-1', 'a'), (NULL, 'b'), (NULL, 'c');",
    )
    .await;
    let source = Source::connect(&url, 1).await.unwrap();
    let proof = |table: &'static str| {
        let source = source.clone();
        async move {
            let from = Relation::Table(table);
            let shape = source.describe(&from).await.unwrap();
            source.prove_unique_key(&from, &shape, &[]).await.unwrap()
        }
    };
    assert!(matches!(
        proof("products").await,
        KeyProof::UniqueWithoutNulls { .. }
    ));
    match proof("holes").await {
        KeyProof::NotProven { reason } => {
            assert!(
                reason.contains("can hold NULL") && reason.contains("2 row(s)"),
                "{reason}"
            )
        }
        other => panic!("NULL keys must not be proven: {other:?}"),
    }
    source.close().await;
}

#[tokio::test]
async fn sqlite_catalog_says_which_primary_key_columns_can_hold_null() {
    let (_dir, url) = sqlite_file(
        "CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT);
         CREATE TABLE strict_products (sku TEXT NOT NULL PRIMARY KEY);
         CREATE TABLE rowid_alias (id INTEGER PRIMARY KEY, parent INT
           REFERENCES rowid_alias (id) ON DELETE CASCADE);
         CREATE TABLE no_rowid (a TEXT, b INT, PRIMARY KEY (a, b)) WITHOUT ROWID;",
    )
    .await;
    let source = Source::connect(&url, 1).await.unwrap();
    let nullable = |table: &'static str| {
        let source = source.clone();
        async move {
            let t = source.schema_table(table).await.unwrap();
            t.columns
                .iter()
                .filter(|c| c.nullable)
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        }
    };
    // SQLite lets a primary key column hold NULL unless it is the rowid or
    // the table is WITHOUT ROWID.
    assert_eq!(nullable("products").await, ["sku", "name"]);
    assert!(nullable("strict_products").await.is_empty());
    assert_eq!(nullable("rowid_alias").await, ["parent"]);
    assert!(nullable("no_rowid").await.is_empty());
    let t = source.schema_table("rowid_alias").await.unwrap();
    assert!(t.foreign_keys[0].on_delete_cascade);
    source.close().await;
}
