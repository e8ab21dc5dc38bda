//! One test's world, set up in a few lines and torn down by `Drop` (also
//! when the test panics): source fixtures, a DynamoDB-compatible server, a
//! temporary directory, a target table name, a mapping.
//!
//! ```ignore
//! let sc = Scenario::new("bad_rows").postgres(FIXTURE).start().await;
//! let mapping = sc.mapping(MAPPING);
//! let run = sc.run(&mapping, &["--json", "--quiet"]).await;
//! ```

use std::path::Path;

use sql2ddb_testkit::{FaultConfig, FaultProxy};

use super::sources::DEFAULT_PG_URL;
use super::{
    command, pg_url, sql2ddb, sqlite_file, unique, write_mapping, Dynamo, Items, MyDatabase,
    PgSchema, Run, ScanKeyed,
};

/// What a scenario is made of, before anything starts.
pub struct Setup {
    prefix: String,
    postgres: Option<String>,
    mariadb: Option<String>,
    sqlite: Option<String>,
}

impl Setup {
    /// A PostgreSQL schema of the test's own, filled by `sql` (`{schema}`
    /// stands for its name).
    pub fn postgres(mut self, sql: &str) -> Setup {
        self.postgres = Some(sql.to_string());
        self
    }

    /// A MariaDB database of the test's own, filled by `sql`.
    pub fn mariadb(mut self, sql: &str) -> Setup {
        self.mariadb = Some(sql.to_string());
        self
    }

    /// A SQLite file `src.db` in the scenario's directory, made by `sql`.
    pub fn sqlite(mut self, sql: &str) -> Setup {
        self.sqlite = Some(sql.to_string());
        self
    }

    /// Creates the sources, starts the server, makes the directory.
    pub async fn start(self) -> Scenario {
        let dynamo = Dynamo::start().await;
        let dir = tempfile::tempdir().unwrap();
        let mut pg = None;
        if let Some(sql) = &self.postgres {
            pg = Some(PgSchema::filled(&self.prefix, sql).await);
        }
        let mut my = None;
        if let Some(sql) = &self.mariadb {
            my = Some(MyDatabase::filled(&self.prefix, sql).await);
        }
        let mut sqlite = None;
        if let Some(sql) = &self.sqlite {
            sqlite = Some(sqlite_file(&dir.path().join("src.db"), sql).await);
        }
        Scenario {
            table: unique(&self.prefix),
            pg,
            my,
            sqlite,
            dynamo,
            dir,
        }
    }
}

/// One test's world; dropping it drops its schema and database, stops its
/// server and removes its directory.
pub struct Scenario {
    /// A target table name of the test's own.
    pub table: String,
    pg: Option<PgSchema>,
    my: Option<MyDatabase>,
    sqlite: Option<String>,
    /// The DynamoDB-compatible server.
    pub dynamo: Dynamo,
    /// The directory the binary runs in.
    pub dir: tempfile::TempDir,
}

impl Scenario {
    /// A scenario whose names start with `prefix`; add sources, then `start`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(prefix: &str) -> Setup {
        Setup {
            prefix: prefix.to_string(),
            postgres: None,
            mariadb: None,
            sqlite: None,
        }
    }

    /// The PostgreSQL schema.
    pub fn pg(&self) -> &PgSchema {
        self.pg.as_ref().expect("a scenario with .postgres(…)")
    }

    /// The MariaDB database.
    pub fn my(&self) -> &MyDatabase {
        self.my.as_ref().expect("a scenario with .mariadb(…)")
    }

    /// The SQLite file's `sqlite://` URL.
    pub fn sqlite_url(&self) -> &str {
        self.sqlite.as_deref().expect("a scenario with .sqlite(…)")
    }

    /// The directory the binary runs in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `mapping.toml` from `text` with `TABLE` replaced by the
    /// scenario's table, `SCHEMA` by its PostgreSQL schema and the local
    /// PostgreSQL's URL by [`pg_url`] (mappings written out literally follow
    /// `SQL2DDB_TEST_PG_URL` too); returns its path.
    pub fn mapping(&self, text: &str) -> String {
        let mut text = text
            .replace("TABLE", &self.table)
            .replace(DEFAULT_PG_URL, pg_url());
        if let Some(pg) = &self.pg {
            text = text.replace("SCHEMA", &pg.name);
        }
        write_mapping(self.path(), &text)
    }

    /// Runs the binary in the scenario's directory.
    pub async fn sql2ddb(&self, args: &[&str]) -> Run {
        sql2ddb(self.path(), args).await
    }

    /// `sql2ddb run MAPPING --endpoint <this server> EXTRA…`.
    pub async fn run(&self, mapping: &str, extra: &[&str]) -> Run {
        let mut args = vec!["run", mapping, "--endpoint", &self.dynamo.url];
        args.extend_from_slice(extra);
        self.sql2ddb(&args).await
    }

    /// A fault proxy with `faults` in front of the scenario's server.
    pub async fn proxy(&self, faults: FaultConfig) -> FaultProxy {
        FaultProxy::start(&self.dynamo.url, faults)
            .await
            .unwrap_or_else(|e| panic!("a fault proxy: {e}"))
    }

    /// Every item of the scenario's table.
    pub async fn items(&self) -> Items {
        self.dynamo.scan(&self.table).await
    }

    /// Puts `item` into the scenario's table as it is (a bulk put's record,
    /// or a test's own change to the table).
    pub async fn put(&self, item: &sql2ddb_core::Item) {
        self.dynamo
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(sql2ddb_testkit::sdk::item_to_sdk(item)))
            .send()
            .await
            .unwrap();
    }

    /// Whether `table` exists on the server.
    pub async fn table_exists(&self, table: &str) -> bool {
        self.dynamo
            .client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .is_ok()
    }

    /// `init ARGS`, then `check`, `run` and `verify --deep` with `url` as
    /// `DATABASE_URL`, each exiting 0; returns the mapping.
    pub async fn init_run_verify(&self, url: &str, init: &[&str]) -> String {
        let mut args = vec!["init", "--source", url];
        args.extend_from_slice(init);
        let out = self.sql2ddb(&args).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        let mapping = self.mapping(&out.stdout);
        let endpoint = self.dynamo.url.clone();
        for args in [
            vec!["check", mapping.as_str()],
            vec!["run", &mapping, "--endpoint", &endpoint, "--quiet"],
            vec!["verify", &mapping, "--deep", "--endpoint", &endpoint],
        ] {
            let run = command(self.path(), &args)
                .env("DATABASE_URL", url)
                .output()
                .await
                .unwrap();
            assert_eq!(
                run.status.code(),
                Some(0),
                "{args:?}\n{}\n{}{}",
                out.stdout,
                String::from_utf8_lossy(&run.stdout),
                String::from_utf8_lossy(&run.stderr)
            );
        }
        out.stdout
    }
}
