//! PostgreSQL's change stream at its edges: a cutover right after the
//! application's last commits made with `synchronous_commit = off` applies
//! every one of them; a cutover whose comparison fails keeps its slot, and
//! a later cutover goes on from it; a follower whose tables are quiet while
//! another table writes much WAL confirms its position (the slot does not
//! keep that WAL) and loses no change of a transaction open meanwhile; a
//! key-moving update of a row with a TOASTed value, then its delete, leaves
//! no item behind; a followed table that gains a column or widens a type
//! stops the follower before the first row in the new shape, its slot kept
//! there, and after a new full load a cutover goes on from it; a
//! `TRUNCATE` of followed tables stops the follower before its
//! transaction, the changes before it applied and the slot kept there.

use std::time::{Duration, Instant};

use sql2ddb_core::AttrValue;
use sqlx::Connection;

use crate::common::*;
use crate::follow_scenario::{wait_for, SlotGuard};

const ITEMS: &str = "
CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL, code varchar(3), price numeric(5,2));
INSERT INTO {schema}.items SELECT i, 'Name ' || i, 'c' || i % 10, i + 0.25 FROM generate_series(1, 50) i;
CREATE TABLE {schema}.noise (id int PRIMARY KEY, pad text NOT NULL);
";

const MAPPING: &str = pg_mapping!(
    r#"
[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "ITEM#{id}"
sk = "ITEM"
"#
);

/// Runs `sql` on the scenario's schema (`SCHEMA` stands for its name).
async fn exec(sc: &Scenario, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.replace("SCHEMA", &sc.pg().name)))
        .execute(&sc.pg().pool)
        .await
        .unwrap();
}

/// The full load with `--follow`, until the follow is idle for a second
/// (into the table as it is: a test may load it again): the slot is kept.
/// Returns it (dropped when the guard goes).
async fn loaded(sc: &Scenario, mapping: &str) -> (String, SlotGuard) {
    let run = sc
        .run(
            mapping,
            &[
                "--if-not-empty",
                "append",
                "--follow",
                "--follow-until-idle",
                "1",
                "--quiet",
            ],
        )
        .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let run_id = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .unwrap_or_else(|| panic!("no run id:\n{}", run.stderr))
        .trim()
        .to_string();
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    (slot.clone(), SlotGuard(slot))
}

/// `follow MAPPING --slot SLOT --endpoint URL EXTRA…`.
async fn follow(sc: &Scenario, mapping: &str, slot: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "follow",
        mapping,
        "--slot",
        slot,
        "--endpoint",
        &sc.dynamo.url,
    ];
    args.extend_from_slice(extra);
    sc.sql2ddb(&args).await
}

