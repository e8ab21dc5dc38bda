//! Against the real MariaDB server: every type decoded exactly, charsets,
//! zero dates, keyset paging over composite keys, errors.

mod common;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use common::{my_database, mysql_url, read_all, text};
use sql2ddb_core::SqlValue;
use sql2ddb_source::{Dialect, Relation, Source, SourceErrorKind};

// Long by design: one row of every MariaDB type, checked value by value.
#[tokio::test]
async fn decodes_every_type_exactly() {
    let (d, _guard) = my_database(
        "src_my",
        r#"CREATE TABLE {d}.all_types (
             id INT PRIMARY KEY, flag TINYINT(1), flag2 BOOLEAN, ti TINYINT, si SMALLINT, mi MEDIUMINT,
             i INT, bi BIGINT, ubi BIGINT UNSIGNED, dm DECIMAL(65,30), f FLOAT, db DOUBLE,
             c CHAR(5), vc VARCHAR(20), tx TEXT, bin BINARY(3), vb VARBINARY(10), bl BLOB,
             dt DATE, dtm DATETIME(6), ts TIMESTAMP NULL, tm TIME, yr YEAR,
             e ENUM('small','large'), st SET('a','b','c'), js JSON, bt BIT(8), u UUID
           ) CHARACTER SET utf8mb4;
           INSERT INTO {d}.all_types VALUES (1, 1, 0, -128, -32768, -8388608, -2147483648,
             -9223372036854775808, 18446744073709551615,
             '12345678901234567890123456789012345.123456789012345678901234567890', 0.1, 0.1,
             'ab', 'héllo', 'Ünïcödé text', X'0001FF', X'CAFE', X'00',
             '2024-02-29', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05', '13:14:15', 2024,
             'large', 'a,c', '{"big": 123456789012345678901234567890.5, "k": [1, null]}', b'10100101',
             'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11');
           SET SESSION sql_mode = '';
           INSERT INTO {d}.all_types (id, flag, ubi, dt, dtm, tm, st) VALUES
             (2, 2, 5, '0000-00-00', '0000-00-00 00:00:00', '-01:30:00', '');
           INSERT INTO {d}.all_types (id, tm) VALUES (3, '838:59:59');"#,
    )
    .await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    assert_eq!(source.dialect(), Dialect::MySql);
    let table = format!("{d}.all_types");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(shape.primary_key, vec!["id"]);
    let ty = |name: &str| {
        shape
            .columns
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .sql_type
            .clone()
    };
    assert_eq!(ty("js"), "json");
    assert_eq!(ty("dm"), "decimal(65,30)");
    let q = source.page_query(&from, &shape, &[], 2).unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 3);
    let at = |row: usize, name: &str| {
        &rows[row][shape.columns.iter().position(|c| c.name == name).unwrap()]
    };

    assert_eq!(at(0, "id"), &SqlValue::Int(1));
    assert_eq!(at(0, "flag"), &SqlValue::Bool(true));
    assert_eq!(at(0, "flag2"), &SqlValue::Bool(false));
    assert_eq!(at(0, "ti"), &SqlValue::Int(-128));
    assert_eq!(at(0, "si"), &SqlValue::Int(-32768));
    assert_eq!(at(0, "mi"), &SqlValue::Int(-8388608));
    assert_eq!(at(0, "i"), &SqlValue::Int(-2147483648));
    assert_eq!(at(0, "bi"), &SqlValue::Int(i64::MIN));
    assert_eq!(at(0, "ubi"), &SqlValue::UInt(u64::MAX));
    assert_eq!(
        at(0, "dm"),
        &SqlValue::Decimal(
            "12345678901234567890123456789012345.123456789012345678901234567890".into()
        )
    );
    assert_eq!(at(0, "f"), &SqlValue::Float(0.1));
    assert_eq!(at(0, "db"), &SqlValue::Float(0.1));
    assert_eq!(at(0, "c"), &text("ab"));
    assert_eq!(at(0, "vc"), &text("héllo"));
    assert_eq!(at(0, "tx"), &text("Ünïcödé text"));
    assert_eq!(at(0, "bin"), &SqlValue::Bytes(vec![0, 1, 255]));
    assert_eq!(at(0, "vb"), &SqlValue::Bytes(vec![0xca, 0xfe]));
    assert_eq!(at(0, "bl"), &SqlValue::Bytes(vec![0]));
    assert_eq!(
        at(0, "dt"),
        &SqlValue::Date(NaiveDate::from_ymd_opt(2024, 2, 29).unwrap())
    );
    assert_eq!(
        at(0, "dtm"),
        &SqlValue::Timestamp(
            NaiveDateTime::parse_from_str("2024-01-02 03:04:05.123456", "%Y-%m-%d %H:%M:%S%.f")
                .unwrap()
        )
    );
    assert_eq!(
        at(0, "ts"),
        &SqlValue::TimestampTz(
            NaiveDateTime::parse_from_str("2024-01-02 03:04:05", "%Y-%m-%d %H:%M:%S")
                .unwrap()
                .and_utc()
        )
    );
    assert_eq!(
        at(0, "tm"),
        &SqlValue::Time(NaiveTime::from_hms_opt(13, 14, 15).unwrap())
    );
    assert_eq!(at(0, "yr"), &SqlValue::Int(2024));
    assert_eq!(at(0, "e"), &text("large"));
    assert_eq!(
        at(0, "st"),
        &SqlValue::TextSet(vec!["a".into(), "c".into()])
    );
    let json: serde_json::Value =
        serde_json::from_str(r#"{"big": 123456789012345678901234567890.5, "k": [1, null]}"#)
            .unwrap();
    assert_eq!(at(0, "js"), &SqlValue::Json(json));
    let SqlValue::Json(js) = at(0, "js") else {
        unreachable!()
    };
    assert_eq!(js["big"].to_string(), "123456789012345678901234567890.5");
    assert_eq!(at(0, "bt"), &SqlValue::Int(165));
    assert_eq!(at(0, "u"), &text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));

    // Zero dates, an out-of-range TIME, a TINYINT(1) holding 2, the empty SET, NULLs.
    let zero = SqlValue::Invalid("zero date 0000-00-00 cannot be represented".into());
    assert_eq!(at(1, "dt"), &zero);
    assert_eq!(at(1, "dtm"), &zero);
    assert!(
        matches!(at(1, "tm"), SqlValue::Invalid(r) if r.contains("-01:30:00")),
        "{:?}",
        at(1, "tm")
    );
    assert!(
        matches!(at(2, "tm"), SqlValue::Invalid(r) if r.contains("838:59:59")),
        "{:?}",
        at(2, "tm")
    );
    assert_eq!(at(1, "flag"), &SqlValue::Int(2));
    assert_eq!(at(1, "ubi"), &SqlValue::Int(5));
    assert_eq!(at(1, "st"), &SqlValue::TextSet(vec![]));
    assert_eq!(at(1, "js"), &SqlValue::Null);
    assert_eq!(at(2, "bt"), &SqlValue::Null);
    source.close().await;
}

