//! Keys of date, timestamp, JSON, uuid and binary types page and segment
//! like integer keys: every row is read exactly once, whatever page size.

mod common;

use common::{my_database, mysql_url, pg_schema, pg_url, read_all, sqlite_file};
use sql2ddb_core::{Row, SqlValue};
use sql2ddb_source::{PageQuery, Relation, Source};

/// Reads every segment of `n` page by page.
async fn read_segments(source: &Source, q: &PageQuery, n: u32) -> (usize, Vec<Row>) {
    let segments = source.split(q, n).await.unwrap();
    let mut rows = Vec::new();
    for s in &segments {
        let mut after = s.after.clone();
        loop {
            let page = source
                .read_range(q, after.as_deref(), s.until.as_deref())
                .await
                .unwrap();
            let Some(last) = page.last() else { break };
            after = Some(q.key_of(last));
            rows.extend(page);
        }
    }
    (segments.len(), rows)
}

/// The `id` column (first) of each row, sorted; panics on a repeated id.
fn ids(rows: &[Row]) -> Vec<i64> {
    let mut ids: Vec<i64> = rows
        .iter()
        .map(|r| match r[0] {
            SqlValue::Int(i) => i,
            ref other => panic!("id {other:?}"),
        })
        .collect();
    ids.sort();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "a row was read twice");
    ids
}

/// Pages of 3 and 1 rows, and 3 segments, each read every row once.
async fn assert_reads_all(source: &Source, from: Relation<'_>, key: &str, expected: &[i64]) {
    let shape = source.describe(&from).await.unwrap();
    let key = vec![key.to_string()];
    for page_size in [3, 1] {
        let q = source.page_query(&from, &shape, &key, page_size).unwrap();
        let rows = read_all(source, &q).await;
        assert_eq!(ids(&rows), expected, "key {key:?}, pages of {page_size}");
    }
    let q = source.page_query(&from, &shape, &key, 2).unwrap();
    let (segments, rows) = read_segments(source, &q, 3).await;
    assert!(segments > 1, "{segments} segments");
    assert_eq!(ids(&rows), expected, "key {key:?} in segments");
}

#[tokio::test]
async fn sqlite_date_datetime_and_json_keys_page_past_the_first_page() {
    // `at` mixes SQLite's own rendering, the `T` separator, fractions and an
    // offset; they sort by their text, which the cursor must follow.
    let (_dir, url) = sqlite_file(
        r#"CREATE TABLE events (id INTEGER, at DATETIME PRIMARY KEY, day DATE UNIQUE, doc JSON UNIQUE);
           INSERT INTO events VALUES
             (1, '2024-01-02 03:04:05', '2024-01-01', '{"a": 1}'),
             (2, '2024-01-02T03:04:05.1', '2024-01-02', '"x"'),
             (3, '2024-01-02 03:04:05.500', '2024-01-03', '[1, 2]'),
             (4, '2024-01-02T03:04:06.25', '2024-01-04', '2'),
             (5, '2024-01-02 03:04', '2024-01-05', '{"a": 2}'),
             (6, '2024-01-03T00:00:00Z', '2024-02-01', 'true'),
             (7, '2024-01-03 00:00:00+02:00', '2025-01-01', '{"b": [1]}'),
             (8, '2023-12-31 23:59:59.999999', '2023-12-31', '{ "c" :3 }'),
             (9, '2023-12-30', '2023-12-30', 'null');
           CREATE TABLE plain (id INTEGER, at DATETIME NOT NULL PRIMARY KEY);
           INSERT INTO plain VALUES (1, '2024-01-01T00:00:00'), (2, '2024-01-01T00:00:01'),
             (3, '2024-01-01T00:00:02'), (4, '2024-01-01T00:00:03'), (5, '2024-01-01T00:00:04'),
             (6, '2024-01-01T00:00:05'), (7, '2024-01-01T00:00:06');"#,
    )
    .await;
    let source = Source::connect(&url, 2).await.unwrap();
    let all: Vec<i64> = (1..=9).collect();
    assert_reads_all(&source, Relation::Table("events"), "at", &all).await;
    assert_reads_all(&source, Relation::Table("events"), "day", &all).await;
    assert_reads_all(&source, Relation::Table("events"), "doc", &all).await;
    assert_reads_all(
        &source,
        Relation::Table("plain"),
        "at",
        &(1..=7).collect::<Vec<_>>(),
    )
    .await;
    let q = "SELECT id, at FROM events";
    assert_reads_all(&source, Relation::Query(q), "at", &all).await;

    // One instant written twice, two ways: the cursor cannot tell the rows
    // apart, so paging stops with an error instead of skipping one.
    let (_dir2, url2) = sqlite_file(
        "CREATE TABLE twice (id INTEGER, at DATETIME NOT NULL PRIMARY KEY);
         INSERT INTO twice VALUES (1, '2024-01-02 03:04:05'), (2, '2024-01-02T03:04:05'), (3, '2024-01-03 00:00:00');",
    )
    .await;
    let twice = Source::connect(&url2, 1).await.unwrap();
    let from = Relation::Table("twice");
    let shape = twice.describe(&from).await.unwrap();
    let q = twice.page_query(&from, &shape, &[], 1).unwrap();
    let first = twice.read_page(&q, None).await.unwrap();
    let err = twice
        .read_page(&q, Some(&q.key_of(&first[0])))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("as two texts"), "{err}");

    // The key values are decoded, not text.
    let from = Relation::Table("plain");
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 3).unwrap();
    let page = source.read_page(&q, None).await.unwrap();
    assert!(matches!(q.key_of(&page[2])[0], SqlValue::Timestamp(_)));
}