/// Where slot `slot` stands: its confirmed position and the WAL it keeps,
/// in bytes; `None` once it is gone.
async fn slot_state(sc: &Scenario, slot: &str) -> Option<(i64, i64)> {
    sqlx::query_as(
        "SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::int8, \
         pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8 \
         FROM pg_replication_slots WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_optional(&sc.pg().pool)
    .await
    .unwrap()
}

/// The server's WAL position now, in bytes.
async fn wal_now(sc: &Scenario) -> i64 {
    sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::int8")
        .fetch_one(&sc.pg().pool)
        .await
        .unwrap()
}

/// Waits until `check` holds of the table's items, or fails saying `what`.
async fn until_items(sc: &Scenario, what: &str, check: impl Fn(&Items) -> bool) {
    let start = Instant::now();
    while !check(&sc.items().await) {
        assert!(start.elapsed() < PATIENCE, "{what}: never");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Item `id`'s name.
fn name_of(items: &Items, id: i64) -> Option<&AttrValue> {
    items
        .get(&key(&format!("ITEM#{id}"), "ITEM"))
        .and_then(|i| i.get("name"))
}

/// The application commits without waiting for its WAL to reach the disk
/// (`synchronous_commit = off`), 300 rows before the cutover starts and
/// more while it starts, until it says where it cuts over: every row whose
/// commit is before that position is in the table after the cutover (those
/// committed after it may be, or not). Four times, as a race between the
/// commits and the cutover's reads would not show every time.
#[tokio::test]
async fn a_cutover_applies_every_asynchronous_commit_before_it() {
    let sc = Scenario::new("cut_async").postgres(ITEMS).start().await;
    let mapping = sc.mapping(MAPPING);
    let mut app = sqlx::PgConnection::connect(pg_url()).await.unwrap();
    sqlx::query("SET synchronous_commit = off")
        .execute(&mut app)
        .await
        .unwrap();
    let insert = format!(
        "INSERT INTO {}.items VALUES ($1, 'late ' || $1, 'x', 1) \
         RETURNING pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::int8",
        sc.pg().name
    );
    // Each row and a WAL position after its commit record.
    let mut committed: Vec<(i64, i64)> = Vec::new();
    let commit = async |app: &mut sqlx::PgConnection, id: i64| {
        let at: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(insert.clone()))
            .bind(id as i32)
            .fetch_one(app)
            .await
            .unwrap();
        (id, at)
    };
    for round in 0..4 {
        let (slot, _guard) = loaded(&sc, &mapping).await;
        for _ in 0..300 {
            let id = 51 + committed.len() as i64;
            committed.push(commit(&mut app, id).await);
        }
        let cut = Proc::spawn(
            sc.path(),
            &[
                "follow",
                &mapping,
                "--slot",
                &slot,
                "--endpoint",
                &sc.dynamo.url,
                "--cutover",
                "--no-verify",
            ],
        );
        while !cut.stderr.lock().unwrap().contains("cutting over at ") {
            let id = 51 + committed.len() as i64;
            committed.push(commit(&mut app, id).await);
            assert!(committed.len() < 1_000_000, "the cutover never started");
        }
        let cut = cut.wait().await;
        let said = format!("round {round}:\n{}\n{}", cut.stdout, cut.stderr);
        assert_eq!(cut.code, 0, "{said}");
        let fence = cut
            .stderr
            .split("cutting over at ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no position: {said}"))
            .to_string();
        let fence: i64 =
            sqlx::query_scalar("SELECT pg_wal_lsn_diff($1::text::pg_lsn, '0/0')::int8")
                .bind(&fence)
                .fetch_one(&sc.pg().pool)
                .await
                .unwrap();
        assert_eq!(slot_state(&sc, &slot).await, None, "{said}");
        let items = sc.items().await;
        let missing: Vec<i64> = committed
            .iter()
            .filter(|(id, at)| {
                *at <= fence && !items.contains_key(&key(&format!("ITEM#{id}"), "ITEM"))
            })
            .map(|(id, _)| *id)
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: rows committed before the cutover missing: {missing:?}\n{said}"
        );
        let before = committed.iter().filter(|(_, at)| *at <= fence).count();
        assert!(
            before >= 300 * (round + 1),
            "round {round}: {before} rows before the fence"
        );
    }
}

/// An item changed behind the follower's back: the cutover applies the
/// source's changes, finds the difference, exits 1 and keeps the slot; a
/// new full load repairs the item, and the next cutover goes on from the
/// kept slot with a change made after that load.
#[tokio::test]
async fn a_cutover_whose_comparison_fails_keeps_the_slot() {
    let sc = Scenario::new("cut_differs").postgres(ITEMS).start().await;
    let mapping = sc.mapping(MAPPING);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    let mut tampered = sc.items().await[&key("ITEM#5", "ITEM")].clone();
    tampered.insert("name".into(), s("changed in DynamoDB"));
    sc.dynamo
        .client
        .put_item()
        .table_name(&sc.table)
        .set_item(Some(sql2ddb_testkit::sdk::item_to_sdk(&tampered)))
        .send()
        .await
        .unwrap();
    exec(&sc, "UPDATE SCHEMA.items SET name = 'renamed' WHERE id = 7").await;

    let cut = follow(&sc, &mapping, &slot, &["--cutover"]).await;
    let said = format!("{}\n{}", cut.stdout, cut.stderr);
    assert_eq!(cut.code, EXIT_FAILED, "{said}");
    assert!(
        cut.stdout
            .contains("cut over, but the table differs from the source"),
        "{said}"
    );
    assert!(
        cut.stdout.contains(&format!(
            "replication slot {slot} and its publication are kept at "
        )),
        "{said}"
    );
    assert!(slot_state(&sc, &slot).await.is_some(), "the slot is kept");
    let items = sc.items().await;
    assert_eq!(name_of(&items, 7), Some(&s("renamed")));

    let said = reload_change_and_cut_over(&sc, &mapping, &slot).await;
    assert_eq!(slot_state(&sc, &slot).await, None, "{said}");
    let items = sc.items().await;
    assert_eq!(name_of(&items, 5), Some(&s("Name 5")));
    assert_eq!(name_of(&items, 9), Some(&s("after the load")));
}

