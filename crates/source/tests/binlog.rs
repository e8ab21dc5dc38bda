//! Against the real MariaDB server: changes read from the binary log decode
//! to the very rows a page read gives, in commit order, each with the end of
//! its transaction.

mod common;

use std::time::Duration;

use common::{my_database, mysql_url, read_all};
use sql2ddb_source::cdc::{BinlogReader, ChangeOp, TupleValue};
use sql2ddb_source::{Relation, Source};

#[tokio::test]
async fn binlog_rows_decode_as_the_full_load_reads_them() {
    let (d, _guard) = my_database(
        "src_binlog",
        r#"CREATE TABLE {d}.t (
             id INT PRIMARY KEY, flag TINYINT(1), ti TINYINT UNSIGNED, si SMALLINT UNSIGNED,
             mi MEDIUMINT UNSIGNED, i INT UNSIGNED, bi BIGINT, ubi BIGINT UNSIGNED, dm DECIMAL(20,4),
             f FLOAT, db DOUBLE, c CHAR(5), vc VARCHAR(20), tx TEXT, bin BINARY(3), vb VARBINARY(10),
             bl BLOB, dt DATE, dtm DATETIME(6), dt0 DATETIME, ts TIMESTAMP(3) NULL, tm TIME(3), yr YEAR,
             e ENUM('small','large'), st SET('a','b','c'), js JSON, bt BIT(12)
           ) CHARACTER SET utf8mb4;
           CREATE TABLE {d}.other (id INT PRIMARY KEY, u UUID, l VARCHAR(5) CHARACTER SET latin1);"#,
    )
    .await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    let table = format!("{d}.t");
    let start = source.binlog_position().await.unwrap();
    let pool = sqlx::MySqlPool::connect(mysql_url()).await.unwrap();
    let exec = |sql: String| {
        let pool = pool.clone();
        async move {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap()
        }
    };
    exec(format!(
        r#"INSERT INTO {table} VALUES (1, 1, 255, 65535, 16777215, 4294967295, -9223372036854775808,
             18446744073709551615, -12.3400, 0.1, 0.1, 'ab', 'héllo', 'Ünïcödé', X'01', X'CAFE', X'00',
             '2024-02-29', '2024-01-02 03:04:05.000123', '1999-12-31 23:59:59', '2024-01-02 03:04:05.5',
             '12:14:15.25', 2024, 'large', 'a,c', '{{"big": 12345678901234567890.5, "k": [1, null]}}',
             b'101000000101');
           INSERT INTO {table} (id, yr, st, e) VALUES (2, 0, '', 'small');
           SET SESSION sql_mode = '';
           INSERT INTO {table} (id, dt, dtm, tm) VALUES (3, '0000-00-00', '0000-00-00 00:00:00', '838:59:59');
           BEGIN; UPDATE {table} SET id = 4, vc = 'moved' WHERE id = 2; DELETE FROM {table} WHERE id = 3; COMMIT;
           FLUSH BINARY LOGS;
           INSERT INTO {d}.other VALUES (1, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'é');
           TRUNCATE TABLE {d}.other;"#
    ))
    .await;
    let tables = vec![table.clone(), format!("{d}.other")];
    let mut reader = BinlogReader::open(&source, mysql_url(), 4_100_001, &start, &tables)
        .await
        .unwrap();
    let mut changes = Vec::new();
    let mut ends = Vec::new();
    while changes.len() < 7 {
        let batch = reader
            .next_batch(&source, 10_000, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(
            batch.transactions > 0,
            "the binary log ran dry: {changes:?}"
        );
        ends.push(batch.end.clone().unwrap());
        changes.extend(batch.changes);
    }
    reader.close().await;
    use ChangeOp::*;
    let ops: Vec<ChangeOp> = changes.iter().map(|c| c.op).collect();
    assert_eq!(
        ops,
        [Insert, Insert, Insert, Update, Delete, Insert, Truncate]
    );
    // The update and the delete share their transaction's end.
    assert_eq!(changes[3].commit_end, changes[4].commit_end);
    assert!(changes[2].commit_end < changes[3].commit_end);
    assert!(ends.last().unwrap().ordinal() <= source.binlog_position().await.unwrap().ordinal());
    // The log rotated before the last two transactions: their positions
    // are in the next file, named as the server names it.
    let last = ends.last().unwrap();
    assert_ne!(last.file, start.file);
    assert!(
        last.file
            .starts_with(start.file.rsplit_once('.').unwrap().0)
            && last
                .file
                .rsplit('.')
                .next()
                .unwrap()
                .bytes()
                .all(|b| b.is_ascii_digit()),
        "{last}"
    );
    assert!(changes[5].commit_end > changes[4].commit_end);

    // Every image decodes to the row a page read gives.
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 100).unwrap();
    let images: Vec<&[TupleValue]> = changes[..5]
        .iter()
        .flat_map(|c| c.old.iter().chain(c.new.iter()))
        .map(|t| t.as_slice())
        .collect();
    let decoded = source
        .rows_of_tuples(&q, &changes[0].columns, &images)
        .await
        .unwrap();
    let decoded: Vec<_> = decoded.into_iter().map(|r| r.expect("complete")).collect();
    // Page reads of the rows as inserted (before the move and the delete).
    exec(format!(
        "SET SESSION sql_mode = ''; INSERT INTO {table} (id, yr, st, e) VALUES (2, 0, '', 'small');
         INSERT INTO {table} (id, dt, dtm, tm) VALUES (3, '0000-00-00', '0000-00-00 00:00:00', '838:59:59');"
    ))
    .await;
    let rows = read_all(&source, &q).await;
    let by_id = |id: i64| {
        rows.iter()
            .find(|r| r[0] == sql2ddb_core::SqlValue::Int(id))
            .unwrap()
            .clone()
    };
    // images: insert 1, insert 2, insert 3, update old 2, update new 4, delete old 3.
    assert_eq!(decoded[0], by_id(1));
    assert_eq!(decoded[1], by_id(2));
    assert_eq!(decoded[2], by_id(3));
    assert_eq!(decoded[3], by_id(2));
    assert_eq!(decoded[4], by_id(4));
    assert_eq!(decoded[5], by_id(3));

    // Values only the server can write (UUID, latin1) are read again.
    let other = &changes[5];
    assert!(other.new.as_ref().unwrap()[1] == TupleValue::Unchanged);
    assert!(other.new.as_ref().unwrap()[2] == TupleValue::Unchanged);
    source.close().await;
}

#[tokio::test]
async fn the_test_server_has_the_binlog_settings_and_other_sources_are_refused() {
    let source = Source::connect(mysql_url(), 1).await.unwrap();
    // The test server has the binary log on, in row format, with full images.
    source.check_binlog_settings().await.unwrap();
    let pg = Source::connect(common::pg_url(), 1).await.unwrap();
    let err = pg.binlog_position().await.unwrap_err();
    assert!(err.to_string().contains("MySQL and MariaDB"), "{err}");
}
