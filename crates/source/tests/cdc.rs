//! Against the real PostgreSQL server: changes read from a logical slot
//! decode to the very rows a page read gives, old tuples carry what the
//! replica identity promises, and the slot only moves when told.

mod common;

use common::{pg_schema, pg_url, read_all};
use sql2ddb_source::cdc::{copy_name, ChangeOp, ReadAhead, Relations, SlotReader, TupleValue};
use sql2ddb_source::{Relation, Source};
use sql2ddb_testkit::support::unique_name;

/// Drops the slot and publication even when an assertion fails.
struct SlotGuard {
    slot: String,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let slot = self.slot.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                if let Ok(s) = Source::connect(pg_url(), 1).await {
                    let _ = s.drop_slot(&slot, &slot).await;
                    s.close().await;
                }
            })
        })
        .join();
    }
}

#[tokio::test]
async fn followed_rows_decode_as_the_full_load_reads_them() {
    let (s, _guard) = pg_schema(
        "src_cdc",
        "CREATE TYPE {s}.mood AS ENUM ('sad', 'happy');
         CREATE TABLE {s}.t (
           id int PRIMARY KEY, n numeric(60,20), r real, d double precision, tx text,
           c5 char(5), b boolean, by bytea, dt date, tm time, tsp timestamp, tz timestamptz,
           u uuid, js jsonb, ia int[], mood {s}.mood, iv interval);
         CREATE TABLE {s}.full_id (id int PRIMARY KEY, v text);
         ALTER TABLE {s}.full_id REPLICA IDENTITY FULL;",
    )
    .await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let table = format!("{s}.t");
    let full = format!("{s}.full_id");
    let slot = unique_name("slot_cdc").to_lowercase();
    let _slot_guard = SlotGuard { slot: slot.clone() };
    let start = source
        .create_slot(&slot, &slot, &[&table, &full])
        .await
        .unwrap();
    assert!(source.replica_identity(&full).await.unwrap() == 'f');
    sqlx_exec(&format!(
        "INSERT INTO {table} VALUES (1, 12.34, 0.1, 0.1, 'it''s', 'ab', true, '\\x00ff', '2024-02-29',
           '13:14:15.5', '2024-01-02 03:04:05.123456', '2024-03-10 12:34:56.789+05:30',
           'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{{\"a\": [1, 2.50]}}', '{{1,NULL,3}}', 'happy', '1 day');
         INSERT INTO {table} (id) VALUES (2);
         UPDATE {table} SET id = 3, tx = 'moved' WHERE id = 2;
         INSERT INTO {table} (id) VALUES (4);
         DELETE FROM {table} WHERE id = 4;
         INSERT INTO {full} VALUES (1, 'a');
         UPDATE {full} SET v = 'b' WHERE id = 1;"
    ))
    .await;

    let mut relations = Relations::default();
    let batch = source
        .peek_changes(&slot, &slot, 10_000, &mut relations)
        .await
        .unwrap();
    let ops: Vec<ChangeOp> = batch.changes.iter().map(|c| c.op).collect();
    use ChangeOp::*;
    assert_eq!(
        ops,
        [Insert, Insert, Update, Insert, Delete, Insert, Update]
    );
    let end = batch.end_lsn.expect("an end position");
    assert!(end > start);

    // The inserted row, decoded from its tuple, equals the row a page read gives.
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 10).unwrap();
    let read = read_all(&source, &q).await;
    let tuples: Vec<&[TupleValue]> = [0, 2]
        .iter()
        .map(|&i| batch.changes[i].new.as_deref().unwrap())
        .collect();
    let decoded = source
        .rows_of_tuples(&q, &batch.changes[0].columns, &tuples)
        .await
        .unwrap();
    let decoded: Vec<_> = decoded.into_iter().map(Option::unwrap).collect();
    assert_eq!(decoded, read, "rows 1 and 3, decoded as pages read them");

    // The key change carries the old key (default identity: key columns only).
    let moved = &batch.changes[2];
    let old = moved.old.as_ref().expect("old key of a key change");
    assert_eq!(old[0], TupleValue::Text("2".into()));
    assert_eq!(old[4], TupleValue::Null);
    // REPLICA IDENTITY FULL: the whole old row on every update.
    let full_update = &batch.changes[6];
    assert_eq!(
        full_update.old.as_ref().unwrap()[1],
        TupleValue::Text("a".into())
    );

    // Peeking does not move the slot; advancing does, and the changes go.
    let again = source
        .peek_changes(&slot, &slot, 10_000, &mut Relations::default())
        .await
        .unwrap();
    assert_eq!(again.changes.len(), 7);
    source.advance_slot(&slot, end).await.unwrap();
    let state = source.slot_state(&slot).await.unwrap().unwrap();
    assert_eq!(state.confirmed, end);
    let rest = source
        .peek_changes(&slot, &slot, 10_000, &mut Relations::default())
        .await
        .unwrap();
    assert!(rest.changes.is_empty());

    source.drop_slot(&slot, &slot).await.unwrap();
    assert!(source.slot_state(&slot).await.unwrap().is_none());
    source.close().await;
}

