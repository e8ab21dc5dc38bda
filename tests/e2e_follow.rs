//! `run --follow` on PostgreSQL: a writer inserts, updates (also moving
//! rows to other keys, by their primary key and by a key template's other
//! column) and deletes all through the full load and the follow, also rows
//! that customers' items embed (and move from one customer to another),
//! and orders that move a pointer forward; the
//! follower is SIGKILLed once and resumed from its slot, stopped with
//! SIGINT, then cut over; `verify --deep` and an independent comparison
//! of the table with the source agree, and the slot is gone. A table
//! without a primary key is refused for `--follow`.
//!
//! One table holds values large enough to be TOASTed, which an update of
//! another column leaves out of the change: those rows are read again.
//!
//! 3,000 rows a table (the issue's scenario has 50,000): enough for the
//! writer to change rows while the full load reads them, small enough for
//! a debug build on a small machine.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sql2ddb_core::AttrValue;

use crate::common::*;

const ROWS: i64 = 3_000;

const FIXTURE: &str = "
CREATE TABLE {schema}.customers (customer_id int PRIMARY KEY, name text NOT NULL, credit numeric(10,2) NOT NULL);
INSERT INTO {schema}.customers SELECT c, 'customer ' || c, c * 1.25 FROM generate_series(1, 3000) c;
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, total numeric(10,2) NOT NULL);
ALTER TABLE {schema}.orders REPLICA IDENTITY FULL;
INSERT INTO {schema}.orders SELECT o, o % 3000 + 1, (ARRAY['new','paid'])[o % 2 + 1], o * 10 FROM generate_series(1, 3000) o;
CREATE TABLE {schema}.notes (id int PRIMARY KEY, body text NOT NULL, n int NOT NULL);
INSERT INTO {schema}.notes SELECT i, (SELECT string_agg(md5(i::text || '-' || j), '') FROM generate_series(1, 300) j), 0 FROM generate_series(1, 20) i;
CREATE TABLE {schema}.events (at timestamptz NOT NULL, what text);
";

const MAPPING: &str = r#"version = 1
[source]
url = "postgres://root@127.0.0.1:5432/test"
page_size = 500
[target]
table = "TABLE"
create = true
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "customer"
from = "SCHEMA.customers"
pk = "CUST#{customer_id:07}"
sk = "PROFILE"

[[entity.embed]]
name = "orders"
from = "SCHEMA.orders"
parent_key = ["customer_id"]
order_by = ["order_id"]
exclude = ["customer_id"]

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "CUST#{customer_id:07}"
sk = "ORDER#{order_id:07}"

[[pointer]]
entity = "order"
name = "LAST_ORDER"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = { attribute = "orderId", column = "order_id" }
attributes = { customerId = "{customer_id}" }

[[entity]]
name = "note"
from = "SCHEMA.notes"
pk = "NOTE#{id:07}"
sk = "NOTE"
"#;

const NO_KEY_MAPPING: &str = r#"version = 1
[source]
url = "postgres://root@127.0.0.1:5432/test"
[target]
table = "TABLE"
create = true
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "event"
from = "SCHEMA.events"
key = ["at"]
pk = "EVENT"
sk = "{at}"
"#;