/// About 48 MB of WAL written to a table the follower does not follow.
async fn noise(sc: &Scenario, from: i64) -> i64 {
    let before = wal_now(sc).await;
    for chunk in 0..4 {
        let start = from + chunk * 12_000;
        exec(
            sc,
            &format!(
                "INSERT INTO SCHEMA.noise SELECT g, repeat(md5(g::text), 32) \
                 FROM generate_series({}, {}) g",
                start + 1,
                start + 12_000
            ),
        )
        .await;
    }
    wal_now(sc).await - before
}

/// The followed table is quiet while another table writes: the follower
/// confirms the position its reads reached, so the slot moves and keeps
/// little WAL. A transaction on the followed table left open meanwhile
/// (its change before positions the slot is confirmed past) still arrives
/// once it commits, also when no follower runs in between, and a change
/// made afterwards arrives too.
#[tokio::test]
async fn an_idle_follower_confirms_its_position_while_other_tables_write() {
    let sc = Scenario::new("follow_idle").postgres(ITEMS).start().await;
    let mapping = sc.mapping(MAPPING);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    let follower = spawn_follower(&sc, &mapping, &slot);
    wait_for(&follower, "following replication slot").await;
    let mut open = sqlx::PgConnection::connect(pg_url()).await.unwrap();
    let table = format!("{}.items", sc.pg().name);
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "BEGIN; UPDATE {table} SET name = 'spanning' WHERE id = 2"
    )))
    .execute(&mut open)
    .await
    .unwrap();
    let during = wal_now(&sc).await;
    let written = noise(&sc, 0).await;
    assert!(written > 32 << 20, "only {written} bytes of WAL written");
    let start = Instant::now();
    while slot_state(&sc, &slot).await.unwrap().0 <= during + written {
        assert!(
            start.elapsed() < PATIENCE,
            "the slot never moved past the other table's writes:\n{}",
            follower.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    follower.interrupt();
    let stopped = follower.wait().await;
    assert_eq!(stopped.code, 130, "{}", stopped.stderr);
    sqlx::query("COMMIT").execute(&mut open).await.unwrap();

    let follower = spawn_follower(&sc, &mapping, &slot);
    until_items(&sc, "the open transaction's change arrives", |items| {
        name_of(items, 2) == Some(&s("spanning"))
    })
    .await;
    // Nothing open now: the WAL the slot keeps shrinks back once a
    // checkpoint has logged the running transactions.
    let written = noise(&sc, 100_000).await;
    exec(&sc, "CHECKPOINT").await;
    let start = Instant::now();
    loop {
        let (_, kept) = slot_state(&sc, &slot).await.unwrap();
        if kept < written / 2 {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the slot keeps {kept} bytes of WAL after {written} written elsewhere"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    exec(&sc, "UPDATE SCHEMA.items SET name = 'late' WHERE id = 3").await;
    until_items(
        &sc,
        "a change after the other table's writes arrives",
        |items| name_of(items, 3) == Some(&s("late")),
    )
    .await;
    follower.interrupt();
    let stopped = follower.wait().await;
    assert_eq!(stopped.code, 130, "{}", stopped.stderr);
    let status = follow(&sc, &mapping, &slot, &["--status"]).await;
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(!status.stdout.contains("warning"), "{}", status.stdout);
}

const DOCS: &str = "
CREATE TABLE {schema}.docs (id int PRIMARY KEY, owner text NOT NULL, body text NOT NULL);
ALTER TABLE {schema}.docs REPLICA IDENTITY FULL;
INSERT INTO {schema}.docs SELECT i, 'alice', (SELECT string_agg(md5(i::text || '-' || j), '') FROM generate_series(1, 300) j) FROM generate_series(1, 5) i;
";

const DOCS_MAPPING: &str = pg_mapping!(
    r#"
[[entity]]
name = "doc"
from = "SCHEMA.docs"
pk = "OWNER#{owner}"
sk = "DOC#{id}"
"#
);

/// An update that moves a row to another item key and leaves its large
/// (TOASTed) value alone, so the change does not carry that value, then
/// the row's delete: the item at the old key goes, by the key the update
/// names, and no item is left at the new one.
#[tokio::test]
async fn a_key_move_of_a_row_with_a_toasted_value_then_its_delete_leaves_no_item() {
    let sc = Scenario::new("follow_toast").postgres(DOCS).start().await;
    let mapping = sc.mapping(DOCS_MAPPING);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    assert!(sc.items().await.contains_key(&key("OWNER#alice", "DOC#1")));
    let stored: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT pg_column_size(body) FROM {}.docs WHERE id = 1",
        sc.pg().name
    )))
    .fetch_one(&sc.pg().pool)
    .await
    .unwrap();
    assert!(
        stored > 2048,
        "the body is stored out of line ({stored} bytes)"
    );
    exec(&sc, "UPDATE SCHEMA.docs SET owner = 'bob' WHERE id = 1").await;
    exec(&sc, "DELETE FROM SCHEMA.docs WHERE id = 1").await;
    exec(&sc, "UPDATE SCHEMA.docs SET owner = 'carol' WHERE id = 2").await;

    let cut = follow(&sc, &mapping, &slot, &["--cutover"]).await;
    let said = format!("{}\n{}", cut.stdout, cut.stderr);
    assert_eq!(cut.code, 0, "{said}");
    let items = sc.items().await;
    let keys: Vec<_> = items.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            key("OWNER#alice", "DOC#3"),
            key("OWNER#alice", "DOC#4"),
            key("OWNER#alice", "DOC#5"),
            key("OWNER#carol", "DOC#2"),
        ]
    );
    let body: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT body FROM {}.docs WHERE id = 2",
        sc.pg().name
    )))
    .fetch_one(&sc.pg().pool)
    .await
    .unwrap();
    assert_eq!(items[&key("OWNER#carol", "DOC#2")]["body"], s(body));
}

