//! Against the real MariaDB server: changes read from the binary log decode
//! to the very rows a page read gives, in commit order, each with the end of
//! its transaction.

mod common;

use std::time::Duration;

use common::{my_database, mysql_url, read_all};
use sql2ddb_core::SqlValue;
use sql2ddb_source::cdc::{BinlogPosition, BinlogReader, ChangeOp, TupleValue};
use sql2ddb_source::{Relation, Source};

#[tokio::test]
async fn binlog_rows_decode_as_the_full_load_reads_them() {
    let (d, db) = my_database(
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
    db.exec(&format!(
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
    while changes.len() < 6 {
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
    // The TRUNCATE of a followed table stops the reader before it.
    let stop = reader
        .next_batch(&source, 10_000, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(stop.kind(), sql2ddb_source::SourceErrorKind::Unfollowable);
    let said = stop.to_string();
    assert!(
        said.contains(&format!("cannot follow TRUNCATE on table {d}.other at ")),
        "{said}"
    );
    reader.close().await;
    use ChangeOp::*;
    let ops: Vec<ChangeOp> = changes.iter().map(|c| c.op).collect();
    assert_eq!(ops, [Insert, Insert, Insert, Update, Delete, Insert]);
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
    db.exec(&format!(
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

    // A value only the server can write (UUID) is read again; latin1 is
    // converted by the server.
    let other = &changes[5];
    assert!(other.new.as_ref().unwrap()[1] == TupleValue::Unchanged);
    assert_eq!(
        other.new.as_ref().unwrap()[2],
        TupleValue::Value(sql2ddb_core::SqlValue::Text("é".into()))
    );
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

/// Reads batches until `want` changes of the followed tables came; returns
/// them with the end of the last batch.
async fn read_changes(
    source: &Source,
    reader: &mut BinlogReader,
    want: usize,
) -> (Vec<sql2ddb_source::cdc::RowChange>, BinlogPosition) {
    let mut changes = Vec::new();
    let mut end = None;
    while changes.len() < want {
        let batch = reader
            .next_batch(source, 10_000, Duration::from_secs(2))
            .await
            .unwrap();
        assert!(
            batch.transactions > 0,
            "the binary log ran dry: {changes:?}"
        );
        end = batch.end.clone();
        changes.extend(batch.changes);
    }
    (changes, end.unwrap())
}

#[tokio::test]
async fn mariadb_is_followed_by_gtid_on_whatever_files_the_server_has() {
    let (d, db) = my_database(
        "src_gtid",
        "CREATE TABLE {d}.g (id INT PRIMARY KEY, v INT);",
    )
    .await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    let table = format!("{d}.g");
    db.exec(&format!("INSERT INTO {table} VALUES (1, 1)")).await;
    let start = source.binlog_position().await.unwrap();
    let start_gtid = source
        .binlog_gtid_pos(&start)
        .await
        .unwrap()
        .expect("the test server is MariaDB, which logs a GTID for every transaction");
    assert!(!start_gtid.is_empty());
    assert!(source.mariadb_gtid_pos().await.unwrap().is_some());
    // MySQL's GTID mode is not MariaDB's: it reads as off.
    assert!(!source.mysql_gtid_mode_on().await.unwrap());
    assert!(source.has_binlog_file(&start.file).await.unwrap());
    assert!(!source
        .has_binlog_file("other-host-bin.000042")
        .await
        .unwrap());
    db.exec(&format!(
        "INSERT INTO {table} VALUES (2, 2); FLUSH BINARY LOGS;
         UPDATE {table} SET v = 3 WHERE id = 2; INSERT INTO {table} VALUES (4, 4);"
    ))
    .await;
    let ids = |changes: &[sql2ddb_source::cdc::RowChange]| -> Vec<(ChangeOp, TupleValue)> {
        changes
            .iter()
            .map(|c| (c.op, c.new.as_ref().unwrap()[0].clone()))
            .collect()
    };
    let want = vec![
        (ChangeOp::Insert, TupleValue::Value(SqlValue::Int(2))),
        (ChangeOp::Update, TupleValue::Value(SqlValue::Int(2))),
        (ChangeOp::Insert, TupleValue::Value(SqlValue::Int(4))),
    ];
    // The server's reading of an end's file and offset is the GTID
    // position the reader gives with it.
    let agrees = |end: BinlogPosition| {
        let source = &source;
        async move {
            let gtid = end
                .gtid
                .clone()
                .expect("MariaDB ends carry their GTID position");
            let bare = BinlogPosition { gtid: None, ..end };
            let server = source.binlog_gtid_pos(&bare).await.unwrap();
            assert_eq!(server.map(|g| g.to_string()), Some(gtid), "at {bare}");
        }
    };

    // By file and offset: ends carry the GTID position too.
    let tables = vec![table.clone()];
    let mut by_file = BinlogReader::open(&source, mysql_url(), 4_100_002, &start, &tables)
        .await
        .unwrap();
    let (changes, end) = read_changes(&source, &mut by_file, 3).await;
    by_file.close().await;
    assert_eq!(ids(&changes), want);
    agrees(end.clone()).await;

    // By GTID, with a file this server never had (another server of the
    // group wrote it): the server finds the place in its own files, and
    // the positions the reader gives are in those.
    let elsewhere = BinlogPosition {
        file: "other-host-bin.000042".into(),
        pos: 12_345,
        gtid: Some(start_gtid.to_string()),
    };
    let mut by_gtid = BinlogReader::open(&source, mysql_url(), 4_100_003, &elsewhere, &tables)
        .await
        .unwrap();
    let (changes, gtid_end) = read_changes(&source, &mut by_gtid, 3).await;
    by_gtid.close().await;
    assert_eq!(ids(&changes), want);
    assert!(
        gtid_end
            .file
            .starts_with(start.file.rsplit_once('.').unwrap().0),
        "{gtid_end}"
    );
    agrees(gtid_end).await;

    // A GTID position the server's log does not hold (a transaction it
    // never logged) is refused, naming it.
    let first = start_gtid.to_string();
    let first = first.split(',').next().unwrap();
    let (domain_server, seq) = first.rsplit_once('-').unwrap();
    let beyond = format!(
        "{domain_server}-{}",
        seq.parse::<u64>().unwrap() + 1_000_000
    );
    let unknown = BinlogPosition {
        gtid: Some(beyond.clone()),
        ..elsewhere
    };
    let err = match BinlogReader::open(&source, mysql_url(), 4_100_004, &unknown, &tables).await {
        Err(e) => e.to_string(),
        Ok(mut reader) => reader
            .next_batch(&source, 10, Duration::from_secs(5))
            .await
            .unwrap_err()
            .to_string(),
    };
    assert!(err.contains(&beyond), "{err}");
    source.close().await;
}

/// The replication privileges a follower needs count when a default role
/// holds them, as when the user holds them itself; a user with neither
/// lacks all three.
#[tokio::test]
async fn privileges_held_through_a_role_count() {
    let (d, db) = my_database("src_roles", "CREATE TABLE {d}.t (id INT PRIMARY KEY);").await;
    let role = format!("{d}_role");
    let (with_role, without) = (format!("{d}_r"), format!("{d}_n"));
    db.exec(&format!(
        "CREATE ROLE `{role}`;
         GRANT REPLICATION SLAVE, BINLOG MONITOR, RELOAD ON *.* TO `{role}`;
         CREATE USER '{with_role}'@'%';
         GRANT `{role}` TO '{with_role}'@'%';
         SET DEFAULT ROLE `{role}` FOR '{with_role}'@'%';
         GRANT SELECT ON `{d}`.* TO '{with_role}'@'%';
         CREATE USER '{without}'@'%';
         GRANT SELECT ON `{d}`.* TO '{without}'@'%';"
    ))
    .await;
    let missing = |user: String| {
        let url = format!("mysql://{user}@127.0.0.1:3306/{d}");
        async move {
            let source = Source::connect(&url, 1).await.unwrap();
            let missing = source.missing_binlog_privileges().await;
            source.close().await;
            missing.unwrap()
        }
    };
    let by_role = missing(with_role.clone()).await;
    let none = missing(without.clone()).await;
    db.exec(&format!(
        "DROP USER '{with_role}'@'%'; DROP USER '{without}'@'%'; DROP ROLE `{role}`;"
    ))
    .await;
    assert!(by_role.is_empty(), "{by_role:?}");
    assert_eq!(none, ["REPLICATION SLAVE", "REPLICATION CLIENT", "RELOAD"]);
}
