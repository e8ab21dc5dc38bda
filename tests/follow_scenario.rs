//! The follow scenario shared by PostgreSQL and MariaDB (`e2e_follow`,
//! `e2e_follow_mysql`): a writer inserts, updates (also moving rows to
//! other keys, by their primary key and by a key template's other column)
//! and deletes all through the full load and the follow, also rows that
//! customers' items embed (and move from one customer to another), and
//! orders that move a pointer forward; the follower is SIGKILLed once and
//! resumed from its checkpoint (PostgreSQL: the slot; MariaDB: the binary
//! log position in the run's directory), stopped with SIGINT, then cut
//! over; `verify --deep` and an independent comparison of the table with
//! the source agree. A table without a primary key is refused for
//! `--follow`.
//!
//! The source: [`ROWS`] (25,000) customers and as many orders, 50,000
//! rows between them, and 20 notes; the full load reads them in pages of
//! 2,000 rows. The test asserts that the writer made every kind of change
//! between the follow's starting position and the end of the full load,
//! so the load runs under the changes. The independent comparison checks
//! every item's key, the attributes the writer changes, each customer's
//! embedded orders (ids and statuses, in order) and the pointer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sql2ddb_core::AttrValue;

use crate::common::*;

/// Customers in the source, and orders (a 50,000-row source in all).
pub const ROWS: i64 = 25_000;

/// The source database a scenario follows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Db {
    Postgres,
    MariaDb,
}

const PG_FIXTURE: &str = "
CREATE TABLE {schema}.customers (customer_id int PRIMARY KEY, name text NOT NULL, credit numeric(10,2) NOT NULL);
INSERT INTO {schema}.customers SELECT c, 'customer ' || c, c * 1.25 FROM generate_series(1, {rows}) c;
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, total numeric(10,2) NOT NULL);
ALTER TABLE {schema}.orders REPLICA IDENTITY FULL;
INSERT INTO {schema}.orders SELECT o, o % {rows} + 1, (ARRAY['new','paid'])[o % 2 + 1], o * 10 FROM generate_series(1, {rows}) o;
CREATE TABLE {schema}.notes (id int PRIMARY KEY, body text NOT NULL, n int NOT NULL);
INSERT INTO {schema}.notes SELECT i, (SELECT string_agg(md5(i::text || '-' || j), '') FROM generate_series(1, 300) j), 0 FROM generate_series(1, 20) i;
CREATE TABLE {schema}.events (at timestamptz NOT NULL, what text);
";

const MARIADB_FIXTURE: &str = "
CREATE TABLE customers (customer_id int PRIMARY KEY, name text NOT NULL, credit decimal(10,2) NOT NULL);
INSERT INTO customers SELECT seq, CONCAT('customer ', seq), seq * 1.25 FROM seq_1_to_{rows};
CREATE TABLE orders (order_id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, total decimal(10,2) NOT NULL);
INSERT INTO orders SELECT seq, seq % {rows} + 1, IF(seq % 2 = 0, 'new', 'paid'), seq * 10 FROM seq_1_to_{rows};
CREATE TABLE notes (id int PRIMARY KEY, body mediumtext NOT NULL, n int NOT NULL);
INSERT INTO notes SELECT seq, REPEAT(MD5(seq), 300), 0 FROM seq_1_to_20;
CREATE TABLE events (at datetime(6) NOT NULL, what text);
";

const MAPPING: &str = pg_mapping!(
    url = "SOURCE_URL",
    "page_size = 2000",
    r#"
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
"#
);

const NO_KEY_MAPPING: &str = pg_mapping!(
    url = "SOURCE_URL",
    "",
    r#"
[[entity]]
name = "event"
from = "SCHEMA.events"
key = ["at"]
pk = "EVENT"
sk = "{at}"
"#
);

/// A connection to the scenario's source, either database.
#[derive(Clone)]
enum Pool {
    Pg(sqlx::PgPool),
    My(sqlx::MySqlPool),
}