/// A followed table changes shape under the follower (`alter`, then a row
/// changed in the new shape: `change`): the follower exits 65 naming the
/// table, what changed and the transaction; what came before is applied,
/// the row in the new shape is not (no value cast to an old type, no
/// column left out); the slot is kept before it. A new full load, a change
/// after it, and a cutover from the kept slot: the table equals the source.
/// Item 4 holds `after` once the cutover is done.
async fn stops_at_a_shape_change(
    prefix: &str,
    alter: &str,
    change: &str,
    what: &str,
    after: &[(&str, AttrValue)],
) {
    let sc = Scenario::new(prefix).postgres(ITEMS).start().await;
    let mapping = sc.mapping(MAPPING);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    let follower = spawn_follower(&sc, &mapping, &slot);
    wait_for(&follower, "following replication slot").await;
    exec(&sc, "UPDATE SCHEMA.items SET name = 'before' WHERE id = 1").await;
    exec(&sc, alter).await;
    exec(&sc, change).await;
    let stopped = follower.wait().await;
    let said = format!("{}\n{}", stopped.stdout, stopped.stderr);
    assert_eq!(stopped.code, 65, "{said}");
    let table = format!("{}.items", sc.pg().name);
    assert!(
        stopped.stderr.contains(&format!(
            "cannot follow ALTER TABLE on table {table} at the transaction committed at "
        )),
        "{said}"
    );
    assert!(stopped.stderr.contains(what), "{said}");
    assert!(
        stopped.stderr.contains(&format!(
            "replication slot {slot} is kept before that transaction"
        )),
        "{said}"
    );
    let items = sc.items().await;
    assert_eq!(name_of(&items, 1), Some(&s("before")));
    let four = &items[&key("ITEM#4", "ITEM")];
    assert_eq!(
        four["name"],
        s("Name 4"),
        "the row in the new shape is not applied"
    );
    assert_eq!(four["code"], s("c4"));
    assert_eq!(four.get("note"), None);
    assert!(slot_state(&sc, &slot).await.is_some(), "the slot is kept");

    reload_change_and_cut_over(&sc, &mapping, &slot).await;
    let items = sc.items().await;
    assert_eq!(name_of(&items, 9), Some(&s("after the load")));
    let four = &items[&key("ITEM#4", "ITEM")];
    assert_eq!(four["name"], s("changed"));
    for (name, value) in after {
        assert_eq!(four.get(*name), Some(value), "{name}: {four:?}");
    }
}