/// Changes the source until told to stop: every kind of change, each in a
/// transaction of its own or a few together.
async fn writer(pool: sqlx::PgPool, schema: String, stop: Arc<AtomicBool>) -> u64 {
    let mut n: i64 = 0;
    let mut seed: u64 = 7;
    let mut next = move |m: i64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as i64).rem_euclid(m) + 1
    };
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let (c, o) = (next(ROWS), next(ROWS));
        let s = &schema;
        let sql = match n % 8 {
            // A row whose big (TOASTed) value the update leaves alone: the
            // change does not carry it.
            7 => format!("UPDATE {s}.notes SET n = n + 1 WHERE id = {}", c % 20 + 1),
            0 => format!("INSERT INTO {s}.customers VALUES ({}, 'new {n}', {n}.5) ON CONFLICT DO NOTHING", 1_000_000 + n),
            1 => format!("UPDATE {s}.customers SET name = 'renamed {n}', credit = credit + 1 WHERE customer_id = {c}"),
            // A primary key change: the item moves to another key, and its
            // orders follow it in the same transaction (the source never
            // holds an order without its customer: `verify --deep` counts
            // such rows as having no parent).
            2 => format!(
                "BEGIN; UPDATE {s}.customers SET customer_id = customer_id + 2000000 WHERE customer_id = {c}; \
                 UPDATE {s}.orders SET customer_id = customer_id + 2000000 WHERE customer_id = {c}; COMMIT"
            ),
            // A key template's other column: the order moves to another customer.
            3 => format!(
                "UPDATE {s}.orders SET customer_id = {c}, status = 'moved' WHERE order_id = {o} \
                 AND EXISTS (SELECT 1 FROM {s}.customers WHERE customer_id = {c})"
            ),
            4 => format!("DELETE FROM {s}.orders WHERE order_id = {o}"),
            5 => format!(
                "BEGIN; INSERT INTO {s}.orders SELECT {}, {c}, 'new', {n} \
                 WHERE EXISTS (SELECT 1 FROM {s}.customers WHERE customer_id = {c}) ON CONFLICT DO NOTHING; \
                 UPDATE {s}.orders SET total = total + 1 WHERE order_id = {}; COMMIT",
                1_000_000 + n,
                1_000_000 + n
            ),
            _ => format!(
                "BEGIN; DELETE FROM {s}.orders WHERE customer_id = {c}; \
                 DELETE FROM {s}.customers WHERE customer_id = {c}; COMMIT"
            ),
        };
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n as u64
}

/// Waits until the process has printed `what` on stderr.
async fn wait_for(p: &Proc, what: &str) {
    let start = Instant::now();
    while !p.stderr.lock().unwrap().contains(what) {
        assert!(
            start.elapsed() < PATIENCE,
            "never printed {what:?}:\n{}",
            p.stderr.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The items the source's rows map to, worked out here: (PK, SK) → the
/// attributes compared.
async fn expected(pg: &PgSchema) -> BTreeMap<(String, String), Vec<(String, AttrValue)>> {
    let s = &pg.name;
    let mut out = BTreeMap::new();
    let customers: Vec<(i32, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT customer_id, name FROM {s}.customers"
    )))
    .fetch_all(&pg.pool)
    .await
    .unwrap();
    for (id, name) in customers {
        out.insert(
            (format!("CUST#{id:07}"), "PROFILE".to_string()),
            vec![("name".to_string(), s_(name))],
        );
    }
    let orders: Vec<(i32, i32, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT order_id, customer_id, status FROM {s}.orders"
    )))
    .fetch_all(&pg.pool)
    .await
    .unwrap();
    for (id, customer, status) in orders {
        out.insert(
            (format!("CUST#{customer:07}"), format!("ORDER#{id:07}")),
            vec![("status".to_string(), s_(status))],
        );
    }
    let notes: Vec<(i32, String, i32)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, body, n FROM {s}.notes"
    )))
    .fetch_all(&pg.pool)
    .await
    .unwrap();
    for (id, body, n) in notes {
        out.insert(
            (format!("NOTE#{id:07}"), "NOTE".to_string()),
            vec![
                ("body".to_string(), s_(body)),
                ("n".to_string(), AttrValue::N(n.to_string())),
            ],
        );
    }
    out
}

fn s_(v: String) -> AttrValue {
    AttrValue::S(v)
}

/// Drops the test's slot and publication when the test ends, also when it
/// fails: a forgotten slot keeps the server's WAL.
struct SlotGuard(String);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let slot = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                use sqlx::Connection;
                let Ok(mut conn) = sqlx::PgConnection::connect(pg_url()).await else {
                    return;
                };
                let _ = sqlx::query(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                     WHERE slot_name = $1 AND NOT active",
                )
                .bind(&slot)
                .execute(&mut conn)
                .await;
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP PUBLICATION IF EXISTS \"{slot}\""
                )))
                .execute(&mut conn)
                .await;
            })
        })
        .join();
    }
}

async fn slot_exists(pg: &PgSchema, slot: &str) -> bool {
    let n: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1")
            .bind(slot)
            .fetch_one(&pg.pool)
            .await
            .unwrap();
    let p: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_publication WHERE pubname = $1")
        .bind(slot)
        .fetch_one(&pg.pool)
        .await
        .unwrap();
    n + p > 0
}