impl Pool {
    async fn exec(&self, sql: String) {
        match self {
            Pool::Pg(p) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(p)
                    .await
                    .unwrap();
            }
            Pool::My(p) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(p)
                    .await
                    .unwrap();
            }
        }
    }

    /// Every row of `sql`, each column read as text.
    async fn texts(&self, sql: String) -> Vec<Vec<String>> {
        use sqlx::Row;
        match self {
            Pool::Pg(p) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(p)
                .await
                .unwrap()
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect())
                .collect(),
            Pool::My(p) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(p)
                .await
                .unwrap()
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect())
                .collect(),
        }
    }
}

/// The scenario's source: its database, connections and table qualifier.
struct Source {
    db: Db,
    pool: Pool,
    /// `schema` (PostgreSQL) or `database` (MariaDB) the tables are in.
    name: String,
    url: String,
}

impl Source {
    fn of(db: Db, sc: &Scenario) -> Source {
        match db {
            Db::Postgres => Source {
                db,
                pool: Pool::Pg(sc.pg().pool.clone()),
                name: sc.pg().name.clone(),
                url: pg_url().to_string(),
            },
            Db::MariaDb => Source {
                db,
                pool: Pool::My(sc.my().pool.clone()),
                name: sc.my().name.clone(),
                url: sc.my().url.clone(),
            },
        }
    }

    /// `CAST(expr AS <text>)` in the source's dialect.
    fn text(&self, expr: &str) -> String {
        match self.db {
            Db::Postgres => format!("CAST({expr} AS text)"),
            Db::MariaDb => format!("CAST({expr} AS CHAR)"),
        }
    }
}

async fn start(db: Db, prefix: &str) -> Scenario {
    let setup = Scenario::new(prefix);
    let rows = ROWS.to_string();
    match db {
        Db::Postgres => setup.postgres(&PG_FIXTURE.replace("{rows}", &rows)),
        Db::MariaDb => setup.mariadb(&MARIADB_FIXTURE.replace("{rows}", &rows)),
    }
    .start()
    .await
}

fn mapping(sc: &Scenario, source: &Source, text: &str) -> String {
    sc.mapping(
        &text
            .replace("SOURCE_URL", &source.url)
            .replace("SCHEMA", &source.name),
    )
}

/// One change of the source, chosen by `n`, with row numbers `c` and `o`:
/// every kind of change, each in a transaction of its own or a few together.
fn change(db: Db, s: &str, n: i64, c: i64, o: i64) -> String {
    let pg = db == Db::Postgres;
    let insert = if pg { "INSERT" } else { "INSERT IGNORE" };
    let or_nothing = if pg { " ON CONFLICT DO NOTHING" } else { "" };
    let from_nothing = if pg { "" } else { " FROM DUAL" };
    match n % 8 {
        // PostgreSQL: a row whose big (TOASTed) value the update leaves
        // alone: the change does not carry it.
        7 => format!("UPDATE {s}.notes SET n = n + 1 WHERE id = {}", c % 20 + 1),
        0 => format!(
            "{insert} INTO {s}.customers VALUES ({}, 'new {n}', {n}.5){or_nothing}",
            1_000_000 + n
        ),
        1 => format!("UPDATE {s}.customers SET name = 'renamed {n}', credit = credit + 1 WHERE customer_id = {c}"),
        // A primary key change: the item moves to another key, and its
        // orders follow it in the same transaction (the source never holds
        // an order without its customer: `verify --deep` counts such rows as
        // having no parent).
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
            "BEGIN; {insert} INTO {s}.orders SELECT {}, {c}, 'new', {n}{from_nothing} \
             WHERE EXISTS (SELECT 1 FROM {s}.customers WHERE customer_id = {c}){or_nothing}; \
             UPDATE {s}.orders SET total = total + 1 WHERE order_id = {}; COMMIT",
            1_000_000 + n,
            1_000_000 + n
        ),
        _ => format!(
            "BEGIN; DELETE FROM {s}.orders WHERE customer_id = {c}; \
             DELETE FROM {s}.customers WHERE customer_id = {c}; COMMIT"
        ),
    }
}