#[tokio::test]
async fn an_added_column_stops_the_follower_before_its_first_row() {
    stops_at_a_shape_change(
        "follow_add_column",
        "ALTER TABLE SCHEMA.items ADD COLUMN note text",
        "UPDATE SCHEMA.items SET note = 'hello', name = 'changed' WHERE id = 4",
        "column note added",
        &[("note", s("hello"))],
    )
    .await;
}

#[tokio::test]
async fn a_widened_type_stops_the_follower_before_its_first_row() {
    stops_at_a_shape_change(
        "follow_widen",
        "ALTER TABLE SCHEMA.items ALTER COLUMN code TYPE text, ALTER COLUMN price TYPE numeric(12,6)",
        "UPDATE SCHEMA.items SET code = 'abcdefgh', price = 99.999999, name = 'changed' WHERE id = 4",
        "column code's type changed; column price's type changed",
        &[("code", s("abcdefgh")), ("price", n("99.999999"))],
    )
    .await;
}

/// The table changes shape while no follower runs, after a change in its
/// old shape: a follower binds to the table as it is when it starts, so it
/// stops at that change (exit 65), and as the table no longer has the
/// stream's shape there, it says to start over rather than to load again
/// (a new full load would stop at the same place); the slot is kept.
#[tokio::test]
async fn a_shape_changed_while_no_follower_ran_says_to_start_over() {
    let sc = Scenario::new("follow_alter_stopped")
        .postgres(ITEMS)
        .start()
        .await;
    let mapping = sc.mapping(MAPPING);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    exec(
        &sc,
        "UPDATE SCHEMA.items SET name = 'old shape' WHERE id = 1",
    )
    .await;
    exec(&sc, "ALTER TABLE SCHEMA.items ADD COLUMN note text").await;
    let stopped = follow(&sc, &mapping, &slot, &[]).await;
    let said = format!("{}\n{}", stopped.stdout, stopped.stderr);
    assert_eq!(stopped.code, 65, "{said}");
    assert!(
        stopped.stderr.contains("column note dropped")
            && stopped
                .stderr
                .contains("the table has changed shape again since")
            && stopped.stderr.contains("--drop-slot")
            && stopped.stderr.contains("run MAPPING --follow"),
        "{said}"
    );
    assert!(slot_state(&sc, &slot).await.is_some(), "the slot is kept");
}

