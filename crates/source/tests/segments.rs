//! Segmented reads against real PostgreSQL, MariaDB and SQLite: a key range
//! cut into segments and read concurrently returns exactly the rows of one
//! sequential read, none twice and none skipped, for integer keys with gaps,
//! text keys and composite keys.

mod common;

use std::collections::HashSet;

use common::{my_database, mysql_url, pg_schema, pg_url};
use sql2ddb_core::{Row, SqlValue};
use sql2ddb_source::{default_read_parallelism, PageQuery, Relation, Segment, Source};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::Connection;

const PAGE: usize = 5000;

/// 200,000 integer keys, negative and positive, with small gaps everywhere
/// (`g*10 + g%7`) and one gap of 100,000 keys in the middle.
const INT_ROWS: usize = 200_000;
const TEXT_ROWS: usize = 30_000;
const PAIR_ROWS: usize = 20_000;

/// Reads one segment to its end with its own keyset cursor.
async fn read_segment(source: &Source, q: &PageQuery, seg: &Segment) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut after = seg.after.clone();
    loop {
        let page = source
            .read_range(q, after.as_deref(), seg.until.as_deref())
            .await
            .unwrap();
        assert!(page.len() <= q.page_size());
        let Some(last) = page.last() else { break };
        after = Some(q.key_of(last));
        let done = page.len() < q.page_size();
        rows.extend(page);
        if done {
            break;
        }
    }
    rows
}

/// Identity of a row's key, for set comparisons (`SqlValue` is not `Hash`).
fn key_id(q: &PageQuery, row: &Row) -> String {
    format!("{:?}", q.key_of(row))
}

/// Reads `table` with 1 segment and with `n` concurrent segments and checks
/// that both reads return the same `expected` rows, each once; returns the
/// segments of the `n`-way split and how many rows each held.
async fn split_and_compare(
    source: &Source,
    table: &str,
    n: u32,
    expected: usize,
) -> Vec<(Segment, usize)> {
    let from = Relation::Table(table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], PAGE).unwrap();
    assert_eq!(source.count(&from).await.unwrap(), expected as u64);

    let whole = source.split(&q, 1).await.unwrap();
    assert_eq!(
        whole,
        vec![Segment {
            index: 0,
            after: None,
            until: None
        }]
    );
    let sequential = read_segment(source, &q, &whole[0]).await;
    assert_eq!(sequential.len(), expected, "{table}: one segment");

    let segments = source.split(&q, n).await.unwrap();
    assert!(segments.len() <= n as usize);
    assert_eq!(segments.first().unwrap().after, None);
    assert_eq!(segments.last().unwrap().until, None);
    for (i, pair) in segments.windows(2).enumerate() {
        assert_eq!(pair[0].index, i as u32);
        assert_eq!(pair[0].until, pair[1].after, "{table}: segments must touch");
    }
    let parts =
        futures::future::join_all(segments.iter().map(|s| read_segment(source, &q, s))).await;

    let mut seen = HashSet::new();
    let mut parallel: Vec<(String, Row)> = Vec::new();
    for rows in &parts {
        for row in rows {
            let id = key_id(&q, row);
            assert!(seen.insert(id.clone()), "{table}: key {id} read twice");
            parallel.push((id, row.clone()));
        }
    }
    assert_eq!(parallel.len(), expected, "{table}: {n} segments");
    let mut sequential: Vec<(String, Row)> = sequential
        .into_iter()
        .map(|r| (key_id(&q, &r), r))
        .collect();
    sequential.sort_by(|a, b| a.0.cmp(&b.0));
    parallel.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(sequential == parallel, "{table}: different rows");
    segments
        .into_iter()
        .zip(parts.iter().map(Vec::len))
        .collect()
}

/// Like [`split_and_compare`], and every one of the `n` segments holds rows.
async fn same_rows_split(source: &Source, table: &str, n: u32, expected: usize) -> Vec<Segment> {
    let split = split_and_compare(source, table, n, expected).await;
    assert_eq!(split.len(), n as usize, "{table}: {split:?}");
    for (seg, rows) in &split {
        assert!(*rows > 0, "{table}: segment {seg:?} is empty");
    }
    split.into_iter().map(|(s, _)| s).collect()
}

/// Splits of small and empty tables: fewer segments than asked.
async fn small_splits(source: &Source, empty: &str, three_text: &str, three_ints: &str) {
    for (table, want) in [(empty, 1), (three_text, 3), (three_ints, 3)] {
        let from = Relation::Table(table);
        let shape = source.describe(&from).await.unwrap();
        let q = source.page_query(&from, &shape, &[], PAGE).unwrap();
        let segments = source.split(&q, 8).await.unwrap();
        assert_eq!(segments.len(), want, "{table}: {segments:?}");
        let mut total = 0;
        for s in &segments {
            let rows = read_segment(source, &q, s).await;
            if want > 1 {
                assert_eq!(rows.len(), 1, "{table}: one row per segment");
            }
            total += rows.len();
        }
        assert_eq!(total, if want == 1 { 0 } else { 3 });
    }
}

