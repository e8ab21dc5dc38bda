//! Counting a key range against real PostgreSQL, MariaDB and SQLite: for each
//! of three segments, `count_range` equals the rows `read_range` returns page
//! by page over it (also from every cursor inside it), and the segments' counts
//! add up to `count`; for integer keys, composite text keys and SQLite
//! DATETIME keys stored in several renderings.

mod common;

use common::{my_database, mysql_url, pg_schema, pg_url, sqlite_file};
use sql2ddb_core::SqlValue;
use sql2ddb_source::{PageQuery, Relation, Segment, Source};

/// Small pages, so each segment takes several.
const PAGE: usize = 7;

/// Two tables, `nums` (integer keys with gaps: `g*10 + g%7` for `g` in
/// -60..60) and `pairs` (composite text keys: 9 groups of unevenly many
/// members), each table name preceded by `prefix`.
fn tables(prefix: &str) -> String {
    let nums: Vec<String> = (-60i64..60)
        .map(|g| format!("({}, 'v{g}')", g * 10 + g.rem_euclid(7)))
        .collect();
    let pairs: Vec<String> = (0..150)
        .map(|g| format!("('grp{}', 'm{:03}', {g})", g % 9, (g * 37) % 1000))
        .collect();
    format!(
        "CREATE TABLE {prefix}nums (id BIGINT PRIMARY KEY, v TEXT);
         INSERT INTO {prefix}nums VALUES {};
         CREATE TABLE {prefix}pairs (a VARCHAR(20), b VARCHAR(20), n INT, PRIMARY KEY (a, b));
         INSERT INTO {prefix}pairs VALUES {};",
        nums.join(", "),
        pairs.join(", ")
    )
}

/// Reads `seg` page by page; before each page, the count of what is left of
/// the segment must equal what the pages from there return. Returns the rows
/// read.
async fn read_and_count(source: &Source, q: &PageQuery, seg: &Segment) -> u64 {
    let until = seg.until.as_deref();
    let mut after = seg.after.clone();
    // Per page read: the count from its cursor, and the rows it returned.
    let mut pages: Vec<(u64, u64)> = Vec::new();
    loop {
        let counted = source
            .count_range(q, after.as_deref(), until)
            .await
            .unwrap();
        let page = source.read_range(q, after.as_deref(), until).await.unwrap();
        pages.push((counted, page.len() as u64));
        let Some(last) = page.last() else { break };
        after = Some(q.key_of(last));
    }
    for (i, (counted, _)) in pages.iter().enumerate() {
        let left: u64 = pages[i..].iter().map(|(_, rows)| rows).sum();
        assert_eq!(*counted, left, "{seg:?}: count before page {i}");
    }
    pages.iter().map(|(_, rows)| rows).sum()
}

/// Splits `from` (read by `key`, or its primary key) into 3 segments and
/// checks every segment's count against its pages, and their sum against
/// `count`, which must be `expected`.
async fn assert_counts(source: &Source, from: Relation<'_>, key: &[&str], expected: u64) {
    let shape = source.describe(&from).await.unwrap();
    let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
    let q = source.page_query(&from, &shape, &key, PAGE).unwrap();
    let total = source.count(&from).await.unwrap();
    assert_eq!(total, expected, "{from:?}");
    assert_eq!(source.count_range(&q, None, None).await.unwrap(), total);

    let segments = source.split(&q, 3).await.unwrap();
    assert_eq!(segments.len(), 3, "{from:?}: {segments:?}");
    let mut sum = 0;
    for seg in &segments {
        let counted = source
            .count_range(&q, seg.after.as_deref(), seg.until.as_deref())
            .await
            .unwrap();
        let read = read_and_count(source, &q, seg).await;
        assert_eq!(counted, read, "{from:?}: segment {seg:?}");
        assert!(read > 0, "{from:?}: segment {seg:?} is empty");
        sum += counted;
    }
    assert_eq!(sum, total, "{from:?}: segments' counts");
}

/// [`assert_counts`] for the two tables of [`tables`], each named
/// `{prefix}nums` and `{prefix}pairs`.
async fn assert_table_counts(source: &Source, prefix: &str) {
    let nums = format!("{prefix}nums");
    let pairs = format!("{prefix}pairs");
    assert_counts(source, Relation::Table(&nums), &[], 120).await;
    assert_counts(source, Relation::Table(&pairs), &[], 150).await;
}

#[tokio::test]
async fn postgres_segment_counts_match_their_pages() {
    let (schema, _guard) = pg_schema("count_pg", &tables("{s}.")).await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    assert_table_counts(&source, &format!("{schema}.")).await;
    let query = format!("SELECT a, b, n FROM \"{schema}\".pairs");
    assert_counts(&source, Relation::Query(&query), &["a", "b"], 150).await;
    source.close().await;
}

#[tokio::test]
async fn mariadb_segment_counts_match_their_pages() {
    let (db, _guard) = my_database("count_my", &tables("{d}.")).await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    assert_table_counts(&source, &format!("{db}.")).await;
    source.close().await;
}

#[tokio::test]
async fn sqlite_segment_counts_match_their_pages() {
    // `at` holds one instant per row in three renderings, whose text order
    // (which SQLite pages by) is not their time order: the bounds must be
    // bound as the stored text, in counts as in pages.
    let events: Vec<String> = (0..90)
        .map(|i| {
            let (m, s) = (i / 60, i % 60);
            match i % 3 {
                0 => format!("({i}, '2024-01-01 00:{m:02}:{s:02}')"),
                1 => format!("({i}, '2024-01-01T00:{m:02}:{s:02}')"),
                _ => format!("({i}, '2024-01-01 00:{m:02}:{s:02}.500')"),
            }
        })
        .collect();
    let setup = format!(
        "{} CREATE TABLE events (id INTEGER, at DATETIME NOT NULL PRIMARY KEY);
         INSERT INTO events VALUES {};",
        tables(""),
        events.join(", ")
    );
    let (_dir, url) = sqlite_file(&setup).await;
    let source = Source::connect(&url, 2).await.unwrap();
    assert_table_counts(&source, "").await;
    assert_counts(&source, Relation::Table("events"), &[], 90).await;

    // The bounds are decoded timestamps, not their text.
    let from = Relation::Table("events");
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], PAGE).unwrap();
    let segments = source.split(&q, 3).await.unwrap();
    assert!(matches!(
        segments[0].until.as_deref(),
        Some([SqlValue::Timestamp(_)])
    ));
    source.close().await;
}
