//! sql2ddb source readers: PostgreSQL, MySQL/MariaDB and SQLite.
//!
//! A [`Source`] holds one connection pool of one dialect. For an entity (a
//! table or a query, see [`Relation`]) it describes the columns ([`Source::describe`]),
//! counts the rows ([`Source::count`]) and reads keyset pages
//! ([`Source::page_query`], [`Source::read_page`]):
//! `WHERE (k1, k2) > (…) ORDER BY k1, k2 LIMIT n`, never `OFFSET`, so every
//! page costs the same and memory stays flat whatever the table size. A query
//! entity is wrapped as `SELECT … FROM (<query>) AS t …` and needs an explicit
//! key.
//!
//! For parallel reads, [`Source::split`] cuts an entity's key range into
//! [`Segment`]s (`after < key <= until`): a single integer key by `MIN`/`MAX`
//! into ranges of equal width, any other key by `NTILE(n)` boundaries; each
//! segment is read with its own keyset cursor by [`Source::read_range`], and
//! its rows are counted by [`Source::count_range`].
//! [`default_read_parallelism`] chooses `n` from the table's size.
//!
//! Values are decoded by the column's declared type, never by guessing from
//! text, into the dialect-neutral [`SqlValue`]. Key columns must not hold NULL
//! (a NULL key is never "after" a cursor, so such rows would not be read) and
//! the key must be unique (rows sharing the last key of a page would be
//! stepped over): [`Source::prove_unique_key`] proves both from the catalog
//! (a table) or by checking the rows (a query entity), or says what is wrong.
//!
//! Errors can name the mapping's entity ([`Source::describe_named`],
//! [`SourceError::for_entity`]); a query entity's SQL error points at the line
//! and column of the query where the server says it failed.
//!
//! [`Source::read_keys`] reads rows back by key (to replay rejected rows), in
//! batches within the bind limits.//!
#![doc = include_str!("types.md")]
#![warn(missing_docs)]

use std::sync::Arc;

pub mod cdc;
mod children;
mod column_plan;
mod error;
mod fetch;
mod keys;
mod mysql;
mod page;
mod postgres;
mod proof;
mod relations;
mod schema;
mod segment;
mod snapshot;
mod sql;
mod sqlite;
mod sqlite_keys;
mod stats;
mod url_hint;

use sql2ddb_core::{Column, Row, SqlValue};
use sqlx::sqlite::SqlitePoolOptions;

pub use children::{ChildQuery, MAX_BIND_VALUES, MAX_PARENTS_PER_QUERY};
pub use error::{SourceError, SourceErrorKind, UnfollowableChange};
pub use page::PageQuery;
pub use proof::KeyProof;
pub use relations::RelationKind;
pub use schema::{ForeignKey, SchemaColumn, SchemaTable};
pub use segment::{
    default_read_parallelism, Segment, MAX_DEFAULT_READ_PARALLELISM, ROWS_PER_SEGMENT,
};
pub use snapshot::Snapshot;
pub use sql::quote_table;
pub use stats::{Duplicates, ValueGroup};

use page::Decoders;

/// The SQL dialect of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    MySql,
    /// SQLite.
    Sqlite,
}

/// What an entity reads: the relation its rows come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation<'a> {
    /// A table, `table` or `schema.table` (PostgreSQL schema, MySQL database,
    /// SQLite attached database). Each part is quoted for the dialect.
    Table(&'a str),
    /// A `SELECT` statement, wrapped as a subquery; needs an explicit key.
    Query(&'a str),
}

impl Relation<'_> {
    /// A short name for messages: the table name, or `query`.
    pub fn display_name(&self) -> &str {
        match self {
            Relation::Table(name) => name,
            Relation::Query(_) => "query",
        }
    }
}

/// The columns of an entity, in select order, and its primary key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Column names and the source's type names.
    pub columns: Vec<Column>,
    /// Primary key columns in key order; empty for queries and tables without one.
    pub primary_key: Vec<String>,
}

/// One connection pool to one SQL source.
#[derive(Debug, Clone)]
pub struct Source {
    pool: Pool,
    /// The run's snapshot, once taken (`None`: a SQLite source not opened
    /// with [`Source::connect_for_snapshot`]).
    snapshot: Option<Arc<snapshot::SharedSnapshot>>,
}

#[derive(Debug, Clone)]
enum Pool {
    Postgres(sqlx::PgPool),
    MySql(sqlx::MySqlPool),
    Sqlite(sqlx::SqlitePool),
}

