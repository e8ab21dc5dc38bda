//! What `run --follow` refuses before it creates anything, and whose slot
//! or run `follow` refuses to touch. Every reason comes at once, in one
//! error (exit 78), before a slot, a publication or an item exists: the
//! application's own UPDATE and DELETE on the tables keep working. A slot
//! (PostgreSQL) or a run (MariaDB) belongs to the mapping that created it:
//! `follow` with another mapping is refused before anything is read or
//! moved, and the owner's next `follow` loses nothing.

use crate::common::*;
use crate::follow_scenario::SlotGuard;

const PG_TABLES: &str = "
CREATE TABLE {schema}.deferred (id int PRIMARY KEY DEFERRABLE, name text NOT NULL);
INSERT INTO {schema}.deferred SELECT i, 'd' || i FROM generate_series(1, 10) i;
CREATE TABLE {schema}.nothing (id int PRIMARY KEY, name text NOT NULL);
ALTER TABLE {schema}.nothing REPLICA IDENTITY NOTHING;
INSERT INTO {schema}.nothing SELECT i, 'n' || i FROM generate_series(1, 10) i;
CREATE TABLE {schema}.by_index (id int PRIMARY KEY, code text NOT NULL);
CREATE UNIQUE INDEX by_index_code ON {schema}.by_index (code);
ALTER TABLE {schema}.by_index REPLICA IDENTITY USING INDEX by_index_code;
INSERT INTO {schema}.by_index SELECT i, 'c' || i FROM generate_series(1, 10) i;
CREATE TABLE {schema}.events (at timestamptz NOT NULL, what text);
";

const PG_MAPPING: &str = pg_mapping!(
    r#"
[[entity]]
name = "deferred"
from = "SCHEMA.deferred"
pk = "D#{id}"
sk = "D"

[[entity]]
name = "nothing"
from = "SCHEMA.nothing"
pk = "N#{id}"
sk = "N"

[[entity]]
name = "by_index"
from = "SCHEMA.by_index"
pk = "I#{id}"
sk = "I"

[[entity]]
name = "event"
from = "SCHEMA.events"
key = ["at"]
pk = "EVENT"
sk = "{at}"

[[entity]]
name = "recent"
query = "SELECT id, name FROM SCHEMA.deferred WHERE id > 5"
key = ["id"]
pk = "R#{id}"
sk = "R"
"#
);

/// Asserts that `stderr` names each of `reasons` (every piece of one
/// reason), and that nothing was being created.
fn lists_every_reason(stderr: &str, reasons: &[&[&str]]) {
    assert!(
        stderr.contains("cannot follow this mapping; nothing was created on the source"),
        "{stderr}"
    );
    for pieces in reasons {
        let line = stderr
            .lines()
            .find(|l| pieces.iter().all(|p| l.contains(p)))
            .unwrap_or_else(|| panic!("no reason with {pieces:?} in:\n{stderr}"));
        assert!(line.trim_start().starts_with("- "), "{line}");
    }
    assert!(!stderr.contains("creating replication slot"), "{stderr}");
}

/// Publications holding a table of `schema`, and how many there are.
async fn publications_of(pg: &PgSchema) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_publication_tables WHERE schemaname = $1")
        .bind(&pg.name)
        .fetch_one(&pg.pool)
        .await
        .unwrap()
}

