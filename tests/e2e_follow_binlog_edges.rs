//! The MariaDB binary log at its edges: what a follower cannot carry
//! (a change written as a statement, a partial row image, a `TRUNCATE` in
//! any spelling, a table altered while the follower was stopped) stops it
//! with exit 65 before that change, naming the table, the change and the
//! position, its checkpoint kept before the change's transaction (a second
//! `follow` stops at the same place, and never skips it); a new full load
//! then carries the table and follows on, losing nothing. Changes of other
//! tables written as statements, and their DDL, do not stop it. Keys in
//! other character sets than UTF-8 are decoded exactly, so a key-moving
//! update deletes the old item.

use sql2ddb_core::AttrValue;

use crate::common::*;

/// EX_DATAERR: the follower met a change it cannot carry.
const EX_DATAERR: i32 = 65;

const MAPPING: &str = pg_mapping!(
    url = "SOURCE_URL",
    "",
    r#"
[[entity]]
name = "item"
from = "items"
pk = "ITEM#{id}"
sk = "ITEM"
"#
);

const ITEMS: &str = "
CREATE TABLE items (id int PRIMARY KEY, name varchar(40) NOT NULL, qty int NOT NULL);
INSERT INTO items SELECT seq, CONCAT('name ', seq), seq FROM seq_1_to_5;
CREATE TABLE other (id int PRIMARY KEY, v int NOT NULL);
";

/// A followed MariaDB database and the run that follows it.
struct Followed {
    sc: Scenario,
    mapping: String,
    /// The replica server id its followers read as: one of its own, as
    /// the server takes one reader per id.
    server_id: String,
}

impl Followed {
    /// The database made by `fixture`, loaded by `run --follow` (until idle).
    async fn start(prefix: &str, fixture: &str, mapping: &str) -> Followed {
        let sc = Scenario::new(prefix).mariadb(fixture).start().await;
        let mapping = sc.mapping(&mapping.replace("SOURCE_URL", &sc.my().url));
        let f = Followed {
            sc,
            mapping,
            server_id: replica_server_id(),
        };
        f.load().await;
        f
    }

    /// A full load with `--follow` until idle (into the table as it is:
    /// a new load after a stop rewrites its items); its run id.
    async fn load(&self) -> String {
        let before = self.runs();
        let run = self
            .sc
            .run(
                &self.mapping,
                &[
                    "--if-not-empty",
                    "append",
                    "--follow",
                    "--follow-until-idle",
                    "1",
                    "--server-id",
                    &self.server_id,
                    "--quiet",
                ],
            )
            .await;
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let mut new: Vec<String> = self
            .runs()
            .into_iter()
            .filter(|r| !before.contains(r))
            .collect();
        assert_eq!(new.len(), 1, "one new run: {new:?}");
        new.remove(0)
    }

