//! Source databases of a test's own: a PostgreSQL schema and a MariaDB
//! database, dropped when the value is dropped (also when the test panics),
//! and SQLite files.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use sqlx::Connection;

use super::{mysql_url, pg_url, unique_name as unique};

/// How long a clean-up may take before it is given up (and said so).
const CLEAN_UP_PATIENCE: Duration = Duration::from_secs(20);

/// Runs `work` to completion on a runtime of its own, on a thread of its own:
/// `Drop` is synchronous and may run inside the test's runtime, or while a
/// panic unwinds. Never panics; a failure is printed (a panic in `Drop`
/// during unwinding would abort the whole test binary).
fn clean_up(what: String, work: impl Future<Output = Result<(), String>> + Send + 'static) {
    let joined = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async {
            match tokio::time::timeout(CLEAN_UP_PATIENCE, work).await {
                Ok(done) => done,
                Err(_) => Err(format!("not done after {CLEAN_UP_PATIENCE:?}")),
            }
        })
    })
    .join();
    match joined {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("clean-up: {what}: {e}"),
        Err(_) => eprintln!("clean-up: {what}: the clean-up thread panicked"),
    }
}

/// Runs `sql` on a connection of its own to PostgreSQL (`postgres`) or
/// MariaDB, from `Drop`: see [`clean_up`].
fn clean_up_sql(postgres: bool, what: String, sql: String) {
    clean_up(what, async move {
        let sql = sqlx::raw_sql(sqlx::AssertSqlSafe(sql));
        let done = if postgres {
            let mut conn = sqlx::PgConnection::connect(pg_url()).await;
            match &mut conn {
                Ok(conn) => sql.execute(conn).await.map(drop),
                Err(_) => conn.map(drop),
            }
        } else {
            let mut conn = sqlx::MySqlConnection::connect(mysql_url()).await;
            match &mut conn {
                Ok(conn) => sql.execute(conn).await.map(drop),
                Err(_) => conn.map(drop),
            }
        };
        done.map_err(|e| e.to_string())
    });
}

/// Runs SQL (several statements allowed), naming the SQL when it fails.
pub async fn exec<'c, E: sqlx::Executor<'c>>(executor: E, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(executor)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
}

/// A PostgreSQL schema of the test's own, dropped (with everything in it)
/// when this value is dropped.
pub struct PgSchema {
    /// Connections to the test database.
    pub pool: sqlx::PgPool,
    /// The schema's name, unique to the test.
    pub name: String,
}

impl PgSchema {
    /// Creates a schema named after `prefix`.
    pub async fn create(prefix: &str) -> PgSchema {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(pg_url())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "PostgreSQL at {} ({e}); scripts/services.sh starts it",
                    pg_url()
                )
            });
        let name = unique(prefix);
        exec(&pool, &format!("CREATE SCHEMA {name}")).await;
        PgSchema { pool, name }
    }

    /// Creates a schema named after `prefix` and runs `sql` in it (see
    /// [`PgSchema::exec`]).
    pub async fn filled(prefix: &str, sql: &str) -> PgSchema {
        let schema = PgSchema::create(prefix).await;
        schema.exec(sql).await;
        schema
    }

    /// Runs SQL with `{schema}` replaced by the schema name.
    pub async fn exec(&self, sql: &str) {
        exec(&self.pool, &sql.replace("{schema}", &self.name)).await;
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        clean_up_sql(
            true,
            format!("schema {}", self.name),
            format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
        );
    }
}

/// A MariaDB database of the test's own, dropped when this value is dropped.
pub struct MyDatabase {
    /// Connections to this database.
    pub pool: sqlx::MySqlPool,
    /// The database's name, unique to the test.
    pub name: String,
    /// `mysql://…/NAME`, for the mapping or `--source`.
    pub url: String,
}

impl MyDatabase {
    /// Creates a database named after `prefix`.
    pub async fn create(prefix: &str) -> MyDatabase {
        let name = unique(prefix);
        let mut admin = sqlx::MySqlConnection::connect(mysql_url())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "MariaDB at {} ({e}); scripts/services.sh starts it",
                    mysql_url()
                )
            });
        exec(
            &mut admin,
            &format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"),
        )
        .await;
        let _ = admin.close().await;
        let url = with_database(mysql_url(), &name);
        let pool = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(2)
            .connect(&url)
            .await
            .unwrap();
        MyDatabase { pool, name, url }
    }

    /// Creates a database named after `prefix` and runs `sql` in it.
    pub async fn filled(prefix: &str, sql: &str) -> MyDatabase {
        let db = MyDatabase::create(prefix).await;
        db.exec(sql).await;
        db
    }

    /// Runs SQL (several statements allowed) in this database.
    pub async fn exec(&self, sql: &str) {
        exec(&self.pool, sql).await;
    }
}

impl Drop for MyDatabase {
    fn drop(&mut self) {
        clean_up_sql(
            false,
            format!("database {}", self.name),
            format!("DROP DATABASE IF EXISTS `{}`", self.name),
        );
    }
}

/// Creates the SQLite file `path` from `sql` and returns its `sqlite://` URL.
pub async fn sqlite_file(path: &Path, sql: &str) -> String {
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    exec(&mut conn, sql).await;
    conn.close().await.unwrap();
    format!("sqlite://{}", path.display())
}

/// `url` with its database (the last path segment) replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let server = match base.rsplit_once('/') {
        Some((server, _)) if server.contains("//") && !server.ends_with('/') => server,
        _ => base.trim_end_matches('/'),
    };
    match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    }
}
