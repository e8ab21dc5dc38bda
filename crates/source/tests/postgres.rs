//! Against the real PostgreSQL server: every type decoded exactly, keyset
//! paging, query entities, errors.

mod common;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use common::{pg_schema, pg_url, read_all, text};
use sql2ddb_core::SqlValue;
use sql2ddb_source::{Dialect, Relation, Source, SourceErrorKind};

fn dec(s: &str) -> SqlValue {
    SqlValue::Decimal(s.to_string())
}

fn ts(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").unwrap()
}

// Long by design: one row of every PostgreSQL type, checked value by value.
#[tokio::test]
async fn decodes_every_type_exactly() {
    let (s, _guard) = pg_schema(
        "src_pg",
        "CREATE TYPE {s}.mood AS ENUM ('sad', 'happy');
         CREATE TABLE {s}.all_types (
           id int PRIMARY KEY, i2 smallint, i8 bigint, n6020 numeric(60,20), nbig numeric, nnan numeric,
           r real, d double precision, dnan double precision, dinf double precision,
           t text, vc varchar(10), c5 char(5), b boolean, by bytea,
           dt date, tm time, tsp timestamp, tz timestamptz, u uuid, js jsonb, j json,
           ia int[], ta text[], na numeric[], da date[], tza timestamptz[], m2 int[], mood {s}.mood, iv interval);
         INSERT INTO {s}.all_types VALUES (
           1, -32768, 9223372036854775807, 12.34, 12345678901234567890123456789012345678901, 'NaN',
           0.1, 0.1, 'NaN', '-Infinity',
           'héllo', 'v', 'ab', true, '\\x00ff10',
           '2024-02-29', '13:14:15.5', '2024-01-02 03:04:05.123456', '2024-03-10 12:34:56.789+05:30',
           'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
           '{\"a\": {\"b\": [1, 2.50, 123456789012345678901234567890.123]}, \"s\": \"x\"}', '[1.0, null]',
           '{1,NULL,3}', '{\"a\",NULL,\"b c\"}', '{1.50,NaN}', '{2024-01-01,infinity}',
           '{\"2024-01-01 00:00:00+02\"}', '{{1,2},{3,4}}', 'happy', '1 day 2 hours');
         INSERT INTO {s}.all_types (id, dt, tsp, tz) VALUES (2, 'infinity', '-infinity', 'infinity');",
    )
    .await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    assert_eq!(source.dialect(), Dialect::Postgres);
    let table = format!("{s}.all_types");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(shape.primary_key, vec!["id"]);
    let types: Vec<&str> = shape.columns.iter().map(|c| c.sql_type.as_str()).collect();
    assert_eq!(
        &types[..5],
        &["integer", "smallint", "bigint", "numeric(60,20)", "numeric"]
    );
    assert_eq!(shape.columns[10].name, "t");
    let q = source.page_query(&from, &shape, &[], 10).unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 2);
    let r = &rows[0];
    let col = |name: &str| &r[shape.columns.iter().position(|c| c.name == name).unwrap()];

    assert_eq!(col("id"), &SqlValue::Int(1));
    assert_eq!(col("i2"), &SqlValue::Int(-32768));
    assert_eq!(col("i8"), &SqlValue::Int(i64::MAX));
    assert_eq!(col("n6020"), &dec("12.34000000000000000000"));
    assert_eq!(
        col("nbig"),
        &dec("12345678901234567890123456789012345678901")
    );
    assert_eq!(col("nnan"), &dec("NaN"));
    assert_eq!(col("r"), &SqlValue::Float(0.1));
    assert_eq!(col("d"), &SqlValue::Float(0.1));
    assert!(matches!(col("dnan"), SqlValue::Float(f) if f.is_nan()));
    assert_eq!(col("dinf"), &SqlValue::Float(f64::NEG_INFINITY));
    assert_eq!(col("t"), &text("héllo"));
    assert_eq!(col("vc"), &text("v"));
    assert_eq!(col("c5"), &text("ab   "));
    assert_eq!(col("b"), &SqlValue::Bool(true));
    assert_eq!(col("by"), &SqlValue::Bytes(vec![0, 255, 16]));
    assert_eq!(
        col("dt"),
        &SqlValue::Date(NaiveDate::from_ymd_opt(2024, 2, 29).unwrap())
    );
    assert_eq!(
        col("tm"),
        &SqlValue::Time(NaiveTime::from_hms_milli_opt(13, 14, 15, 500).unwrap())
    );
    assert_eq!(
        col("tsp"),
        &SqlValue::Timestamp(ts("2024-01-02 03:04:05.123456"))
    );
    assert_eq!(
        col("tz"),
        &SqlValue::TimestampTz(
            Utc.with_ymd_and_hms(2024, 3, 10, 7, 4, 56).unwrap()
                + chrono::TimeDelta::milliseconds(789)
        )
    );
    assert_eq!(col("u"), &text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
    let expected: serde_json::Value = serde_json::from_str(
        r#"{"a": {"b": [1, 2.50, 123456789012345678901234567890.123]}, "s": "x"}"#,
    )
    .unwrap();
    assert_eq!(col("js"), &SqlValue::Json(expected));
    let SqlValue::Json(js) = col("js") else {
        unreachable!()
    };
    assert_eq!(
        js["a"]["b"][2].to_string(),
        "123456789012345678901234567890.123"
    );
    assert_eq!(js["a"]["b"][1].to_string(), "2.50");
    assert_eq!(
        col("j"),
        &SqlValue::Json(serde_json::from_str("[1.0, null]").unwrap())
    );
    assert_eq!(
        col("ia"),
        &SqlValue::Array(vec![SqlValue::Int(1), SqlValue::Null, SqlValue::Int(3)])
    );
    assert_eq!(
        col("ta"),
        &SqlValue::Array(vec![text("a"), SqlValue::Null, text("b c")])
    );
    assert_eq!(col("na"), &SqlValue::Array(vec![dec("1.50"), dec("NaN")]));
    assert_eq!(
        col("da"),
        &SqlValue::Array(vec![
            SqlValue::Date(NaiveDate::from_ymd_opt(2024, 1, 1).unwrap()),
            SqlValue::Invalid("infinity date".into())
        ])
    );
    assert_eq!(
        col("tza"),
        &SqlValue::Array(vec![SqlValue::TimestampTz(
            Utc.with_ymd_and_hms(2023, 12, 31, 22, 0, 0).unwrap()
        )])
    );
    assert_eq!(
        col("m2"),
        &SqlValue::Array(vec![
            SqlValue::Array(vec![SqlValue::Int(1), SqlValue::Int(2)]),
            SqlValue::Array(vec![SqlValue::Int(3), SqlValue::Int(4)])
        ])
    );
    assert_eq!(col("mood"), &text("happy"));
    assert_eq!(col("iv"), &text("1 day 02:00:00"));

    // The second row: NULLs and infinities.
    let r2 = &rows[1];
    let col2 = |name: &str| &r2[shape.columns.iter().position(|c| c.name == name).unwrap()];
    assert_eq!(col2("i2"), &SqlValue::Null);
    assert_eq!(col2("ia"), &SqlValue::Null);
    assert_eq!(col2("dt"), &SqlValue::Invalid("infinity date".into()));
    assert_eq!(col2("tsp"), &SqlValue::Invalid("infinity timestamp".into()));
    assert_eq!(col2("tz"), &SqlValue::Invalid("infinity timestamp".into()));
    source.close().await;
}