/// A table whose key is DEFERRABLE, one with REPLICA IDENTITY NOTHING, one
/// with REPLICA IDENTITY USING INDEX, one without a primary key and a
/// query: all five named in one error before a publication or slot
/// exists, and the application's UPDATE and DELETE go on working.
#[tokio::test]
async fn a_postgres_follow_is_refused_with_every_reason_before_anything_exists() {
    let sc = Scenario::new("refuse_pg").postgres(PG_TABLES).start().await;
    let s = sc.pg().name.clone();
    let mapping = sc.mapping(PG_MAPPING);
    let deferred_fix = format!("ALTER TABLE {s}.deferred REPLICA IDENTITY FULL");
    let nothing_fix = format!("ALTER TABLE {s}.nothing REPLICA IDENTITY DEFAULT");
    let index_fix = format!("ALTER TABLE {s}.by_index REPLICA IDENTITY DEFAULT");
    let reasons: &[&[&str]] = &[
        &["DEFERRABLE", "UPDATE and DELETE", &deferred_fix],
        &[
            "REPLICA IDENTITY NOTHING",
            "UPDATE and DELETE",
            &nothing_fix,
        ],
        &["USING INDEX by_index_code", &index_fix],
        &["entity event: cannot be followed", "has no primary key"],
        &["entity recent: cannot be followed", "reads a query"],
    ];
    // `check --follow` says all of it before any run.
    let check = sc.sql2ddb(&["check", &mapping, "--follow"]).await;
    assert_eq!(check.code, EX_CONFIG, "{}", check.stderr);
    lists_every_reason(&check.stderr, reasons);
    let run = sc.run(&mapping, &["--follow", "--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    lists_every_reason(&run.stderr, reasons);
    assert_eq!(publications_of(sc.pg()).await, 0, "no publication exists");
    assert!(!sc.table_exists(&sc.table).await, "nothing was written");

    // The application's own statements on those tables still succeed: a
    // key moved on every row, rows updated and deleted.
    sc.pg()
        .exec(
            "UPDATE {schema}.deferred SET id = id + 1; \
             DELETE FROM {schema}.deferred WHERE id = 3; \
             UPDATE {schema}.nothing SET name = 'changed'; \
             DELETE FROM {schema}.nothing WHERE id = 3; \
             UPDATE {schema}.by_index SET code = code || 'x'; \
             DELETE FROM {schema}.by_index WHERE id = 3",
        )
        .await;
    let left: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT (SELECT count(*) FROM {s}.deferred) + (SELECT count(*) FROM {s}.nothing)"
    )))
    .fetch_one(&sc.pg().pool)
    .await
    .unwrap();
    assert_eq!(left, 18);

    // Once the tables are fixed and the unfollowable entities left out,
    // `check --follow` passes, still creating nothing.
    sc.pg()
        .exec(&format!("{deferred_fix}; {nothing_fix}; {index_fix}"))
        .await;
    let fixed = PG_MAPPING
        .split("[[entity]]\nname = \"event\"")
        .next()
        .unwrap();
    let fixed = sc.mapping(fixed);
    let check = sc.sql2ddb(&["check", &fixed, "--follow"]).await;
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(check.stdout.contains("can be followed"), "{}", check.stdout);
    assert_eq!(publications_of(sc.pg()).await, 0, "no publication exists");
}

/// A SQLite source cannot be followed: `check --follow` says so (78).
#[tokio::test]
async fn check_follow_refuses_a_sqlite_source() {
    let sc = Scenario::new("refuse_lite")
        .sqlite("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT);")
        .start()
        .await;
    let text = pg_mapping!(
        url = "SOURCE_URL",
        "",
        r#"
[[entity]]
name = "t"
from = "t"
pk = "T#{id}"
sk = "T"
"#
    );
    let mapping = sc.mapping(&text.replace("SOURCE_URL", sc.sqlite_url()));
    let check = sc.sql2ddb(&["check", &mapping, "--follow"]).await;
    assert_eq!(check.code, EX_CONFIG, "{}", check.stderr);
    assert!(
        check.stderr.contains("a SQLite file can only be loaded"),
        "{}",
        check.stderr
    );
}

/// A role of the test's own, dropped (with its grants) at the end.
struct PgRole(String);

impl Drop for PgRole {
    fn drop(&mut self) {
        let role = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                use sqlx::Connection;
                let Ok(mut conn) = sqlx::PgConnection::connect(pg_url()).await else {
                    return;
                };
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP OWNED BY {role}; DROP ROLE IF EXISTS {role}"
                )))
                .execute(&mut conn)
                .await;
            })
        })
        .join();
    }
}

const PG_PRIVILEGES_MAPPING: &str = pg_mapping!(
    url = "SOURCE_URL",
    "",
    r#"
[[entity]]
name = "readable"
from = "SCHEMA.readable"
pk = "A#{id}"
sk = "A"

[[entity]]
name = "hidden"
from = "SCHEMA.hidden"
pk = "H#{id}"
sk = "H"

[[entity]]
name = "event"
from = "SCHEMA.events"
key = ["at"]
pk = "EVENT"
sk = "{at}"
"#
);