/// Changes the source until told to stop, counting its changes in `made`;
/// returns how many changes it made.
async fn writer(db: Db, pool: Pool, s: String, stop: Arc<AtomicBool>, made: Arc<AtomicU64>) -> u64 {
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
        pool.exec(change(db, &s, n, c, o)).await;
        made.store(n as u64, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n as u64
}

/// Waits until the writer has made `more` changes after those it has made
/// so far (`made`).
async fn more_changes(made: &AtomicU64, writing: &tokio::task::JoinHandle<u64>, more: u64) {
    let until = made.load(Ordering::Relaxed) + more;
    let start = Instant::now();
    while made.load(Ordering::Relaxed) < until {
        assert!(!writing.is_finished(), "the writer stopped");
        assert!(
            start.elapsed() < PATIENCE,
            "the writer made fewer than {more} changes in {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the process has printed `what` on stderr.
pub async fn wait_for(p: &Proc, what: &str) {
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

/// Drops the test's slot and publication when the test ends, also when it
/// fails: a forgotten slot keeps the server's WAL.
pub struct SlotGuard(pub String);

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

async fn slot_exists(src: &Source, slot: &str) -> bool {
    let Pool::Pg(pool) = &src.pool else {
        return false;
    };
    let n: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1")
            .bind(slot)
            .fetch_one(pool)
            .await
            .unwrap();
    let p: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_publication WHERE pubname = $1")
        .bind(slot)
        .fetch_one(pool)
        .await
        .unwrap();
    n + p > 0
}

/// What the table holds when it equals the source, worked out here from
/// the source's rows.
struct Expected {
    /// (PK, SK) → the attributes compared.
    items: BTreeMap<(String, String), Vec<(String, AttrValue)>>,
    /// Each customer's orders as its item embeds them: order_id → status.
    orders_of: BTreeMap<i64, BTreeMap<i64, String>>,
}

async fn expected(src: &Source) -> Expected {
    let s = &src.name;
    let t = |e: &str| src.text(e);
    let mut out = BTreeMap::new();
    let mut orders_of = BTreeMap::new();
    let customers = src
        .pool
        .texts(format!(
            "SELECT {}, name FROM {s}.customers",
            t("customer_id")
        ))
        .await;
    for r in customers {
        let id: i64 = r[0].parse().unwrap();
        out.insert(
            (format!("CUST#{id:07}"), "PROFILE".to_string()),
            vec![("name".to_string(), AttrValue::S(r[1].clone()))],
        );
        orders_of.insert(id, BTreeMap::new());
    }
    let orders = src
        .pool
        .texts(format!(
            "SELECT {}, {}, status FROM {s}.orders",
            t("order_id"),
            t("customer_id")
        ))
        .await;
    for r in orders {
        let (id, customer): (i64, i64) = (r[0].parse().unwrap(), r[1].parse().unwrap());
        out.insert(
            (format!("CUST#{customer:07}"), format!("ORDER#{id:07}")),
            vec![("status".to_string(), AttrValue::S(r[2].clone()))],
        );
        if let Some(embedded) = orders_of.get_mut(&customer) {
            embedded.insert(id, r[2].clone());
        }
    }
    let notes = src
        .pool
        .texts(format!(
            "SELECT {}, body, {} FROM {s}.notes",
            t("id"),
            t("n")
        ))
        .await;
    for r in notes {
        let id: i64 = r[0].parse().unwrap();
        out.insert(
            (format!("NOTE#{id:07}"), "NOTE".to_string()),
            vec![
                ("body".to_string(), AttrValue::S(r[1].clone())),
                ("n".to_string(), AttrValue::N(r[2].clone())),
            ],
        );
    }
    Expected {
        items: out,
        orders_of,
    }
}

/// The whole scenario on `db`: full load and follow under a writer, a
/// SIGKILL, a resume, a SIGINT, the status, the cutover, and the table
/// compared with the source by `verify --deep` and by the test itself.
pub async fn survives_a_kill_and_cuts_over(db: Db, prefix: &str) {
    let sc = start(db, prefix).await;
    let src = Source::of(db, &sc);
    let mapping = mapping(&sc, &src, MAPPING);
    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicU64::new(0));
    let writing = tokio::spawn(writer(
        db,
        src.pool.clone(),
        src.name.clone(),
        stop.clone(),
        made.clone(),
    ));

    let url = sc.dynamo.url.clone();
    let first = Proc::spawn(
        sc.path(),
        &["run", &mapping, "--endpoint", &url, "--follow", "--quiet"],
    );
    let run_id = first.run_id().await;
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    let _dropped_at_the_end = (db == Db::Postgres).then(|| SlotGuard(slot.clone()));
    let checkpoint = sc
        .path()
        .join("sql2ddb-runs")
        .join(&run_id)
        .join(sql2ddb_engine::follow::BINLOG_CHECKPOINT);
    let following = match db {
        Db::Postgres => format!("following replication slot {slot}"),
        Db::MariaDb => "following binary log checkpoint".to_string(),
    };
    // The position the follow starts from is taken before the full load
    // (PostgreSQL: the slot; MariaDB: the snapshot's binary log position).
    let anchored = match db {
        Db::Postgres => format!("replication slot {slot} created at"),
        Db::MariaDb => "the binary log is followed from the snapshot's position".to_string(),
    };
    wait_for(&first, &anchored).await;
    let before_load = made.load(Ordering::Relaxed);
    // The full load is done and the changes since its snapshot are being applied.
    wait_for(&first, &following).await;
    let during_load = made.load(Ordering::Relaxed) - before_load;
    // The kinds of change take turns: eight in a row are one of each.
    assert!(
        during_load >= 8,
        "the writer made only {during_load} change(s) while the full load ran"
    );
    // Killed mid-stream: while the follower applies what the writer does.
    more_changes(&made, &writing, 50).await;
    first.kill().await;
    match db {
        Db::Postgres => assert!(
            slot_exists(&src, &slot).await,
            "the slot outlives its follower"
        ),
        Db::MariaDb => {
            // It holds the GTID position too, and the follower goes on
            // from that one.
            let held = std::fs::read_to_string(&checkpoint).unwrap_or_else(|e| {
                panic!(
                    "the position outlives its follower: {}: {e}",
                    checkpoint.display()
                )
            });
            assert!(
                held.lines().nth(1).is_some_and(|l| l.starts_with("gtid ")),
                "{held:?}"
            );
        }
    }

    // Changes the follower is not there to see.
    more_changes(&made, &writing, 25).await;
    let resume: Vec<&str> = match db {
        Db::Postgres => vec!["follow", &mapping, "--slot", &slot, "--endpoint", &url],
        Db::MariaDb => vec!["follow", &mapping, "--run", &run_id, "--endpoint", &url],
    };
    let second = Proc::spawn(sc.path(), &resume);
    wait_for(&second, &following).await;
    more_changes(&made, &writing, 50).await;
    stop.store(true, Ordering::Relaxed);
    let changes = writing.await.unwrap();
    assert!(changes > 100, "the writer made only {changes} changes");
    second.interrupt();
    let stopped = second.wait().await;
    assert_eq!(stopped.code, 130, "{}", stopped.stderr);
    let kept = match db {
        Db::Postgres => format!("replication slot {slot} is kept"),
        Db::MariaDb => "follow again to go on from there".to_string(),
    };
    // The summary (and how to go on) is the follow's report: on stdout.
    assert!(
        stopped.stdout.contains(&kept),
        "{}\n{}",
        stopped.stdout,
        stopped.stderr
    );

    let (status_args, says) = match db {
        Db::Postgres => (
            vec!["follow", &mapping, "--slot", &slot, "--status"],
            format!("slot {slot}: applied to"),
        ),
        Db::MariaDb => (
            vec!["follow", &mapping, "--run", &run_id, "--status"],
            format!("run {run_id}: applied to binary log position"),
        ),
    };
    let status = sc.sql2ddb(&status_args).await;
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(status.stdout.contains(&says), "{}", status.stdout);
    if db == Db::MariaDb {
        assert!(status.stdout.contains("(GTID "), "{}", status.stdout);
    }

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
        cut.stdout
            .contains("cut over: the table equals the source, item by item"),
        "{}\n{}",
        cut.stdout,
        cut.stderr
    );
    if db == Db::Postgres {
        assert!(
            !slot_exists(&src, &slot).await,
            "cutover drops the slot and publication"
        );
    }

    let verify = sc
        .sql2ddb(&["verify", &mapping, "--deep", "--endpoint", &url])
        .await;
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    compare(&sc, &src).await;
}

/// The table equals the source: every item's key and attributes, the
/// pointer at the last order, each customer's embedded orders.
async fn compare(sc: &Scenario, src: &Source) {
    let want = expected(src).await;
    let mut got = sc.items().await;
    // The pointer moved forward with the orders inserted while following.
    let last: i64 = src
        .pool
        .texts(format!(
            "SELECT {} FROM {}.orders",
            src.text("max(order_id)"),
            src.name
        ))
        .await[0][0]
        .parse()
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
    let want_keys: Vec<_> = want.items.keys().cloned().collect();
    assert_eq!(got_keys.len(), want_keys.len(), "items vs rows");
    assert!(got_keys == want_keys, "the table's keys are the source's");
    for (key, attrs) in &want.items {
        for (name, value) in attrs {
            assert_eq!(got[key].get(name), Some(value), "{key:?} {name}");
        }
    }
    // Each customer's item holds its orders as the source has them now, in
    // order_id order.
    for (id, orders_of) in &want.orders_of {
        let item = &got[&(format!("CUST#{id:07}"), "PROFILE".to_string())];
        let orders: Vec<(AttrValue, AttrValue)> = match item.get("orders") {
            Some(AttrValue::L(orders)) => orders
                .iter()
                .map(|o| match o {
                    AttrValue::M(o) => (
                        o.get("order_id").cloned().unwrap_or(AttrValue::Null),
                        o.get("status").cloned().unwrap_or(AttrValue::Null),
                    ),
                    other => panic!("customer {id}: an order {other:?}"),
                })
                .collect(),
            other => panic!("customer {id}: orders {other:?}"),
        };
        let want_orders: Vec<(AttrValue, AttrValue)> = orders_of
            .iter()
            .map(|(order, status)| {
                (
                    AttrValue::N(order.to_string()),
                    AttrValue::S(status.clone()),
                )
            })
            .collect();
        assert_eq!(orders, want_orders, "customer {id}'s orders");
    }
}

/// `run --follow` of a mapping whose table has no primary key stops before
/// anything is written, naming the entity and why.
pub async fn refuses_a_table_without_a_primary_key(db: Db, prefix: &str) {
    let sc = start(db, prefix).await;
    let src = Source::of(db, &sc);
    let mapping = mapping(&sc, &src, NO_KEY_MAPPING);
    let run = sc.run(&mapping, &["--follow", "--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    assert!(
        run.stderr.contains("entity event: cannot be followed")
            && run.stderr.contains("has no primary key"),
        "{}",
        run.stderr
    );
    assert!(!sc.table_exists(&sc.table).await, "nothing was written");
}
