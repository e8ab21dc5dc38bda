//! Rows read back by key (for replaying rejects): composite and date keys,
//! missing keys, batches larger than one statement. Real servers and files.

mod common;

use common::{my_database, mysql_url, pg_schema, pg_url, read_all, sqlite_file};
use sql2ddb_core::{Row, SqlValue};
use sql2ddb_source::{Relation, Source, MAX_PARENTS_PER_QUERY};

fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort_by_key(|r| match r[0] {
        SqlValue::Int(i) => i,
        ref other => panic!("id {other:?}"),
    });
    rows
}

/// Reads `table` by `key`, asks for every third row's key plus a key that
/// is not there, and expects exactly those rows, each once.
async fn assert_reads_keys(source: &Source, table: &str, key: &[&str], missing: Vec<SqlValue>) {
    let from = Relation::Table(table);
    let shape = source.describe(&from).await.unwrap();
    let key: Vec<String> = key.iter().map(|s| s.to_string()).collect();
    let q = source.page_query(&from, &shape, &key, 1000).unwrap();
    let all = read_all(source, &q).await;
    assert!(all.len() >= 6, "{table}: {} rows", all.len());
    let wanted: Vec<Row> = all.iter().step_by(3).cloned().collect();
    let mut keys: Vec<Vec<SqlValue>> = wanted.iter().map(|r| q.key_of(r)).collect();
    keys.push(missing);
    // Asking twice for a key returns its row once.
    keys.push(keys[0].clone());
    let rows = source.read_keys(&q, &keys).await.unwrap();
    assert_eq!(sorted(rows), sorted(wanted), "{table} by {key:?}");
    assert!(source.read_keys(&q, &[]).await.unwrap().is_empty());
}

fn date(s: &str) -> SqlValue {
    SqlValue::Date(chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap())
}

#[tokio::test]
async fn postgres_reads_rows_by_key() {
    // Every third row: more keys than one statement takes.
    let n = MAX_PARENTS_PER_QUERY * 6 + 7;
    let sql = format!(
        "CREATE TABLE {{s}}.t (id int, g text, d date, at timestamptz, amount numeric(10,2),
           PRIMARY KEY (g, d));
         INSERT INTO {{s}}.t SELECT i, 'g' || (i % 3), date '2024-01-01' + i,
           timestamptz '2024-01-01 00:00:00+00' + i * interval '1.5 seconds', i / 100.0
           FROM generate_series(1, {n}) AS i;
         CREATE UNIQUE INDEX ON {{s}}.t (at);"
    );
    let (name, _guard) = pg_schema("rk_pg", &sql).await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let table = format!("{name}.t");
    assert_reads_keys(
        &source,
        &table,
        &["g", "d"],
        vec![SqlValue::Text("g9".into()), date("2024-01-01")],
    )
    .await;
    assert_reads_keys(&source, &table, &["d"], vec![date("1999-01-01")]).await;
    assert_reads_keys(
        &source,
        &table,
        &["at"],
        vec![SqlValue::TimestampTz(chrono::DateTime::UNIX_EPOCH)],
    )
    .await;
    assert_reads_keys(
        &source,
        &table,
        &["amount"],
        vec![SqlValue::Decimal("-1.00".into())],
    )
    .await;
}

#[tokio::test]
async fn mysql_reads_rows_by_key() {
    let sql = "CREATE TABLE {d}.t (id INT, g VARCHAR(5) NOT NULL, d DATE NOT NULL,
           at DATETIME(3) NOT NULL UNIQUE, b BINARY(4) NOT NULL UNIQUE, PRIMARY KEY (g, d));
         INSERT INTO {d}.t
           WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 40)
           SELECT i, CONCAT('g', i % 3), DATE_ADD('2024-01-01', INTERVAL i DAY),
             DATE_ADD('2024-01-01', INTERVAL i * 1500 MICROSECOND), UNHEX(LPAD(HEX(i * 7), 8, '0'))
           FROM s;";
    let (name, _guard) = my_database("rk_my", sql).await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    let table = format!("{name}.t");
    assert_reads_keys(
        &source,
        &table,
        &["g", "d"],
        vec![SqlValue::Text("g9".into()), date("2024-01-01")],
    )
    .await;
    assert_reads_keys(
        &source,
        &table,
        &["at"],
        vec![SqlValue::Timestamp(
            chrono::NaiveDate::from_ymd_opt(1999, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap(),
        )],
    )
    .await;
    assert_reads_keys(
        &source,
        &table,
        &["b"],
        vec![SqlValue::Bytes(vec![9, 9, 9, 9])],
    )
    .await;
}

#[tokio::test]
async fn sqlite_reads_rows_by_key_whatever_the_stored_text() {
    let (_dir, url) = sqlite_file(
        "CREATE TABLE t (id INTEGER, g TEXT NOT NULL, d DATE NOT NULL, at DATETIME NOT NULL UNIQUE,
           PRIMARY KEY (g, d));
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 6000)
         INSERT INTO t SELECT i, 'g' || (i % 3), date('2024-01-01', '+' || i || ' days'),
           CASE i % 2 WHEN 0 THEN strftime('%Y-%m-%dT%H:%M:%f', '2024-01-01', '+' || i || ' seconds')
                      ELSE datetime('2024-01-01', '+' || i || ' seconds') END
           FROM s;",
    )
    .await;
    let source = Source::connect(&url, 2).await.unwrap();
    assert_reads_keys(
        &source,
        "t",
        &["g", "d"],
        vec![SqlValue::Text("g9".into()), date("2024-01-01")],
    )
    .await;
    assert_reads_keys(&source, "t", &["d"], vec![date("1999-01-01")]).await;
    assert_reads_keys(
        &source,
        "t",
        &["at"],
        vec![SqlValue::Timestamp(
            chrono::NaiveDate::from_ymd_opt(1999, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap(),
        )],
    )
    .await;
}