/// A user without the REPLICATION attribute, without CREATE on the
/// database, who owns none of the tables and may not read one of them: the
/// server's reasons and the mapping's come in one list.
#[tokio::test]
async fn a_postgres_user_who_may_not_follow_is_told_every_missing_privilege_at_once() {
    let sc = Scenario::new("refuse_pg_user")
        .postgres(
            "CREATE TABLE {schema}.readable (id int PRIMARY KEY, name text);
             CREATE TABLE {schema}.hidden (id int PRIMARY KEY, name text);
             CREATE TABLE {schema}.events (at timestamptz NOT NULL, what text);",
        )
        .start()
        .await;
    let s = sc.pg().name.clone();
    let role = PgRole(unique("refuse_role"));
    let r = &role.0;
    sc.pg()
        .exec(&format!(
            "CREATE ROLE {r} LOGIN NOSUPERUSER NOREPLICATION; \
             GRANT USAGE ON SCHEMA {s} TO {r}; \
             GRANT SELECT ON {s}.readable, {s}.events TO {r}"
        ))
        .await;
    let url = pg_url().replacen("root@", &format!("{r}@"), 1);
    assert_ne!(url, pg_url(), "the tests' URL names its user as root@");
    let mapping = sc.mapping(&PG_PRIVILEGES_MAPPING.replace("SOURCE_URL", &url));
    let run = sc.run(&mapping, &["--follow", "--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    let grant = format!("GRANT SELECT ON {s}.hidden");
    lists_every_reason(
        &run.stderr,
        &[
            &[
                &format!("user {r} may not create a replication slot"),
                "REPLICATION",
            ],
            &[
                &format!("user {r} may not create a publication"),
                "GRANT CREATE ON DATABASE",
            ],
            &[&format!("table {s}.hidden cannot be read"), &grant],
            &[&format!("table {s}.readable belongs to"), "OWNER TO"],
            &[&format!("table {s}.hidden belongs to"), "OWNER TO"],
            &["entity event: cannot be followed", "has no primary key"],
        ],
    );
    assert_eq!(publications_of(sc.pg()).await, 0, "no publication exists");
    assert!(!sc.table_exists(&sc.table).await, "nothing was written");
}

const ITEMS: &str = "
CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO {schema}.items SELECT i, 'name ' || i FROM generate_series(1, 20) i;
";

const MY_ITEMS: &str = "
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO items SELECT seq, CONCAT('name ', seq) FROM seq_1_to_20;
";

/// Mapping B, the slot's or run's owner, and A, another mapping of the
/// same rows into other items.
const OWNER_MAPPING: &str = pg_mapping!(
    url = "SOURCE_URL",
    "",
    r#"
[[entity]]
name = "item"
from = "ROWS_FROM"
pk = "ITEM#{id}"
sk = "ITEMKIND"
"#
);

/// Writes mapping `name` (`OWNER_MAPPING` with `ITEMKIND` as `sk`) into the
/// scenario's directory; returns its path and its name as recorded.
fn owner_mapping(sc: &Scenario, url: &str, from: &str, name: &str, sk: &str) -> (String, String) {
    let text = OWNER_MAPPING
        .replace("SOURCE_URL", url)
        .replace("ROWS_FROM", from)
        .replace("ITEMKIND", sk);
    let written = sc.mapping(&text);
    let path = sc.path().join(name);
    std::fs::rename(&written, &path).unwrap();
    let recorded = std::fs::canonicalize(&path).unwrap().display().to_string();
    (path.display().to_string(), recorded)
}

/// The run id a finished `run` printed first.
fn run_id_of(run: &Run) -> String {
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("run "))
        .unwrap_or_else(|| panic!("no run id:\n{}", run.stderr));
    line[4..].split(':').next().unwrap().trim().to_string()
}

/// Asserts that `out` is the refusal of `what` (a slot or run of mapping
/// `owner`) for mapping `other`.
fn refused_as_not_its_own(out: &Run, what: &str, owner: &str, other: &str) {
    assert_eq!(out.code, EX_CONFIG, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("{what} belongs to mapping {owner} (items digest"))
            && out
                .stderr
                .contains(&format!("not to mapping {other} (items digest"))
            && out.stderr.contains("entity item: sk template")
            && out.stderr.contains("Nothing was read or moved"),
        "{}",
        out.stderr
    );
}

