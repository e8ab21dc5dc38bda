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