impl Source {
    /// Connects to `url`: `postgres://`, `postgresql://`, `mysql://`,
    /// `mariadb://` (treated as mysql), `sqlite://path` or `sqlite:path`
    /// (relative to the current directory; opened read-only; the file must
    /// exist). One connection is opened right away so a wrong address or
    /// password fails now, with a redacted message.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Source, SourceError> {
        Source::open(url, max_connections, false).await
    }

    /// As [`Source::connect`], ready for [`Source::take_snapshot`]: a SQLite
    /// source gets one connection, because its read transaction — the
    /// snapshot — lives in one connection, which all reads then share.
    pub async fn connect_for_snapshot(
        url: &str,
        max_connections: u32,
    ) -> Result<Source, SourceError> {
        Source::open(url, max_connections, true).await
    }

    async fn open(url: &str, max_connections: u32, snapshot: bool) -> Result<Source, SourceError> {
        let max = max_connections.max(1);
        let scheme = url
            .split_once(':')
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default();
        let shared = Arc::new(snapshot::SharedSnapshot::default());
        let hint = |e: SourceError| match url_hint::raw_delimiter_in_password(url) {
            Some(c) => e.with_advice(&url_hint::advice(c)),
            None => e,
        };
        let pool = match scheme.as_str() {
            "postgres" | "postgresql" => Pool::Postgres(
                postgres::connect(url, snapshot::pool_options(max, &shared))
                    .await
                    .map_err(hint)?,
            ),
            "mysql" | "mariadb" => Pool::MySql(
                mysql::connect(url, snapshot::mysql_pool_options(max, &shared))
                    .await
                    .map_err(hint)?,
            ),
            "sqlite" if snapshot => {
                Pool::Sqlite(sqlite::connect(url, snapshot::sqlite_pool_options(&shared)).await?)
            }
            "sqlite" => Pool::Sqlite(sqlite::connect(url, SqlitePoolOptions::new().max_connections(max)).await?),
            _ => {
                return Err(SourceError::config(format!(
                    "unsupported source URL {url}: expected postgres://, mysql://, mariadb:// or sqlite:"
                )))
            }
        };
        let snapshot = match &pool {
            Pool::Sqlite(_) if !snapshot => None,
            _ => Some(shared),
        };
        Ok(Source { pool, snapshot })
    }

    /// The dialect of this source.
    pub fn dialect(&self) -> Dialect {
        match self.pool {
            Pool::Postgres(_) => Dialect::Postgres,
            Pool::MySql(_) => Dialect::MySql,
            Pool::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Column names and type names in select order, and the primary key of a
    /// table. A missing table is a [`SourceErrorKind::NotFound`] error naming it.
    pub async fn describe(&self, from: &Relation<'_>) -> Result<Shape, SourceError> {
        let described = match &self.pool {
            Pool::Postgres(p) => postgres::describe(p, from).await,
            Pool::MySql(p) => mysql::describe(p, from).await,
            Pool::Sqlite(p) => sqlite::describe(p, from).await,
        };
        match (described, from) {
            (Err(SourceError::NotFound(message)), Relation::Table(name)) => Err(
                SourceError::NotFound(match self.similar_table(name).await {
                    Some(near) => format!("{message}; did you mean {near}?"),
                    None => message,
                }),
            ),
            (described, _) => described,
        }
    }

    /// [`Source::describe`] for the mapping's entity `entity`: every error
    /// names it (see [`SourceError::for_entity`]). A query entity's SQL error
    /// shows the server's message and, where the server gives the place, the
    /// line and column within the query, the line and a caret under it.
    pub async fn describe_named(
        &self,
        entity: &str,
        from: &Relation<'_>,
    ) -> Result<Shape, SourceError> {
        self.describe(from).await.map_err(|e| e.for_entity(entity))
    }

    /// `SELECT count(*)` of the entity (for progress and the final check).
    pub async fn count(&self, from: &Relation<'_>) -> Result<u64, SourceError> {
        let sql = sql::count_sql(self.dialect(), from)?;
        let context = format!("count rows of {}", from.display_name());
        let n = self.fetch_i64(&context, sql).await?;
        Ok(n.max(0) as u64)
    }

    /// The one `i64` that `sql` returns (a count).
    pub(crate) async fn fetch_i64(&self, context: &str, sql: String) -> Result<i64, SourceError> {
        match &self.pool {
            Pool::Postgres(p) => fetch::fetch_i64(p, context, sql).await,
            Pool::MySql(p) => fetch::fetch_i64(p, context, sql).await,
            Pool::Sqlite(p) => fetch::fetch_i64(p, context, sql).await,
        }
    }

    /// The count that `sql` returns with `values` bound in order.
    pub(crate) async fn fetch_count(
        &self,
        entity: &str,
        sql: &str,
        values: &[&SqlValue],
    ) -> Result<i64, SourceError> {
        match &self.pool {
            Pool::Postgres(p) => fetch::fetch_count(p, entity, sql, values).await,
            Pool::MySql(p) => fetch::fetch_count(p, entity, sql, values).await,
            Pool::Sqlite(p) => fetch::fetch_count(p, entity, sql, values).await,
        }
    }

    /// Runs `sql` with `values` bound in order and decodes every row with
    /// `decoders`; `columns` name the values in decoding errors.
    pub(crate) async fn fetch(
        &self,
        entity: &str,
        columns: &[Column],
        decoders: &Decoders,
        sql: &str,
        values: &[&SqlValue],
    ) -> Result<Vec<Row>, SourceError> {
        match (&self.pool, decoders) {
            (Pool::Postgres(p), Decoders::Postgres(kinds)) => {
                fetch::fetch(p, entity, columns, kinds, sql, values).await
            }
            (Pool::MySql(p), Decoders::MySql(kinds)) => {
                fetch::fetch(p, entity, columns, kinds, sql, values).await
            }
            (Pool::Sqlite(p), Decoders::Sqlite(hints)) => {
                fetch::fetch(p, entity, columns, hints, sql, values).await
            }
            _ => Err(SourceError::config("page query built for another dialect")),
        }
    }

    /// An error unless `dialect` (that of a prebuilt query) is this source's.
    pub(crate) fn check_dialect(&self, dialect: Dialect, what: &str) -> Result<(), SourceError> {
        if dialect != self.dialect() {
            return Err(SourceError::config(format!(
                "{what} built for another dialect"
            )));
        }
        Ok(())
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        self.release_snapshot();
        match &self.pool {
            Pool::Postgres(p) => p.close().await,
            Pool::MySql(p) => p.close().await,
            Pool::Sqlite(p) => p.close().await,
        }
    }
}

/// An `f32` widened through its shortest text, so `0.1f32` becomes `0.1f64`.
pub(crate) fn widen_f32(f: f32) -> f64 {
    if f.is_finite() {
        f.to_string().parse().unwrap_or(f as f64)
    } else {
        f as f64
    }
}