/// Integer keys are cut into ranges of equal width between the least key
/// (`1*10 + 1 - 1000000`) and the greatest (`210000*10 + 0 - 1000000`).
fn assert_int_bounds(segments: &[Segment]) {
    let (lo, hi) = (-999_989i64, 1_100_000i64);
    let width = hi - lo + 1;
    for (i, s) in segments[..7].iter().enumerate() {
        let bound = lo + width * (i as i64 + 1) / 8 - 1;
        assert_eq!(s.until, Some(vec![SqlValue::Int(bound)]), "segment {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_segments_cover_every_row_once() {
    let setup = r#"
        CREATE TABLE {s}.ints (id bigint PRIMARY KEY, v text);
        INSERT INTO {s}.ints SELECT g * 10 + g % 7 - 1000000, 'v' || g
          FROM generate_series(1, 210000) g WHERE g NOT BETWEEN 100001 AND 110000;
        CREATE TABLE {s}.texts (k varchar(40) PRIMARY KEY, n int);
        INSERT INTO {s}.texts SELECT (CASE g % 3 WHEN 0 THEN 'zoë-' WHEN 1 THEN 'Ana-' ELSE 'émile-' END)
          || ((g * 7919) % 1000003)::text, g FROM generate_series(1, 30000) g;
        CREATE TABLE {s}.pairs (grp text, n int, v int, PRIMARY KEY (grp, n));
        INSERT INTO {s}.pairs SELECT 'g' || (g % 37), g, g FROM generate_series(1, 20000) g;
        CREATE TABLE {s}.empty (k text PRIMARY KEY);
        CREATE TABLE {s}.three (k text PRIMARY KEY);
        INSERT INTO {s}.three VALUES ('a'), ('b'), ('c');
        CREATE TABLE {s}.three_ints (id int PRIMARY KEY);
        INSERT INTO {s}.three_ints VALUES (1), (2), (3);
    "#;
    let (name, _guard) = pg_schema("seg_pg", setup).await;
    let source = Source::connect(pg_url(), 8).await.unwrap();
    let t = |x: &str| format!("{name}.{x}");

    let ints = same_rows_split(&source, &t("ints"), 8, INT_ROWS).await;
    assert_int_bounds(&ints);
    same_rows_split(&source, &t("texts"), 8, TEXT_ROWS).await;
    let pairs = same_rows_split(&source, &t("pairs"), 8, PAIR_ROWS).await;
    assert!(matches!(
        pairs[0].until.as_deref(),
        Some([SqlValue::Text(_), SqlValue::Int(_)])
    ));
    small_splits(&source, &t("empty"), &t("three"), &t("three_ints")).await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_segments_cover_every_row_once() {
    let setup = r#"
        CREATE TABLE {d}.ints (id BIGINT PRIMARY KEY, v VARCHAR(20));
        INSERT INTO {d}.ints SELECT CAST(seq * 10 + seq % 7 AS SIGNED) - 1000000, CONCAT('v', seq)
          FROM test.seq_1_to_210000 WHERE seq NOT BETWEEN 100001 AND 110000;
        CREATE TABLE {d}.texts (k VARCHAR(40) PRIMARY KEY, n INT) CHARACTER SET utf8mb4;
        INSERT INTO {d}.texts SELECT CONCAT(ELT(seq % 3 + 1, 'zoë-', 'Ana-', 'émile-'),
          (seq * 7919) % 1000003), seq FROM test.seq_1_to_30000;
        CREATE TABLE {d}.latin (k VARCHAR(40) PRIMARY KEY, n INT) CHARACTER SET latin1;
        INSERT INTO {d}.latin SELECT k, n FROM {d}.texts;
        CREATE TABLE {d}.pairs (grp VARCHAR(10), n INT, v INT, PRIMARY KEY (grp, n));
        INSERT INTO {d}.pairs SELECT CONCAT('g', seq % 37), seq, seq FROM test.seq_1_to_20000;
        CREATE TABLE {d}.unsigned (id BIGINT UNSIGNED PRIMARY KEY);
        INSERT INTO {d}.unsigned SELECT seq FROM test.seq_0_to_999;
        INSERT INTO {d}.unsigned SELECT 18446744073709551615 - seq FROM test.seq_0_to_999;
        CREATE TABLE {d}.empty (k VARCHAR(5) PRIMARY KEY);
        CREATE TABLE {d}.three (k VARCHAR(5) PRIMARY KEY);
        INSERT INTO {d}.three VALUES ('a'), ('b'), ('c');
        CREATE TABLE {d}.three_ints (id INT PRIMARY KEY);
        INSERT INTO {d}.three_ints VALUES (1), (2), (3);
    "#;
    let (name, _guard) = my_database("seg_my", setup).await;
    let source = Source::connect(mysql_url(), 8).await.unwrap();
    let t = |x: &str| format!("{name}.{x}");

    let ints = same_rows_split(&source, &t("ints"), 8, INT_ROWS).await;
    assert_int_bounds(&ints);
    same_rows_split(&source, &t("texts"), 8, TEXT_ROWS).await;
    same_rows_split(&source, &t("latin"), 8, TEXT_ROWS).await;
    same_rows_split(&source, &t("pairs"), 8, PAIR_ROWS).await;
    // The key range spans all of BIGINT UNSIGNED: bounds above i64::MAX bind as unsigned.
    let unsigned = split_and_compare(&source, &t("unsigned"), 4, 2000).await;
    let counts: Vec<usize> = unsigned.iter().map(|(_, n)| *n).collect();
    assert_eq!(counts, [1000, 0, 0, 1000]);
    assert_eq!(
        unsigned[1].0.until,
        Some(vec![SqlValue::Int(i64::MAX)]),
        "half of 0..=u64::MAX"
    );
    assert_eq!(
        unsigned[2].0.until,
        Some(vec![SqlValue::UInt((3u64 << 62) - 1)]),
        "three quarters of 0..=u64::MAX"
    );
    small_splits(&source, &t("empty"), &t("three"), &t("three_ints")).await;
    source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_segments_cover_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segments.db");
    let opts = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    sqlx::raw_sql(
        r#"
        CREATE TABLE ints (id INTEGER PRIMARY KEY, v TEXT);
        WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 210000)
        INSERT INTO ints SELECT g * 10 + g % 7 - 1000000, 'v' || g FROM s
          WHERE g NOT BETWEEN 100001 AND 110000;
        CREATE TABLE texts (k TEXT PRIMARY KEY, n INTEGER);
        WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 30000)
        INSERT INTO texts SELECT (CASE g % 3 WHEN 0 THEN 'zoë-' WHEN 1 THEN 'Ana-' ELSE 'émile-' END)
          || ((g * 7919) % 1000003), g FROM s;
        CREATE TABLE pairs (grp TEXT, n INTEGER, v INTEGER, PRIMARY KEY (grp, n));
        WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 20000)
        INSERT INTO pairs SELECT 'g' || (g % 37), g, g FROM s;
        CREATE TABLE mixed (k INTEGER PRIMARY KEY NOT NULL, v TEXT) WITHOUT ROWID;
        INSERT INTO mixed VALUES (1, 'a'), (2, 'b'), ('x', 'c'), ('y', 'd');
        CREATE TABLE empty (k TEXT PRIMARY KEY);
        CREATE TABLE three (k TEXT PRIMARY KEY);
        INSERT INTO three VALUES ('a'), ('b'), ('c');
        CREATE TABLE three_ints (id INTEGER PRIMARY KEY);
        INSERT INTO three_ints VALUES (1), (2), (3);
        "#,
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let source = Source::connect(&format!("sqlite://{}", path.display()), 8)
        .await
        .unwrap();

    let ints = same_rows_split(&source, "ints", 8, INT_ROWS).await;
    assert_int_bounds(&ints);
    same_rows_split(&source, "texts", 8, TEXT_ROWS).await;
    same_rows_split(&source, "pairs", 8, PAIR_ROWS).await;
    // An INTEGER column holding text too: split by rows, not by an integer range.
    let mixed = same_rows_split(&source, "mixed", 4, 4).await;
    assert_eq!(mixed[2].after, Some(vec![SqlValue::Int(2)]));
    assert_eq!(mixed[3].after, Some(vec![SqlValue::Text("x".into())]));
    small_splits(&source, "empty", "three", "three_ints").await;
    source.close().await;
}

#[test]
fn default_parallelism_grows_with_the_table() {
    assert_eq!(default_read_parallelism(0), 1);
    assert_eq!(default_read_parallelism(99_999), 1);
    assert_eq!(default_read_parallelism(100_000), 1);
    assert_eq!(default_read_parallelism(100_001), 2);
    assert_eq!(default_read_parallelism(250_000), 3);
    assert_eq!(default_read_parallelism(1_000_000), 8);
    assert_eq!(default_read_parallelism(u64::MAX), 8);
}