#[tokio::test]
async fn postgres_timestamptz_date_and_uuid_keys() {
    let sql = "CREATE TABLE {s}.ev (id int, at timestamptz PRIMARY KEY, day date UNIQUE NOT NULL,
           u uuid UNIQUE NOT NULL, ts timestamp UNIQUE NOT NULL);
         INSERT INTO {s}.ev
           SELECT i, '2024-01-01 00:00:00+00'::timestamptz + i * interval '1 hour 0.000123 seconds',
             date '2024-01-01' + i, md5(i::text)::uuid,
             timestamp '2024-01-01 00:00:00' + i * interval '1.5 seconds'
           FROM generate_series(1, 8) AS i;";
    let (name, _guard) = pg_schema("tk_pg", sql).await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let table = format!("{name}.ev");
    let all: Vec<i64> = (1..=8).collect();
    for key in ["at", "day", "u", "ts"] {
        assert_reads_all(&source, Relation::Table(&table), key, &all).await;
    }
}

#[tokio::test]
async fn mysql_datetime_and_binary_keys() {
    let sql =         "CREATE TABLE {d}.ev (id INT, at DATETIME(6) PRIMARY KEY, day DATE NOT NULL UNIQUE,
           b BINARY(16) NOT NULL UNIQUE, at0 DATETIME NOT NULL UNIQUE, tz TIMESTAMP(3) NOT NULL UNIQUE);
         INSERT INTO {d}.ev VALUES
           (1, '2024-01-01 00:00:00.000001', '2024-01-01', UNHEX('00000000000000000000000000000001'), '2024-01-01 00:00:01', '2024-01-01 00:00:00.001'),
           (2, '2024-01-01 00:00:00.5', '2024-01-02', UNHEX('0000000000000000000000000000ff00'), '2024-01-01 00:00:02', '2024-01-01 00:00:00.002'),
           (3, '2024-01-01 00:00:01', '2024-01-03', UNHEX('00ff0000000000000000000000000000'), '2024-01-01 00:00:03', '2024-01-01 00:00:01'),
           (4, '2024-01-02 00:00:00', '2024-02-01', UNHEX('ff000000000000000000000000000000'), '2024-01-01 00:00:04', '2024-01-01 00:00:02'),
           (5, '2024-02-01 10:00:00', '2024-03-01', UNHEX('7f000000000000000000000000000000'), '2024-01-01 00:00:05', '2024-01-01 00:00:03'),
           (6, '2025-01-01 00:00:00', '2025-01-01', UNHEX('80000000000000000000000000000000'), '2024-01-01 00:00:06', '2024-01-01 00:00:04'),
           (7, '2025-01-01 00:00:00.999999', '2026-01-01', UNHEX('00000000000000000000000000000000'), '2024-01-01 00:00:07', '2024-01-01 00:00:05');";
    let (name, _guard) = my_database("tk_my", sql).await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    let table = format!("{name}.ev");
    let all: Vec<i64> = (1..=7).collect();
    for key in ["at", "day", "b", "at0", "tz"] {
        assert_reads_all(&source, Relation::Table(&table), key, &all).await;
    }
}