#[tokio::test]
async fn pages_a_large_table_with_gaps_exactly_once() {
    let (s, _guard) = pg_schema(
        "src_pg",
        "CREATE TABLE {s}.big (id bigint PRIMARY KEY, v text);
         INSERT INTO {s}.big SELECT i * 3 + i % 7, 'v' || i FROM generate_series(1, 10000) AS i;",
    )
    .await;
    let source = Source::connect(pg_url(), 4).await.unwrap();
    let table = format!("{s}.big");
    let from = Relation::Table(&table);
    assert_eq!(source.count(&from).await.unwrap(), 10_000);
    let shape = source.describe(&from).await.unwrap();
    let q = source
        .page_query(&from, &shape, &["id".to_string()], 333)
        .unwrap();
    assert!(!q.sql().contains("OFFSET"));
    let rows = read_all(&source, &q).await;
    let ids: Vec<i64> = rows
        .iter()
        .map(|r| match r[0] {
            SqlValue::Int(i) => i,
            ref other => panic!("{other:?}"),
        })
        .collect();
    let mut expected: Vec<i64> = (1..=10000).map(|i| i * 3 + i % 7).collect();
    expected.sort();
    assert_eq!(ids.len(), expected.len());
    assert!(ids == expected, "ids out of order or duplicated");
    assert_eq!(rows[0], vec![SqlValue::Int(4), text("v1")]);
}