/// A read-ahead copy of `slot`.
async fn copy_of(source: &Source, slot: &str) -> SlotReader {
    match source.open_slot_reader(slot, slot).await.unwrap() {
        ReadAhead::Copy(r) => r,
        ReadAhead::Unavailable(why) => panic!("no read-ahead copy: {why}"),
        ReadAhead::Held(err) => panic!("the copy is held: {err}"),
    }
}

/// The ids a batch inserted.
fn ids(batch: &sql2ddb_source::cdc::ChangeBatch) -> Vec<String> {
    batch
        .changes
        .iter()
        .map(|c| match &c.new.as_ref().unwrap()[0] {
            TupleValue::Text(t) => t.clone(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn a_copy_reads_ahead_without_moving_the_slot_and_one_reader_at_a_time() {
    let (s, _guard) = pg_schema("src_cdc_ahead", "CREATE TABLE {s}.t (id int PRIMARY KEY);").await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let table = format!("{s}.t");
    let slot = unique_name("slot_ahead").to_lowercase();
    let _slot_guard = SlotGuard { slot: slot.clone() };
    let start = source.create_slot(&slot, &slot, &[&table]).await.unwrap();
    for id in 1..=3 {
        sqlx_exec(&format!("INSERT INTO {table} VALUES ({id})")).await;
    }

    // Batch after batch, each where the last ended, in commit order; the
    // slot stays where it was.
    let mut reader = copy_of(&source, &slot).await;
    assert_eq!(reader.name(), copy_name(&slot));
    let first = reader.next_batch(1).await.unwrap();
    let second = reader.next_batch(1).await.unwrap();
    assert_eq!(
        (ids(&first), ids(&second)),
        (vec!["1".into()], vec!["2".into()])
    );
    assert!(second.end_lsn > first.end_lsn);
    assert_eq!(
        source.slot_state(&slot).await.unwrap().unwrap().confirmed,
        start
    );

    // One reader of a slot at a time: a second one is refused, naming why.
    let ReadAhead::Held(err) = source.open_slot_reader(&slot, &slot).await.unwrap() else {
        panic!("a second reader of {slot} was let in");
    };
    assert!(err.to_string().contains("another follower"), "{err}");

    // Closed (or its process gone), the copy is dropped; a new reader
    // starts from the slot again: what was read ahead and not applied is
    // read again.
    reader.close().await;
    assert!(source
        .slot_state(&copy_name(&slot))
        .await
        .unwrap()
        .is_none());
    let mut again = copy_of(&source, &slot).await;
    assert_eq!(
        ids(&again.next_batch(10_000).await.unwrap()),
        ["1", "2", "3"]
    );
    again.close().await;
    // Advanced past the first transaction, the slot's next reader starts after it.
    source
        .advance_slot(&slot, first.end_lsn.unwrap())
        .await
        .unwrap();
    let mut after = copy_of(&source, &slot).await;
    assert_eq!(ids(&after.next_batch(10_000).await.unwrap()), ["2", "3"]);
    after.close().await;

    source.drop_slot(&slot, &slot).await.unwrap();
    source.close().await;
}

async fn sqlx_exec(sql: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(pg_url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&mut conn)
        .await
        .unwrap();
}

/// What a new slot needs is read from the catalog: a slot or publication
/// of the name already there, and how each table would be published.
#[tokio::test]
async fn what_a_new_slot_needs_is_read_before_anything_is_created() {
    let (s, _guard) = pg_schema(
        "src_slot_check",
        "CREATE TABLE {s}.keyed (id int PRIMARY KEY);
         CREATE TABLE {s}.deferred (id int PRIMARY KEY DEFERRABLE);
         CREATE TABLE {s}.keyless (v text);
         CREATE TABLE {s}.nothing (id int PRIMARY KEY);
         ALTER TABLE {s}.nothing REPLICA IDENTITY NOTHING;",
    )
    .await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let slot = unique_name("slot_check").to_lowercase();
    let _slot_guard = SlotGuard { slot: slot.clone() };
    let before = source.slot_server(&slot).await.unwrap();
    assert!(!before.slot_exists && !before.publication_exists);
    assert!(before.can_replicate && before.can_create_publication);
    assert_eq!(before.wal_level, "logical");
    let keyed = format!("{s}.keyed");
    source.create_slot(&slot, &slot, &[&keyed]).await.unwrap();
    let after = source.slot_server(&slot).await.unwrap();
    assert!(after.slot_exists && after.publication_exists);
    // This one at least is in use, of at most max_replication_slots.
    assert!(after.used_slots >= 1 && after.used_slots <= after.max_slots);

    // A publication's comment reads back as written, quotes and all.
    assert_eq!(source.publication_comment(&slot).await.unwrap(), None);
    let text = r#"{"mapping": "it's \"b\".toml"}"#;
    source.comment_publication(&slot, text).await.unwrap();
    assert_eq!(
        source.publication_comment(&slot).await.unwrap().as_deref(),
        Some(text)
    );

    let table = |name: &str| format!("{s}.{name}");
    let t = source
        .published_table(&table("keyed"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((t.identity, t.primary_key_immediate), ('d', Some(true)));
    assert!(t.can_select && t.owned);
    let t = source
        .published_table(&table("deferred"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((t.identity, t.primary_key_immediate), ('d', Some(false)));
    let t = source
        .published_table(&table("keyless"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((t.identity, t.primary_key_immediate), ('d', None));
    let t = source
        .published_table(&table("nothing"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.identity, 'n');
    assert_eq!(
        source.published_table(&table("absent")).await.unwrap(),
        None
    );
    source.close().await;
}

/// Texts that an array literal must quote (quotes, backslashes, braces,
/// commas, the word NULL, blanks, the empty text) decode to themselves, a
/// NULL to NULL, and more tuples than one statement casts come back each in
/// its own place.
#[tokio::test]
async fn tuples_decode_exactly_whatever_their_text_and_however_many() {
    let (s, _guard) = pg_schema(
        "src_tuples",
        "CREATE TABLE {s}.t (id bigint PRIMARY KEY, tx text, tags text[], n numeric);",
    )
    .await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let table = format!("{s}.t");
    let from = Relation::Table(&table);
    let shape = source.describe(&from).await.unwrap();
    let q = source.page_query(&from, &shape, &[], 10).unwrap();
    let columns: Vec<String> = ["id", "tx", "tags", "n"].map(String::from).to_vec();
    let awkward = [
        "\"",
        "\\",
        "\\\"",
        "{a,b}",
        "NULL",
        "null",
        "",
        " spaced ",
        "a,b",
        "}{",
        "Zoë's\n\ttab",
    ];
    let t = |s: &str| TupleValue::Text(s.to_string());
    let mut tuples: Vec<Vec<TupleValue>> = Vec::new();
    for (i, text) in awkward.iter().enumerate() {
        tuples.push(vec![
            t(&i.to_string()),
            t(text),
            t(r#"{"x\"y",NULL,"{}"}"#),
            t("12.500"),
        ]);
    }
    tuples.push(vec![
        t("100"),
        TupleValue::Null,
        TupleValue::Null,
        TupleValue::Null,
    ]);
    // More than one statement's worth, in an order no key sorts.
    for i in 0..12_000u64 {
        let id = (i * 7_919) % 1_000_003 + 1_000;
        tuples.push(vec![
            t(&id.to_string()),
            t(&format!("row {id}")),
            TupleValue::Null,
            t(&i.to_string()),
        ]);
    }
    let refs: Vec<&[TupleValue]> = tuples.iter().map(Vec::as_slice).collect();
    let rows = source.rows_of_tuples(&q, &columns, &refs).await.unwrap();
    assert_eq!(rows.len(), tuples.len());
    for (i, text) in awkward.iter().enumerate() {
        let row = rows[i].as_ref().unwrap();
        assert_eq!(
            row[1],
            sql2ddb_core::SqlValue::Text(text.to_string()),
            "tuple {i}"
        );
        assert_eq!(
            row[2],
            sql2ddb_core::SqlValue::Array(vec![
                sql2ddb_core::SqlValue::Text("x\"y".into()),
                sql2ddb_core::SqlValue::Null,
                sql2ddb_core::SqlValue::Text("{}".into()),
            ]),
            "tuple {i}"
        );
    }
    let nulls = rows[awkward.len()].as_ref().unwrap();
    assert!(
        nulls[1..]
            .iter()
            .all(|v| *v == sql2ddb_core::SqlValue::Null),
        "{nulls:?}"
    );
    for (tuple, row) in tuples.iter().zip(&rows).skip(awkward.len() + 1) {
        let row = row.as_ref().unwrap();
        let TupleValue::Text(id) = &tuple[0] else {
            unreachable!()
        };
        assert_eq!(row[1], sql2ddb_core::SqlValue::Text(format!("row {id}")));
    }
    source.close().await;
}