const TWO_TABLES: &str = pg_mapping!(
    r#"
[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "ITEM#{id}"
sk = "ITEM"

[[entity]]
name = "noise"
from = "SCHEMA.noise"
pk = "NOISE#{id}"
sk = "NOISE"
"#
);

/// An LSN as bytes, as the server counts them.
async fn lsn_bytes(sc: &Scenario, lsn: &str) -> i64 {
    sqlx::query_scalar("SELECT pg_wal_lsn_diff($1::text::pg_lsn, '0/0')::int8")
        .bind(lsn)
        .fetch_one(&sc.pg().pool)
        .await
        .unwrap()
}

/// The keys the source's rows map to: what the table holds once it equals
/// the source.
async fn source_keys(sc: &Scenario) -> Vec<(String, String)> {
    let sql = "SELECT 'ITEM#' || id, 'ITEM' FROM SCHEMA.items \
               UNION ALL SELECT 'NOISE#' || id, 'NOISE' FROM SCHEMA.noise ORDER BY 1";
    sqlx::query_as(sqlx::AssertSqlSafe(sql.replace("SCHEMA", &sc.pg().name)))
        .fetch_all(&sc.pg().pool)
        .await
        .unwrap()
}

/// Rows changed, then `truncate` (the followed tables `truncated`) in a
/// transaction that also changes rows before and after it, then one more
/// change: the follower (`running` meanwhile, or started afterwards, when
/// one read holds them all) exits 65 naming the tables, `TRUNCATE` and the
/// transaction's LSN; the changes committed before that transaction are
/// applied and the slot moved past them, none of the transaction or after
/// it is, and the slot is kept before it. A second follower stops at the
/// same place. Starting over as the error says (drop the slot, delete the
/// table, a new `run --follow`) and cutting over: the table equals the
/// source, item for item.
async fn stops_at_a_truncate(prefix: &str, truncate: &str, truncated: &[&str], running: bool) {
    let sc = Scenario::new(prefix).postgres(ITEMS).start().await;
    exec(
        &sc,
        "INSERT INTO SCHEMA.noise SELECT g, 'pad' FROM generate_series(1, 5) g",
    )
    .await;
    let mapping = sc.mapping(TWO_TABLES);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    let follower = running.then(|| {
        let args = [
            "follow",
            &mapping,
            "--slot",
            &slot,
            "--endpoint",
            &sc.dynamo.url,
        ];
        Proc::spawn(sc.path(), &args)
    });
    if let Some(f) = &follower {
        wait_for(f, "following replication slot").await;
    }
    let start = wal_now(&sc).await;
    exec(&sc, "UPDATE SCHEMA.items SET name = 'before' WHERE id = 1").await;
    exec(&sc, "DELETE FROM SCHEMA.items WHERE id = 2").await;
    exec(&sc, "INSERT INTO SCHEMA.items VALUES (51, 'new', 'n', 1)").await;
    let applied = wal_now(&sc).await;
    exec(
        &sc,
        &format!(
            "BEGIN; UPDATE SCHEMA.items SET name = 'same transaction' WHERE id = 3; {truncate}; \
             INSERT INTO SCHEMA.items VALUES (60, 'refilled', 'r', 6); \
             INSERT INTO SCHEMA.noise VALUES (60, 'refilled'); COMMIT"
        ),
    )
    .await;
    exec(&sc, "INSERT INTO SCHEMA.items VALUES (61, 'later', 'l', 7)").await;
    let stopped = match follower {
        Some(f) => f.wait().await,
        None => follow(&sc, &mapping, &slot, &[]).await,
    };
    let said = format!("{}\n{}", stopped.stdout, stopped.stderr);
    assert_eq!(stopped.code, 65, "{said}");
    let tables: Vec<String> = truncated
        .iter()
        .map(|t| format!("{}.{t}", sc.pg().name))
        .collect();
    let head = format!(
        "cannot follow TRUNCATE on table {} at the transaction committed at ",
        tables.join(", ")
    );
    let at = stopped
        .stderr
        .split(&head)
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no {head:?}: {said}"))
        .to_string();
    assert!(
        stopped.stderr.contains(&format!(
            "replication slot {slot} is kept before that transaction"
        )) && stopped.stderr.contains("--drop-slot")
            && stopped.stderr.contains("run MAPPING --follow"),
        "{said}"
    );
    let at = lsn_bytes(&sc, &at).await;
    let (kept, _) = slot_state(&sc, &slot).await.expect("the slot is kept");
    assert!(at > applied, "the truncate's LSN {at} is after {applied}");
    assert!(kept < at, "the slot ({kept}) is before the truncate ({at})");
    assert!(kept > start, "the slot moved past the changes before");
    if !running {
        assert!(kept <= applied, "the slot ({kept}) is not past {applied}");
    }
    let items = sc.items().await;
    assert_eq!(name_of(&items, 1), Some(&s("before")));
    assert!(!items.contains_key(&key("ITEM#2", "ITEM")));
    assert_eq!(name_of(&items, 51), Some(&s("new")));
    assert_eq!(
        name_of(&items, 3),
        Some(&s("Name 3")),
        "nothing of the truncate's transaction"
    );
    assert_eq!(name_of(&items, 60), None);
    assert_eq!(name_of(&items, 61), None);
    assert!(items.contains_key(&key("NOISE#1", "NOISE")));

    let again = follow(&sc, &mapping, &slot, &[]).await;
    assert_eq!(again.code, 65, "{}", again.stderr);
    assert!(again.stderr.contains(&head), "{}", again.stderr);
    assert_eq!(slot_state(&sc, &slot).await.map(|s| s.0), Some(kept));

    let dropped = follow(&sc, &mapping, &slot, &["--drop-slot"]).await;
    assert_eq!(dropped.code, 0, "{}", dropped.stderr);
    assert_eq!(slot_state(&sc, &slot).await, None);
    sc.dynamo
        .client
        .delete_table()
        .table_name(&sc.table)
        .send()
        .await
        .unwrap();
    let (slot, _guard) = loaded(&sc, &mapping).await;
    exec(
        &sc,
        "UPDATE SCHEMA.items SET name = 'after the start over' WHERE id = 61",
    )
    .await;
    cut_over_equal(&sc, &mapping, &slot).await;
    let items = sc.items().await;
    let keys: Vec<(String, String)> = items.keys().cloned().collect();
    assert_eq!(keys, source_keys(&sc).await);
    assert_eq!(name_of(&items, 61), Some(&s("after the start over")));
    assert_eq!(name_of(&items, 60), Some(&s("refilled")));
}

#[tokio::test]
async fn a_truncate_stops_the_follower_before_it() {
    stops_at_a_truncate(
        "follow_truncate",
        "TRUNCATE SCHEMA.items",
        &["items"],
        false,
    )
    .await;
}

#[tokio::test]
async fn a_truncate_only_stops_a_running_follower_before_it() {
    stops_at_a_truncate(
        "follow_truncate_only",
        "TRUNCATE ONLY SCHEMA.items",
        &["items"],
        true,
    )
    .await;
}

#[tokio::test]
async fn a_truncate_of_two_followed_tables_names_both() {
    stops_at_a_truncate(
        "follow_truncate_two",
        "TRUNCATE SCHEMA.items, SCHEMA.noise",
        &["items", "noise"],
        false,
    )
    .await;
}

const EMBEDS: &str = "
CREATE TABLE {schema}.customers (customer_id int PRIMARY KEY, name text NOT NULL);
INSERT INTO {schema}.customers SELECT c, 'customer ' || c FROM generate_series(1, 3) c;
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL);
ALTER TABLE {schema}.orders REPLICA IDENTITY FULL;
INSERT INTO {schema}.orders SELECT o, o % 3 + 1, 'new' FROM generate_series(1, 6) o;
";