#[tokio::test]
async fn follow_survives_a_kill_and_cuts_over_to_an_equal_table() {
    let sc = Scenario::new("follow").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(MAPPING);
    let pg = sc.pg();
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writer(pg.pool.clone(), pg.name.clone(), stop.clone()));

    let url = sc.dynamo.url.clone();
    let first = Proc::spawn(
        sc.path(),
        &["run", &mapping, "--endpoint", &url, "--follow", "--quiet"],
    );
    let run_id = first.run_id().await;
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    let _dropped_at_the_end = SlotGuard(slot.clone());
    // The full load is done and the changes since the slot are being applied.
    wait_for(&first, &format!("following replication slot {slot}")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    first.kill().await;
    assert!(
        slot_exists(pg, &slot).await,
        "the slot outlives its follower"
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    let follow = ["follow", &mapping, "--slot", &slot, "--endpoint", &url];
    let second = Proc::spawn(sc.path(), &follow);
    wait_for(&second, &format!("following replication slot {slot}")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let changes = writing.await.unwrap();
    assert!(changes > 100, "the writer made only {changes} changes");
    second.interrupt();
    let stopped = second.wait().await;
    assert_eq!(stopped.code, 130, "{}", stopped.stderr);
    assert!(
        stopped
            .stderr
            .contains(&format!("replication slot {slot} is kept")),
        "{}",
        stopped.stderr
    );

    let status = sc
        .sql2ddb(&["follow", &mapping, "--slot", &slot, "--status"])
        .await;
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains(&format!("slot {slot}: applied to")),
        "{}",
        status.stdout
    );

    // The run's id names its slot as well.
    let cut = sc
        .sql2ddb(&[
            "follow",
            &mapping,
            "--run",
            &run_id,
            "--endpoint",
            &url,
            "--cutover",
        ])
        .await;
    assert_eq!(cut.code, 0, "{}", cut.stderr);
    assert!(
        cut.stderr
            .contains("cut over: the table equals the source, item by item"),
        "{}",
        cut.stderr
    );
    assert!(
        !slot_exists(pg, &slot).await,
        "cutover drops the slot and publication"
    );

    let verify = sc
        .sql2ddb(&["verify", &mapping, "--deep", "--endpoint", &url])
        .await;
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);

    let want = expected(pg).await;
    let mut got = sc.items().await;
    // The pointer moved forward with the orders inserted while following.
    let last: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT max(order_id) FROM {}.orders",
        pg.name
    )))
    .fetch_one(&pg.pool)
    .await
    .unwrap();
    let pointer = got
        .remove(&("LAST_ORDER".to_string(), "LAST_ORDER".to_string()))
        .expect("the pointer item");
    assert!(last > 1_000_000, "the writer inserted orders");
    assert_eq!(
        pointer.get("orderId"),
        Some(&AttrValue::N(last.to_string()))
    );
    let got_keys: Vec<_> = got.keys().cloned().collect();
    let want_keys: Vec<_> = want.keys().cloned().collect();
    assert_eq!(got_keys.len(), want_keys.len(), "items vs rows");
    assert!(got_keys == want_keys, "the table's keys are the source's");
    for (key, attrs) in &want {
        for (name, value) in attrs {
            assert_eq!(got[key].get(name), Some(value), "{key:?} {name}");
        }
    }
    // Each customer's item holds its orders as the source has them now.
    let per_customer: Vec<(i32, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT c.customer_id, count(o.order_id) FROM {0}.customers c \
         LEFT JOIN {0}.orders o ON o.customer_id = c.customer_id GROUP BY c.customer_id",
        pg.name
    )))
    .fetch_all(&pg.pool)
    .await
    .unwrap();
    for (id, n) in per_customer {
        let item = &got[&(format!("CUST#{id:07}"), "PROFILE".to_string())];
        match item.get("orders") {
            Some(AttrValue::L(orders)) => assert_eq!(orders.len() as i64, n, "customer {id}"),
            other => panic!("customer {id}: orders {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_table_without_a_primary_key_is_refused_for_follow() {
    let sc = Scenario::new("follow_nokey")
        .postgres(FIXTURE)
        .start()
        .await;
    let mapping = sc.mapping(NO_KEY_MAPPING);
    let run = sc.run(&mapping, &["--follow", "--quiet"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("entity event: cannot be followed")
            && run.stderr.contains("has no primary key"),
        "{}",
        run.stderr
    );
    assert!(!sc.table_exists(&sc.table).await, "nothing was written");
}