    /// The runs in the runs directory.
    fn runs(&self) -> Vec<String> {
        std::fs::read_dir(self.sc.path().join("sql2ddb-runs"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The only run so far.
    fn run_id(&self) -> String {
        let runs = self.runs();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs[0].clone()
    }

    /// `follow --run RUN` until idle.
    async fn follow(&self, run: &str) -> Run {
        let endpoint = self.sc.dynamo.url.clone();
        let args = [
            "follow",
            &self.mapping,
            "--run",
            run,
            "--endpoint",
            &endpoint,
            "--follow-until-idle",
            "1",
            "--server-id",
            &self.server_id,
        ];
        self.sc.sql2ddb(&args).await
    }

    /// The run's binary log checkpoint.
    fn checkpoint(&self, run: &str) -> String {
        let path = self
            .sc
            .path()
            .join("sql2ddb-runs")
            .join(run)
            .join("binlog-position");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Runs `sql` (statements separated by `;`) on a connection of its
    /// own, closed after: a `SET SESSION` holds for the statements after
    /// it, and for no later ones.
    async fn exec(&self, sql: &str) {
        use sqlx::Connection;
        let mut conn = self.sc.my().pool.acquire().await.unwrap().detach();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.close().await.unwrap();
    }

    /// Item `ITEM#id`'s attribute `attr`, if the item has it.
    async fn attr(&self, id: &str, attr: &str) -> Option<AttrValue> {
        let items = self.sc.items().await;
        items
            .get(&key(&format!("ITEM#{id}"), "ITEM"))?
            .get(attr)
            .cloned()
    }

    /// A follow that must stop before a change it cannot carry: exit 65,
    /// the error naming `table`, `event` and a `file:pos` position, the
    /// checkpoint unmoved by a second try that stops at the same place.
    async fn stops_before(&self, run: &str, table: &str, event: &str) -> String {
        let stopped = self.follow(run).await;
        assert_eq!(
            stopped.code, EX_DATAERR,
            "{}\n{}",
            stopped.stdout, stopped.stderr
        );
        let error = stopped
            .stderr
            .lines()
            .find(|l| l.starts_with("error: cannot follow"))
            .unwrap_or_else(|| panic!("no error line:\n{}", stopped.stderr))
            .to_string();
        let table = format!("on table {}.{table} at ", self.sc.my().name);
        assert!(error.contains(event) && error.contains(&table), "{error}");
        let at = error.split(" at ").nth(1).unwrap();
        let (file, pos) = at
            .split_once(':')
            .unwrap_or_else(|| panic!("no file:pos in {error}"));
        let pos: u64 = pos
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(at.contains("(GTID "), "MariaDB names the GTID: {error}");
        let checkpoint = self.checkpoint(run);
        let (kept_file, kept_pos) = checkpoint.lines().next().unwrap().rsplit_once(':').unwrap();
        assert!(
            kept_file == file && kept_pos.parse::<u64>().unwrap() <= pos,
            "the checkpoint {checkpoint} is before {at}"
        );
        let again = self.follow(run).await;
        assert_eq!(again.code, EX_DATAERR, "{}", again.stderr);
        assert!(
            again.stderr.contains(&error),
            "the same stop:\n{}",
            again.stderr
        );
        assert_eq!(self.checkpoint(run), checkpoint, "the checkpoint stays");
        error
    }
}

fn text(v: &str) -> Option<AttrValue> {
    Some(s(v))
}

fn number(v: i64) -> Option<AttrValue> {
    Some(n(v))
}

/// A change of a followed table written as a statement (STATEMENT, then
/// MIXED) stops the follower before its transaction; statements on other
/// tables (changes, DDL) do not. After the fix, a new full load carries it
/// and follows on.
#[tokio::test]
async fn a_statement_format_change_stops_the_follower_before_it() {
    let f = Followed::start("binlog_stmt", ITEMS, MAPPING).await;
    let run = f.run_id();
    f.exec("UPDATE items SET qty = 10 WHERE id = 1").await;
    f.exec(
        "SET SESSION binlog_format = 'STATEMENT'; INSERT INTO other VALUES (1, 1); \
         UPDATE other SET v = 2; ALTER TABLE other ADD COLUMN w int",
    )
    .await;
    f.exec("UPDATE items SET qty = 11 WHERE id = 5").await;
    f.exec("SET SESSION binlog_format = 'STATEMENT'; UPDATE items SET name = 'by statement' WHERE id = 2")
        .await;
    f.exec("UPDATE items SET qty = 30 WHERE id = 3").await;
    f.stops_before(&run, "items", "a statement-format UPDATE")
        .await;
    // Everything before it is applied, nothing from it on.
    assert_eq!(f.attr("1", "qty").await, number(10));
    assert_eq!(f.attr("5", "qty").await, number(11));
    assert_eq!(f.attr("2", "name").await, text("name 2"));
    assert_eq!(f.attr("3", "qty").await, number(3));

    let reloaded = f.load().await;
    assert_eq!(f.attr("2", "name").await, text("by statement"));
    assert_eq!(f.attr("3", "qty").await, number(30));
    f.exec("DELETE FROM items WHERE id = 4").await;
    let on = f.follow(&reloaded).await;
    assert_eq!(on.code, 0, "{}", on.stderr);
    assert_eq!(f.attr("4", "qty").await, None);
    // MIXED logs a deterministic change as a statement too.
    f.exec("SET SESSION binlog_format = 'MIXED'; INSERT INTO items VALUES (7, 'mixed', 7)")
        .await;
    f.stops_before(&reloaded, "items", "a statement-format INSERT")
        .await;
    assert_eq!(f.attr("7", "qty").await, None);
}

/// A row event without every column (`binlog_row_image = MINIMAL`) stops
/// the follower before it, saying what to set.
#[tokio::test]
async fn a_partial_row_image_stops_the_follower_before_it() {
    let f = Followed::start("binlog_minimal", ITEMS, MAPPING).await;
    let run = f.run_id();
    f.exec("UPDATE items SET qty = 10 WHERE id = 1").await;
    f.exec("SET SESSION binlog_row_image = 'MINIMAL'; UPDATE items SET qty = 20 WHERE id = 2")
        .await;
    let error = f
        .stops_before(
            &run,
            "items",
            "an UPDATE row event with a partial row image",
        )
        .await;
    assert!(error.contains("binlog_row_image = 'FULL'"), "{error}");
    assert_eq!(f.attr("1", "qty").await, number(10));
    assert_eq!(f.attr("2", "qty").await, number(2));
    f.load().await;
    assert_eq!(f.attr("2", "qty").await, number(20));
}

/// `TRUNCATE` spelt with a comment, a schema and backticks stops the
/// follower before it; the items are not left behind silently.
#[tokio::test]
async fn a_truncate_in_any_spelling_stops_the_follower_before_it() {
    let f = Followed::start("binlog_truncate", ITEMS, MAPPING).await;
    let run = f.run_id();
    f.exec("DELETE FROM items WHERE id = 5").await;
    let db = f.sc.my().name.clone();
    f.exec(&format!("/* c */ truncate `{db}`.`items`")).await;
    f.exec("INSERT INTO items VALUES (9, 'after', 9)").await;
    f.stops_before(&run, "items", "TRUNCATE").await;
    assert_eq!(f.attr("5", "qty").await, None);
    assert_eq!(f.attr("1", "qty").await, number(1));
    assert_eq!(f.attr("9", "qty").await, None);
}

const ALTERED: &str = "
CREATE TABLE items (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL, c int NOT NULL);
INSERT INTO items SELECT seq, seq, seq, seq FROM seq_1_to_3;
";

/// A table altered while the follower was stopped (a column dropped,
/// another of the same type added): its events written before the change
/// are never decoded with its new columns; the follower stops before the
/// first of them (the mapping reads the table as it is now), so no value
/// lands in another column's attribute.
#[tokio::test]
async fn a_table_altered_while_the_follower_was_stopped_is_never_read_with_its_new_columns() {
    let f = Followed::start("binlog_alter", ALTERED, MAPPING).await;
    let run = f.run_id();
    f.exec("UPDATE items SET b = 20, c = 30 WHERE id = 1").await;
    f.exec("ALTER TABLE items DROP COLUMN b, ADD COLUMN d int NOT NULL DEFAULT 0")
        .await;
    f.exec("UPDATE items SET d = 40, c = 41 WHERE id = 2").await;
    let error = f.stops_before(&run, "items", "an UPDATE row event").await;
    assert!(
        error.contains("a, b, c then") && error.contains("a, c, d now"),
        "{error}"
    );
    // Read with the new columns, b's 20 would be c's and c's 30 d's.
    assert_eq!(f.attr("1", "c").await, number(1));
    assert_eq!(f.attr("1", "d").await, None);
    f.load().await;
    assert_eq!(f.attr("1", "c").await, number(30));
    assert_eq!(f.attr("1", "d").await, number(0));
    assert_eq!(f.attr("2", "d").await, number(40));
}

/// A table altered while followed: the follower stops before the `ALTER`
/// that changes its columns, every change before it applied (an index
/// added before does not stop it).
#[tokio::test]
async fn an_alter_of_a_followed_table_stops_the_follower_before_it() {
    let f = Followed::start("binlog_alter_live", ALTERED, MAPPING).await;
    let run = f.run_id();
    let endpoint = f.sc.dynamo.url.clone();
    let args = [
        "follow",
        &f.mapping,
        "--run",
        &run,
        "--endpoint",
        &endpoint,
        "--server-id",
        &f.server_id,
    ];
    let follower = Proc::spawn(f.sc.path(), &args);
    crate::follow_scenario::wait_for(&follower, "following ").await;
    // An index changes no row: the follower reads past it.
    f.exec("ALTER TABLE items ADD INDEX by_a (a), ALGORITHM = INPLACE")
        .await;
    f.exec("UPDATE items SET b = 20 WHERE id = 1").await;
    f.exec("ALTER TABLE items ADD COLUMN d int NOT NULL DEFAULT 0")
        .await;
    let stopped = follower.wait().await;
    assert_eq!(stopped.code, EX_DATAERR, "{}", stopped.stderr);
    let error = f.stops_before(&run, "items", "ALTER TABLE").await;
    assert!(stopped.stderr.contains(&error), "{}", stopped.stderr);
    assert_eq!(f.attr("1", "b").await, number(20));
}

const LATIN1: &str = "
CREATE TABLE people (code varchar(20) CHARACTER SET latin1 NOT NULL PRIMARY KEY,
  name varchar(40) CHARACTER SET latin1 NOT NULL, n int NOT NULL);
INSERT INTO people VALUES ('café', 'Zoë', 1), ('naïve', 'x', 2), ('plain', 'p', 3);
";

const PEOPLE: &str = pg_mapping!(
    url = "SOURCE_URL",
    "",
    r#"
[[entity]]
name = "person"
from = "people"
pk = "P#{code}"
sk = "P"
"#
);

/// A key-moving update of a latin1 key, then a delete: the old items go,
/// found by the keys of the events' before images, every character read
/// as the full load reads it.
#[tokio::test]
async fn latin1_keys_move_and_delete_by_their_old_values() {
    let f = Followed::start("binlog_latin1", LATIN1, PEOPLE).await;
    let run = f.run_id();
    f.exec("UPDATE people SET code = 'crème €', name = 'Zoë ß' WHERE code = 'café'")
        .await;
    f.exec("DELETE FROM people WHERE code = 'naïve'").await;
    let on = f.follow(&run).await;
    assert_eq!(on.code, 0, "{}", on.stderr);
    let items = f.sc.items().await;
    let keys: Vec<(String, String)> = items.keys().cloned().collect();
    assert_eq!(
        keys,
        [key("P#crème €", "P"), key("P#plain", "P")],
        "{items:?}"
    );
    assert_eq!(items[&key("P#crème €", "P")].get("name"), Some(&s("Zoë ß")));
}