const EMBEDS_MAPPING: &str = pg_mapping!(
    r#"
[[entity]]
name = "customer"
from = "SCHEMA.customers"
pk = "CUST#{customer_id}"
sk = "PROFILE"

[[entity.embed]]
name = "orders"
from = "SCHEMA.orders"
parent_key = ["customer_id"]
order_by = ["order_id"]
exclude = ["customer_id"]
"#
);

/// A table followed only as the embedded rows of another entity's items:
/// its truncate stops the follower the same way (exit 65, the slot kept
/// before it), its embedded rows still in the items.
#[tokio::test]
async fn a_truncate_of_an_embedded_table_stops_the_follower_before_it() {
    let sc = Scenario::new("follow_truncate_embed")
        .postgres(EMBEDS)
        .start()
        .await;
    let mapping = sc.mapping(EMBEDS_MAPPING);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    let before = sc.items().await;
    let start = wal_now(&sc).await;
    exec(&sc, "TRUNCATE SCHEMA.orders").await;
    let stopped = follow(&sc, &mapping, &slot, &[]).await;
    let said = format!("{}\n{}", stopped.stdout, stopped.stderr);
    assert_eq!(stopped.code, 65, "{said}");
    assert!(
        stopped.stderr.contains(&format!(
            "cannot follow TRUNCATE on table {}.orders at the transaction committed at ",
            sc.pg().name
        )),
        "{said}"
    );
    let (kept, _) = slot_state(&sc, &slot).await.expect("the slot is kept");
    assert!(
        kept <= start,
        "the slot ({kept}) is before the truncate ({start})"
    );
    assert_eq!(sc.items().await, before);
}

