//! Child rows of a page of parents (embeds) against real PostgreSQL, MariaDB
//! and SQLite: one statement per page, ordered by parent key then
//! `order_by`, grouped back by parent; composite keys; split pages.

mod common;

use common::{my_database, mysql_url, pg_schema, pg_url};
use sql2ddb_core::{Row, SqlValue};
use sql2ddb_source::{Relation, Source, SourceErrorKind};
use sqlx::Connection;

/// Lines 1..=5 and discounts, inserted out of order; parent 2 has no lines,
/// parent 4 is never asked for.
const ROWS: &str = "INSERT INTO {p}order_lines VALUES (1, 2, 'B'), (3, 1, 'C'), (1, 1, 'A'), (3, 2, 'D'), (4, 1, 'E');
     INSERT INTO {p}line_discounts VALUES (1, 2, 'Z'), (1, 1, 'X'), (3, 1, 'W'), (1, 2, 'Y');";

fn int(i: i64) -> SqlValue {
    SqlValue::Int(i)
}

fn skus(rows: &[Row], col: usize) -> Vec<String> {
    rows.iter()
        .map(|r| match &r[col] {
            SqlValue::Text(s) => s.clone(),
            other => panic!("not text: {other:?}"),
        })
        .collect()
}

/// The same checks for every dialect; `prefix` qualifies the table names.
async fn check(source: &Source, prefix: &str) {
    let lines_table = format!("{prefix}order_lines");
    let lines = Relation::Table(&lines_table);
    let shape = source.describe(&lines).await.unwrap();
    let q = source
        .child_query(&lines, &shape, &["order_id".into()], &["line_no".into()])
        .unwrap();
    let parents = vec![vec![int(1)], vec![int(2)], vec![int(3)]];
    let rows = source.read_children(&q, &parents).await.unwrap();
    // Ordered by parent key, then line_no; parent 4's line is not read.
    assert_eq!(skus(&rows, 2), ["A", "B", "C", "D"]);
    assert_eq!(q.parent_key_of(&rows[2]), vec![int(3)]);
    let grouped = q.group(&parents, rows).unwrap();
    let by_parent: Vec<Vec<String>> = grouped.iter().map(|g| skus(g, 2)).collect();
    assert_eq!(by_parent, vec![vec!["A", "B"], vec![], vec!["C", "D"]]);
    // Split into one statement per parent, the result is the same.
    let one_each = q.clone().with_parents_per_query(1);
    let grouped = source
        .read_children_grouped(&one_each, &parents)
        .await
        .unwrap();
    let split: Vec<Vec<String>> = grouped.iter().map(|g| skus(g, 2)).collect();
    assert_eq!(split, by_parent);
    assert!(source.read_children(&q, &[]).await.unwrap().is_empty());

    // A composite parent key: discounts of lines (order_id, line_no), by code.
    let discounts_table = format!("{prefix}line_discounts");
    let discounts = Relation::Table(&discounts_table);
    let shape = source.describe(&discounts).await.unwrap();
    let q = source
        .child_query(
            &discounts,
            &shape,
            &["order_id".into(), "line_no".into()],
            &["code".into()],
        )
        .unwrap();
    let line_keys = vec![
        vec![int(1), int(1)],
        vec![int(1), int(2)],
        vec![int(3), int(1)],
        vec![int(3), int(2)],
    ];
    for per_query in [usize::MAX, 3, 1] {
        let q = q.clone().with_parents_per_query(per_query);
        let grouped = source.read_children_grouped(&q, &line_keys).await.unwrap();
        let codes: Vec<Vec<String>> = grouped.iter().map(|g| skus(g, 2)).collect();
        assert_eq!(
            codes,
            vec![vec!["X"], vec!["Y", "Z"], vec!["W"], vec![]],
            "{per_query} parents per query"
        );
    }

    let e = source
        .read_children(&q, &[vec![int(1), SqlValue::Null]])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), SourceErrorKind::Config);
    assert!(e.to_string().contains("holds NULL"), "{e}");
    let e = source
        .child_query(&discounts, &shape, &["order_ref".into()], &[])
        .unwrap_err();
    assert!(
        e.to_string().contains("column order_ref is not a column"),
        "{e}"
    );
}

#[tokio::test]
async fn postgres_children_of_a_page() {
    let setup = format!(
        "CREATE TABLE {{s}}.order_lines (order_id int, line_no int, sku text, PRIMARY KEY (order_id, line_no));
         CREATE TABLE {{s}}.line_discounts (order_id bigint, line_no smallint, code varchar(10), PRIMARY KEY (order_id, line_no, code));
         CREATE TABLE {{s}}.many (parent numeric(12,0), v text);
         INSERT INTO {{s}}.many SELECT g, 'v' || g FROM generate_series(1, 40000) g;
         {}",
        ROWS.replace("{p}", "{s}.")
    );
    let (schema, _guard) = pg_schema("children_pg", &setup).await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    check(&source, &format!("{schema}.")).await;

    // 40,000 parents: more bound values than one statement may carry, so the
    // page is read in a few statements, and every child finds its parent
    // (numeric children of integer parents included).
    let many = format!("{schema}.many");
    let from = Relation::Table(&many);
    let shape = source.describe(&from).await.unwrap();
    let q = source
        .child_query(&from, &shape, &["parent".into()], &[])
        .unwrap();
    assert!(
        q.sql(2)
            .contains("IN (CAST($1 AS numeric(12,0)), CAST($2 AS numeric(12,0)))"),
        "{}",
        q.sql(2)
    );
    let parents: Vec<Vec<SqlValue>> = (1..=40_000).map(|i| vec![int(i)]).collect();
    let grouped = source.read_children_grouped(&q, &parents).await.unwrap();
    assert_eq!(grouped.len(), 40_000);
    assert!(grouped.iter().all(|g| g.len() == 1));
    assert_eq!(grouped[39_999][0][1], SqlValue::Text("v40000".into()));
    source.close().await;
}

#[tokio::test]
async fn mariadb_children_of_a_page() {
    let setup = format!(
        "CREATE TABLE {{d}}.order_lines (order_id INT, line_no INT, sku VARCHAR(10), PRIMARY KEY (order_id, line_no));
         CREATE TABLE {{d}}.line_discounts (order_id BIGINT, line_no SMALLINT, code VARCHAR(10), PRIMARY KEY (order_id, line_no, code));
         {}",
        ROWS.replace("{p}", "{d}.")
    );
    let (db, _guard) = my_database("children_my", &setup).await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    check(&source, &format!("{db}.")).await;
    source.close().await;
}

#[tokio::test]
async fn sqlite_children_of_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("children.db");
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    let setup = format!(
        "CREATE TABLE order_lines (order_id INTEGER, line_no INTEGER, sku TEXT, PRIMARY KEY (order_id, line_no));
         CREATE TABLE line_discounts (order_id INTEGER, line_no INTEGER, code TEXT, PRIMARY KEY (order_id, line_no, code));
         {}",
        ROWS.replace("{p}", "")
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let source = Source::connect(&format!("sqlite://{}", path.display()), 2)
        .await
        .unwrap();
    let from = Relation::Table("line_discounts");
    let shape = source.describe(&from).await.unwrap();
    let q = source
        .child_query(&from, &shape, &["order_id".into(), "line_no".into()], &[])
        .unwrap();
    // SQLite takes a row-value IN only from a subquery.
    assert!(
        q.sql(2)
            .contains("(t.\"order_id\", t.\"line_no\") IN (VALUES (?, ?), (?, ?))"),
        "{}",
        q.sql(2)
    );
    check(&source, "").await;
    source.close().await;
}