#[tokio::test]
async fn latin1_text_arrives_as_utf8() {
    let (d, _guard) = my_database(
        "src_my",
        "CREATE TABLE {d}.latin (id INT PRIMARY KEY, name VARCHAR(20), note TEXT) CHARACTER SET latin1;
         INSERT INTO {d}.latin VALUES (1, 'café', 'Ünïcödé'), (2, 'naïve', NULL);",
    )
    .await;
    let source = Source::connect(mysql_url(), 1).await.unwrap();
    let table = format!("{d}.latin");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 10).unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(
        rows,
        vec![
            vec![SqlValue::Int(1), text("café"), text("Ünïcödé")],
            vec![SqlValue::Int(2), text("naïve"), SqlValue::Null],
        ]
    );
    // A latin1 text key pages too.
    let q = source
        .page_query(&from, &shape, &["name".to_string()], 1)
        .unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][1], text("café"));
}

// Long by design: one fixture paged three ways (composite, decimal, query entity).
#[tokio::test]
async fn pages_composite_decimal_and_query_entities() {
    let (d, _guard) = my_database(
        "src_my",
        "CREATE TABLE {d}.comp (g VARCHAR(5), n INT, v INT, PRIMARY KEY (g, n));
         INSERT INTO {d}.comp
           SELECT CHAR(97 + a.i), b.i * 10 + c.i, a.i * 1000 + b.i * 10 + c.i
           FROM (SELECT 0 i UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4) a,
                (SELECT 0 i UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5
                 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) b,
                (SELECT 0 i UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5
                 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) c;
         CREATE TABLE {d}.prices (amount DECIMAL(65,30) PRIMARY KEY, ubig BIGINT UNSIGNED);
         INSERT INTO {d}.prices SELECT n / 4, 18446744073709551615 - n FROM {d}.comp WHERE g = 'a';",
    )
    .await;
    let source = Source::connect(&mysql_url().replace("mysql://", "mariadb://"), 2)
        .await
        .unwrap();
    let table = format!("{d}.comp");
    let from = Relation::Table(&table);
    assert_eq!(source.count(&from).await.unwrap(), 500);
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(shape.primary_key, vec!["g", "n"]);
    let q = source.page_query(&from, &shape, &[], 7).unwrap();
    assert!(q.sql().contains(" OR "), "{}", q.sql());
    let rows = read_all(&source, &q).await;
    let mut expected = Vec::new();
    for a in 0..5i64 {
        for n in 0..100i64 {
            expected.push(vec![
                text(&((b'a' + a as u8) as char).to_string()),
                SqlValue::Int(n),
                SqlValue::Int(a * 1000 + n),
            ]);
        }
    }
    assert_eq!(rows, expected);

    // DECIMAL(65,30) key: the cursor travels as text and is cast back exactly.
    let table = format!("{d}.prices");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 9).unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 100);
    assert_eq!(
        rows[1][0],
        SqlValue::Decimal("0.250000000000000000000000000000".into())
    );
    assert_eq!(rows[0][1], SqlValue::UInt(u64::MAX));
    // An unsigned key above i64::MAX.
    let q = source
        .page_query(&from, &shape, &["ubig".to_string()], 9)
        .unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 100);
    assert_eq!(rows[99][1], SqlValue::UInt(u64::MAX));

    // A query entity with an explicit composite key.
    let sql = format!("SELECT v, g, n FROM {d}.comp WHERE n % 2 = 0");
    let from = Relation::Query(&sql);
    let shape = source.describe(&from).await.unwrap();
    assert_eq!(
        shape
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["v", "g", "n"]
    );
    let err = source.page_query(&from, &shape, &[], 10).unwrap_err();
    assert!(err.to_string().contains("key = [...]"), "{err}");
    let q = source
        .page_query(&from, &shape, &["g".to_string(), "n".to_string()], 13)
        .unwrap();
    let rows = read_all(&source, &q).await;
    assert_eq!(rows.len(), 250);
    assert_eq!(rows[0], vec![SqlValue::Int(0), text("a"), SqlValue::Int(0)]);
    assert_eq!(
        rows[249],
        vec![SqlValue::Int(4098), text("e"), SqlValue::Int(98)]
    );
}

#[tokio::test]
async fn errors_never_show_the_password() {
    let err = Source::connect("mysql://root:hunter2@127.0.0.1:3306/test", 1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::Connect);
    let message = format!("{err} {err:?}");
    assert!(!message.contains("hunter2"), "{message}");
    let err = Source::connect("mariadb://root:hunter2@127.0.0.1:1/test", 1)
        .await
        .unwrap_err();
    let message = format!("{err} {err:?}");
    assert!(!message.contains("hunter2"), "{message}");

    let source = Source::connect(mysql_url(), 1).await.unwrap();
    let err = source
        .describe(&Relation::Table("test.no_such_table"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::NotFound);
    assert!(err.to_string().contains("no_such_table"), "{err}");
}