#[tokio::test]
async fn pages_composite_text_int_and_numeric_keys() {
    let (s, _guard) = pg_schema(
        "src_pg",
        "CREATE TABLE {s}.comp (\"Group\" text, n int, v int, PRIMARY KEY (\"Group\", n));
         INSERT INTO {s}.comp SELECT chr(97 + g), n, g * 100 + n FROM generate_series(0, 9) g, generate_series(1, 50) n;
         CREATE TABLE {s}.money (amount numeric(10,2) PRIMARY KEY, u uuid);
         INSERT INTO {s}.money SELECT i / 4.0, md5(i::text)::uuid FROM generate_series(1, 40) i;",
    )
    .await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let table = format!("{s}.comp");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(shape.primary_key, vec!["Group", "n"]);
    let q = source
        .page_query(&from, &shape, &shape.primary_key, 7)
        .unwrap();
    let rows = read_all(&source, &q).await;
    let mut expected = Vec::new();
    for g in 0..10 {
        for n in 1..=50 {
            expected.push(vec![
                text(&((b'a' + g as u8) as char).to_string()),
                SqlValue::Int(n),
                SqlValue::Int(g * 100 + n),
            ]);
        }
    }
    assert_eq!(rows, expected);

    // A numeric key travels as text and is cast back; a uuid key likewise.
    let table = format!("{s}.money");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 3).unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 40);
    assert_eq!(rows[0][0], dec("0.25"));
    assert_eq!(rows[39][0], dec("10.00"));
    let q = source
        .page_query(&from, &shape, &["u".to_string()], 6)
        .unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 40);
    let keys: Vec<String> = rows.iter().map(|r| r[1].to_text().unwrap()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[tokio::test]
async fn pages_a_text_key_and_a_query_entity() {
    let (s, _guard) = pg_schema(
        "src_pg",
        "CREATE TABLE {s}.words (w varchar(20) PRIMARY KEY, n int);
         INSERT INTO {s}.words SELECT 'k' || lpad(i::text, 4, '0'), i FROM generate_series(1, 1000) i;",
    )
    .await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let table = format!("{s}.words");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 100).unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 1000);
    assert_eq!(rows[0], vec![text("k0001"), SqlValue::Int(1)]);
    assert_eq!(rows[999], vec![text("k1000"), SqlValue::Int(1000)]);

    let sql = format!("SELECT n AS id, w, n * 2.5 AS half FROM \"{s}\".words WHERE n % 3 = 0;");
    let from = Relation::Query(&sql);
    let shape = source.describe(&from).await.unwrap();
    assert!(shape.primary_key.is_empty());
    let names: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["id", "w", "half"]);
    assert_eq!(shape.columns[2].sql_type, "numeric");
    let err = source.page_query(&from, &shape, &[], 10).unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::Config);
    assert!(err.to_string().contains("key = [...]"), "{err}");
    assert_eq!(source.count(&from).await.unwrap(), 333);
    let q = source
        .page_query(&from, &shape, &["id".to_string()], 50)
        .unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 333);
    assert_eq!(rows[0], vec![SqlValue::Int(3), text("k0003"), dec("7.5")]);
    assert_eq!(rows[332][0], SqlValue::Int(999));
}

#[tokio::test]
async fn clear_errors() {
    let (s, _guard) = pg_schema("src_pg", "CREATE TABLE {s}.t (id int PRIMARY KEY);").await;
    let source = Source::connect(pg_url(), 1).await.unwrap();
    let missing = format!("{s}.nope");
    let err = source
        .describe(&Relation::Table(&missing))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::NotFound);
    assert!(err.to_string().contains(&missing), "{err}");
    let table = format!("{s}.t");
    let shape = source.describe(&Relation::Table(&table)).await.unwrap();
    let err = source
        .page_query(&Relation::Table(&table), &shape, &["nope".to_string()], 10)
        .unwrap_err();
    assert!(err.to_string().contains("key column nope"), "{err}");

    let err = Source::connect("postgres://root:hunter2@127.0.0.1:1/test", 1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::Connect);
    let message = format!("{err} {err:?}");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(message.contains("127.0.0.1:1"), "{message}");

    let err = Source::connect("oracle://x", 1).await.unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::Config);
}