async fn confirmed_lsn(pg: &PgSchema, slot: &str) -> String {
    sqlx::query_scalar(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_one(&pg.pool)
    .await
    .unwrap()
}

/// `follow A --slot <B's slot>` (or `--run <B's run>`, or `--drop-slot`)
/// is refused and the slot stays where it was; B's next follow applies the
/// change made meanwhile.
#[tokio::test]
async fn a_postgres_slot_is_followed_by_its_own_mapping_only() {
    let sc = Scenario::new("owner_pg").postgres(ITEMS).start().await;
    let from = format!("{}.items", sc.pg().name);
    let (b, b_name) = owner_mapping(&sc, pg_url(), &from, "b.toml", "ITEM");
    let (a, a_name) = owner_mapping(&sc, pg_url(), &from, "a.toml", "OTHER");
    let url = sc.dynamo.url.clone();
    let first = sc
        .run(&b, &["--follow", "--follow-until-idle", "1", "--quiet"])
        .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let run_id = run_id_of(&first);
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    let _dropped_at_the_end = SlotGuard(slot.clone());
    sc.pg()
        .exec("UPDATE {schema}.items SET name = 'changed' WHERE id = 1")
        .await;
    let at = confirmed_lsn(sc.pg(), &slot).await;

    let what = format!("replication slot {slot}");
    let by_slot = ["follow", &a, "--slot", &slot, "--endpoint", &url];
    let by_slot = sc
        .sql2ddb(&[&by_slot[..], &["--follow-until-idle", "1"]].concat())
        .await;
    refused_as_not_its_own(&by_slot, &what, &b_name, &a_name);
    assert!(
        by_slot
            .stderr
            .contains(&format!("sql2ddb follow {b_name} --slot {slot}")),
        "{}",
        by_slot.stderr
    );
    let by_run = ["follow", &a, "--run", &run_id, "--endpoint", &url];
    let by_run = sc.sql2ddb(&[&by_run[..], &["--cutover"]].concat()).await;
    refused_as_not_its_own(&by_run, &what, &b_name, &a_name);
    let drop = sc
        .sql2ddb(&["follow", &a, "--slot", &slot, "--drop-slot"])
        .await;
    refused_as_not_its_own(&drop, &what, &b_name, &a_name);
    assert_eq!(
        confirmed_lsn(sc.pg(), &slot).await,
        at,
        "the slot did not move"
    );
    assert!(
        !sc.items().await.contains_key(&key("ITEM#1", "OTHER")),
        "mapping A wrote nothing"
    );

    let own = ["follow", &b, "--slot", &slot, "--endpoint", &url];
    let own = sc
        .sql2ddb(&[&own[..], &["--follow-until-idle", "1"]].concat())
        .await;
    assert_eq!(own.code, 0, "{}", own.stderr);
    let items = sc.items().await;
    assert_eq!(items[&key("ITEM#1", "ITEM")]["name"], s("changed"));
    assert_eq!(items.len(), 20);
    let dropped = sc
        .sql2ddb(&["follow", &b, "--slot", &slot, "--drop-slot"])
        .await;
    assert_eq!(dropped.code, 0, "{}", dropped.stderr);
}

/// `follow A --run <B's run>` on MariaDB is refused and B's binary log
/// checkpoint stays as it was; B's next follow applies the change made
/// meanwhile.
#[tokio::test]
async fn a_mariadb_run_is_followed_by_its_own_mapping_only() {
    let sc = Scenario::new("owner_my").mariadb(MY_ITEMS).start().await;
    let my_url = sc.my().url.clone();
    let (b, b_name) = owner_mapping(&sc, &my_url, "items", "b.toml", "ITEM");
    let (a, a_name) = owner_mapping(&sc, &my_url, "items", "a.toml", "OTHER");
    let url = sc.dynamo.url.clone();
    // A replica id of its own: other tests read the same server's log.
    let id = replica_server_id();
    let first = sc
        .run(
            &b,
            &[
                "--follow",
                "--follow-until-idle",
                "1",
                "--server-id",
                &id,
                "--quiet",
            ],
        )
        .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let run_id = run_id_of(&first);
    sc.my()
        .exec("UPDATE items SET name = 'changed' WHERE id = 1")
        .await;
    let checkpoint = sc
        .path()
        .join("sql2ddb-runs")
        .join(&run_id)
        .join(sql2ddb_engine::follow::BINLOG_CHECKPOINT);
    let at = std::fs::read_to_string(&checkpoint).unwrap();

    let other = [
        "follow",
        &a,
        "--run",
        &run_id,
        "--endpoint",
        &url,
        "--server-id",
        &id,
    ];
    let other = sc
        .sql2ddb(&[&other[..], &["--follow-until-idle", "1"]].concat())
        .await;
    refused_as_not_its_own(&other, &format!("run {run_id}"), &b_name, &a_name);
    assert!(
        other
            .stderr
            .contains(&format!("sql2ddb follow {b_name} --run {run_id}")),
        "{}",
        other.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&checkpoint).unwrap(),
        at,
        "the checkpoint did not move"
    );
    assert!(
        !sc.items().await.contains_key(&key("ITEM#1", "OTHER")),
        "mapping A wrote nothing"
    );

    let own = [
        "follow",
        &b,
        "--run",
        &run_id,
        "--endpoint",
        &url,
        "--server-id",
        &id,
    ];
    let own = sc
        .sql2ddb(&[&own[..], &["--follow-until-idle", "1"]].concat())
        .await;
    assert_eq!(own.code, 0, "{}", own.stderr);
    let items = sc.items().await;
    assert_eq!(items[&key("ITEM#1", "ITEM")]["name"], s("changed"));
    assert_eq!(items.len(), 20);
}

