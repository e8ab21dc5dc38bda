//! SQLite files: storage classes, declared-type hints, keyset paging, errors.

mod common;

use common::{read_all, sqlite_file, text};
use sql2ddb_core::SqlValue;
use sql2ddb_source::{Dialect, Relation, Source, SourceErrorKind};

// Long by design: one table of every storage class and hint, checked value by value.
#[tokio::test]
async fn decodes_storage_classes_with_hints() {
    let (_dir, url) = sqlite_file(
        r#"CREATE TABLE things (id INTEGER PRIMARY KEY, n INTEGER, r REAL, t TEXT, b BLOB,
             flag BOOLEAN, price DECIMAL(10,2), doc JSON, loose, created DATETIME);
           INSERT INTO things VALUES (1, 9223372036854775807, 0.1, 'héllo', x'00ff', 1, 'NaN',
             '{"big": 123456789012345678901234567890.5, "l": [1, null]}', 'x', '2024-01-02 03:04:05');
           INSERT INTO things VALUES (2, NULL, -2.5, '', x'', 0, '12.30', 'not json', 3.5, NULL);
           INSERT INTO things VALUES (3, -1, NULL, NULL, NULL, 2, 1.5, '[]', x'01', 1700000000);"#,
    )
    .await;
    let source = Source::connect(&url, 2).await.unwrap();
    assert_eq!(source.dialect(), Dialect::Sqlite);
    let from = Relation::Table("things");
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(shape.primary_key, vec!["id"]);
    assert_eq!(shape.columns[6].sql_type, "DECIMAL(10,2)");
    assert_eq!(shape.columns[8].sql_type, "");
    assert_eq!(source.count(&from).await.unwrap(), 3);
    let q = source.page_query(&from, &shape, &[], 2).unwrap();
    let rows = read_all(&source, &q).await;
    let big: serde_json::Value =
        serde_json::from_str(r#"{"big": 123456789012345678901234567890.5, "l": [1, null]}"#)
            .unwrap();
    assert_eq!(
        rows[0],
        vec![
            SqlValue::Int(1),
            SqlValue::Int(i64::MAX),
            SqlValue::Float(0.1),
            text("héllo"),
            SqlValue::Bytes(vec![0, 255]),
            SqlValue::Bool(true),
            // Text that is no number literal keeps its text; the mapping rejects it.
            SqlValue::Decimal("NaN".into()),
            SqlValue::Json(big),
            text("x"),
            // ISO text in a DATETIME column is a timestamp.
            SqlValue::Timestamp(
                chrono::NaiveDate::from_ymd_opt(2024, 1, 2)
                    .unwrap()
                    .and_hms_opt(3, 4, 5)
                    .unwrap()
            ),
        ]
    );
    let SqlValue::Invalid(reason) = &rows[1][7] else {
        panic!("{:?}", rows[1][7])
    };
    assert!(reason.starts_with("invalid JSON"), "{reason}");
    assert_eq!(
        rows[1],
        vec![
            SqlValue::Int(2),
            SqlValue::Null,
            SqlValue::Float(-2.5),
            text(""),
            SqlValue::Bytes(vec![]),
            SqlValue::Bool(false),
            // NUMERIC affinity stored '12.30' as REAL: the storage class decides.
            SqlValue::Float(12.3),
            rows[1][7].clone(),
            SqlValue::Float(3.5),
            SqlValue::Null,
        ]
    );
    assert_eq!(
        rows[2],
        vec![
            SqlValue::Int(3),
            SqlValue::Int(-1),
            SqlValue::Null,
            SqlValue::Null,
            SqlValue::Null,
            // Only 0 and 1 are booleans.
            SqlValue::Int(2),
            SqlValue::Float(1.5),
            SqlValue::Json(serde_json::json!([])),
            SqlValue::Bytes(vec![1]),
            SqlValue::Int(1_700_000_000),
        ]
    );
}

#[tokio::test]
async fn pages_integer_composite_text_keys_and_queries() {
    let (_dir, url) = sqlite_file(
        "CREATE TABLE big (id INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 10000)
           INSERT INTO big SELECT i * 3 + i % 2, 'v' || i FROM s;
         CREATE TABLE comp (g TEXT, n INTEGER, PRIMARY KEY (g, n)) WITHOUT ROWID;
         WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 99)
           INSERT INTO comp SELECT char(97 + i / 10), i % 10 FROM s;",
    )
    .await;
    let source = Source::connect(&url, 2).await.unwrap();
    let from = Relation::Table("main.big");
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 333).unwrap();
    let rows = read_all(&source, &q).await;
    let ids: Vec<SqlValue> = rows.iter().map(|r| r[0].clone()).collect();
    let expected: Vec<SqlValue> = (1..=10000).map(|i| SqlValue::Int(i * 3 + i % 2)).collect();
    assert!(ids == expected, "ids out of order or duplicated");

    let from = Relation::Table("comp");
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(shape.primary_key, vec!["g", "n"]);
    let q = source.page_query(&from, &shape, &[], 7).unwrap();
    let rows = read_all(&source, &q).await;
    let expected: Vec<Vec<SqlValue>> = (0..100)
        .map(|i| {
            vec![
                text(&((b'a' + i / 10) as char).to_string()),
                SqlValue::Int(i64::from(i % 10)),
            ]
        })
        .collect();
    assert_eq!(rows, expected);

    // A text key and a query entity.
    let sql = "SELECT v, id FROM big WHERE id < 100";
    let from = Relation::Query(sql);
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(
        shape
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["v", "id"]
    );
    assert!(source.page_query(&from, &shape, &[], 5).is_err());
    let q = source
        .page_query(&from, &shape, &["v".to_string()], 5)
        .unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 32);
    let keys: Vec<String> = rows.iter().map(|r| r[0].to_text().unwrap()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(source.count(&from).await.unwrap(), 32);
}

#[tokio::test]
async fn missing_files_and_tables_are_clear_errors() {
    let err = Source::connect("sqlite:/nonexistent/dir/x.db", 1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::NotFound);
    assert!(err.to_string().contains("/nonexistent/dir/x.db"), "{err}");

    let (_dir, url) = sqlite_file("CREATE TABLE t (id INTEGER PRIMARY KEY);").await;
    let source = Source::connect(&url, 1).await.unwrap();
    let err = source.describe(&Relation::Table("nope")).await.unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::NotFound);
    assert!(err.to_string().contains("nope"), "{err}");
    // Read-only: writes fail.
    let path = url.trim_start_matches("sqlite://").to_string();
    let source2 = Source::connect(&format!("sqlite:{path}"), 1).await.unwrap();
    assert_eq!(source2.count(&Relation::Table("t")).await.unwrap(), 0);
}