/// `follow --cutover` from `slot`, which must end with the table equal to
/// the source; what it said, for later messages.
async fn cut_over_equal(sc: &Scenario, mapping: &str, slot: &str) -> String {
    let cut = follow(sc, mapping, slot, &["--cutover"]).await;
    let said = format!("{}\n{}", cut.stdout, cut.stderr);
    assert_eq!(cut.code, 0, "{said}");
    assert!(
        cut.stdout
            .contains("cut over: the table equals the source, item by item"),
        "{said}"
    );
    said
}

/// After a stop the user fixes with a new full load: the load, a change
/// after it (item 9's name becomes `after the load`), then a cutover from
/// the kept slot that ends equal.
async fn reload_change_and_cut_over(sc: &Scenario, mapping: &str, slot: &str) -> String {
    let reload = sc
        .run(mapping, &["--if-not-empty", "append", "--quiet"])
        .await;
    assert_eq!(reload.code, 0, "{}", reload.stderr);
    exec(
        sc,
        "UPDATE SCHEMA.items SET name = 'after the load' WHERE id = 9",
    )
    .await;
    cut_over_equal(sc, mapping, slot).await
}

/// `follow MAPPING --slot SLOT --endpoint URL` running in the background.
fn spawn_follower(sc: &Scenario, mapping: &str, slot: &str) -> Proc {
    Proc::spawn(
        sc.path(),
        &[
            "follow",
            mapping,
            "--slot",
            slot,
            "--endpoint",
            &sc.dynamo.url,
        ],
    )
}

/// A backlog of 35,000 changes (an insert of 34,950 rows and an update of
/// every row, in three transactions) applied by one cutover: the follower's
/// reads through it grow past the 10,000 changes of a batch (every read
/// comes back full until the last), and the table equals the source,
/// every row's latest version, nothing before the fence missed.
#[tokio::test]
async fn a_backlog_read_in_growing_reads_is_applied_whole_by_a_cutover() {
    let sc = Scenario::new("cut_backlog").postgres(ITEMS).start().await;
    let mapping = sc.mapping(MAPPING);
    let (slot, _guard) = loaded(&sc, &mapping).await;
    exec(
        &sc,
        "INSERT INTO SCHEMA.items SELECT i, 'Name ' || i, 'c' || i % 10, 1.5 FROM generate_series(51, 35000) i",
    )
    .await;
    exec(
        &sc,
        "UPDATE SCHEMA.items SET name = 'renamed ' || id WHERE id <= 17500",
    )
    .await;
    exec(
        &sc,
        "UPDATE SCHEMA.items SET name = 'renamed ' || id WHERE id > 17500",
    )
    .await;
    let out = follow(&sc, &mapping, &slot, &["--cutover"]).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let items = sc.items().await;
    assert_eq!(items.len(), 35_000);
    for id in [1, 50, 51, 10_000, 17_500, 17_501, 30_000, 35_000] {
        assert_eq!(
            name_of(&items, id),
            Some(&s(format!("renamed {id}"))),
            "item {id}"
        );
    }
    let renamed = items
        .values()
        .filter(|i| matches!(i.get("name"), Some(AttrValue::S(n)) if n.starts_with("renamed ")))
        .count();
    assert_eq!(renamed, 35_000, "every row's latest version");
    assert_eq!(
        slot_state(&sc, &slot).await,
        None,
        "the cutover dropped the slot"
    );
}