/// A MariaDB user of the test's own, dropped at the end.
struct MyUser(String);

impl Drop for MyUser {
    fn drop(&mut self) {
        let user = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                use sqlx::Connection;
                let url = sql2ddb_testkit::support::mysql_url();
                let Ok(mut conn) = sqlx::MySqlConnection::connect(url).await else {
                    return;
                };
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP USER IF EXISTS '{user}'@'%'"
                )))
                .execute(&mut conn)
                .await;
            })
        })
        .join();
    }
}

const MY_PRIVILEGES_MAPPING: &str = pg_mapping!(
    url = "SOURCE_URL",
    "",
    r#"
[[entity]]
name = "readable"
from = "readable"
pk = "A#{id}"
sk = "A"

[[entity]]
name = "hidden"
from = "hidden"
pk = "H#{id}"
sk = "H"

[[entity]]
name = "event"
from = "events"
key = ["at"]
pk = "EVENT"
sk = "{at}"

[[entity]]
name = "recent"
query = "SELECT id, name FROM readable WHERE id > 5"
key = ["id"]
pk = "R#{id}"
sk = "R"
"#
);

/// A MariaDB user without the replication privileges, who may not read one
/// table, with a table without a primary key and a query: one list.
#[tokio::test]
async fn a_mariadb_follow_is_refused_with_every_reason_at_once() {
    let sc = Scenario::new("refuse_my")
        .mariadb(
            "CREATE TABLE readable (id int PRIMARY KEY, name text);
             CREATE TABLE hidden (id int PRIMARY KEY, name text);
             CREATE TABLE events (at datetime(6) NOT NULL, what text);",
        )
        .start()
        .await;
    let db = sc.my().name.clone();
    let user = MyUser(unique("refuse_user"));
    let u = &user.0;
    sc.my()
        .exec(&format!(
            "CREATE USER '{u}'@'%'; \
             GRANT SELECT ON `{db}`.readable TO '{u}'@'%'; \
             GRANT SELECT ON `{db}`.events TO '{u}'@'%'"
        ))
        .await;
    let url = format!("mysql://{u}@127.0.0.1:3306/{db}");
    let mapping = sc.mapping(&MY_PRIVILEGES_MAPPING.replace("SOURCE_URL", &url));
    let run = sc.run(&mapping, &["--follow", "--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    lists_every_reason(
        &run.stderr,
        &[
            &[
                "global privileges REPLICATION SLAVE, REPLICATION CLIENT, RELOAD",
                "GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.*",
            ],
            &["table hidden cannot be read", "GRANT SELECT ON hidden"],
            &["entity event: cannot be followed", "has no primary key"],
            &["entity recent: cannot be followed", "reads a query"],
        ],
    );
    // The server hides the table it may not read; it is named once, as such.
    assert!(!run.stderr.contains("does not exist"), "{}", run.stderr);
    assert!(!sc.table_exists(&sc.table).await, "nothing was written");
    let runs = sc.path().join("sql2ddb-runs");
    assert!(
        !runs.exists() || std::fs::read_dir(&runs).unwrap().next().is_none(),
        "no run was recorded"
    );
}
