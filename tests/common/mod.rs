//! Shared helpers of the end-to-end tests: an in-process DynamoDB-compatible
//! server (dynoxide) on a loopback port, PostgreSQL schemas of their own, and
//! running the built binary the way a person would.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use sql2ddb_core::{AttrValue, Item};
use sql2ddb_dynamo::{connect, Client, Endpoint};

/// PostgreSQL as the tests reach it.
pub const PG_URL: &str = "postgres://root@127.0.0.1:5432/test";

/// A DynamoDB-compatible server in this process; stops when dropped.
pub struct Dynamo {
    pub url: String,
    pub client: Client,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Dynamo {
    pub async fn start() -> Dynamo {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let db = dynoxide::Database::memory().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(dynoxide::server::serve_with_shutdown(listener, db, async {
            let _ = rx.await;
        }));
        let client = connect(&Endpoint::Url(url.clone()), Some("us-east-1"))
            .await
            .unwrap();
        Dynamo {
            url,
            client,
            shutdown: Some(tx),
        }
    }

    /// Every item of a table, keyed by (PK, SK) rendered as text.
    pub async fn scan(&self, table: &str) -> BTreeMap<(String, String), Item> {
        let mut out = BTreeMap::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            for raw in page.items() {
                let item = sql2ddb_dynamo::convert::item_from_sdk(raw);
                let key = (
                    text(&item["PK"]),
                    item.get("SK").map(text).unwrap_or_default(),
                );
                assert!(
                    out.insert(key.clone(), item).is_none(),
                    "duplicate key {key:?}"
                );
            }
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => break,
            }
        }
        out
    }
}

impl Drop for Dynamo {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn text(v: &AttrValue) -> String {
    match v {
        AttrValue::S(s) | AttrValue::N(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// A unique name for this test's schema, table, directory.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}_{}_{nanos:x}", std::process::id())
}

/// A PostgreSQL schema of the test's own, dropped on `drop_schema`.
pub struct PgSchema {
    pub pool: sqlx::PgPool,
    pub name: String,
}

impl PgSchema {
    pub async fn create(prefix: &str) -> PgSchema {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(PG_URL)
            .await
            .expect("PostgreSQL on 127.0.0.1:5432 (scripts/services.sh starts it)");
        let name = unique(prefix);
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&pool)
            .await
            .unwrap();
        PgSchema { pool, name }
    }

    /// Runs SQL with `{schema}` replaced by the schema name.
    pub async fn exec(&self, sql: &str) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.replace("{schema}", &self.name)))
            .execute(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    }

    pub async fn drop_schema(self) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA {} CASCADE",
            self.name
        )))
        .execute(&self.pool)
        .await
        .unwrap();
        self.pool.close().await;
    }
}

/// The workspace root (mappings and examples are relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// What the binary did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The `--json` report.
    pub fn report(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// An entity's figures from the report.
    pub fn entity(&self, name: &str) -> serde_json::Value {
        self.report()["entities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no entity {name} in the report"))
            .clone()
    }
}

/// Runs the built binary in `dir` with `args`.
pub async fn sql2ddb(dir: &Path, args: &[&str]) -> Run {
    let out: Output = tokio::process::Command::new(env!("CARGO_BIN_EXE_sql2ddb"))
        .args(args)
        .current_dir(dir)
        .env_remove("SHOP_DATABASE_URL")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Writes a mapping file into `dir` and returns its path as text.
pub fn write_mapping(dir: &Path, text: &str) -> String {
    let path = dir.join("mapping.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `S` value.
pub fn s(v: impl Into<String>) -> AttrValue {
    AttrValue::S(v.into())
}

/// `N` value.
pub fn n(v: impl ToString) -> AttrValue {
    AttrValue::N(v.to_string())
}

/// Asserts that every expected item is in `items` (a [`Dynamo::scan`]) and
/// equal to it attribute by attribute.
pub fn assert_items(items: &BTreeMap<(String, String), Item>, expected: &[Item]) {
    for want in expected {
        let key = (
            text(&want["PK"]),
            want.get("SK").map(text).unwrap_or_default(),
        );
        let got = items.get(&key).unwrap_or_else(|| panic!("no item {key:?}"));
        assert_item(&key, got, want);
    }
}

/// Asserts two items are equal attribute by attribute, naming the first difference.
pub fn assert_item(key: &(String, String), got: &Item, want: &Item) {
    for (name, w) in want {
        match got.get(name) {
            Some(g) => assert_eq!(g, w, "item {key:?}: attribute {name}"),
            None => panic!("item {key:?}: attribute {name} missing; item: {got:?}"),
        }
    }
    for name in got.keys() {
        assert!(
            want.contains_key(name),
            "item {key:?}: unexpected attribute {name} = {:?}",
            got[name]
        );
    }
}

// ---- MariaDB and SQLite sources ------------------------------------------

/// MariaDB as the tests reach it (a database every test may use to create its own).
pub const MY_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// A MariaDB database of the test's own, dropped on `drop_database`.
pub struct MyDatabase {
    /// Connections to this database.
    pub pool: sqlx::MySqlPool,
    pub name: String,
    /// `mysql://…/NAME`, for the mapping or `--source`.
    pub url: String,
}

impl MyDatabase {
    pub async fn create(prefix: &str) -> MyDatabase {
        use sqlx::Connection;
        let name = unique(prefix);
        let mut admin = sqlx::MySqlConnection::connect(MY_URL)
            .await
            .expect("MariaDB on 127.0.0.1:3306 (scripts/services.sh starts it)");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE `{name}` CHARACTER SET utf8mb4"
        )))
        .execute(&mut admin)
        .await
        .unwrap();
        let _ = admin.close().await;
        let url = format!("mysql://root@127.0.0.1:3306/{name}");
        let pool = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(2)
            .connect(&url)
            .await
            .unwrap();
        MyDatabase { pool, name, url }
    }

    /// Runs SQL (several statements allowed) in this database.
    pub async fn exec(&self, sql: &str) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    }

    pub async fn drop_database(self) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE `{}`",
            self.name
        )))
        .execute(&self.pool)
        .await
        .unwrap();
        self.pool.close().await;
    }
}

/// Creates the SQLite file `path` from `sql` and returns its `sqlite://` URL.
pub async fn sqlite_file(path: &Path, sql: &str) -> String {
    use sqlx::Connection;
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    conn.close().await.unwrap();
    format!("sqlite://{}", path.display())
}

/// The lines of a run's rejects file, as JSON.
pub fn rejects_of(dir: &Path, report: &serde_json::Value) -> Vec<serde_json::Value> {
    let path = dir.join(report["rejects_file"].as_str().unwrap());
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
