//! sql2ddb source readers: PostgreSQL, MySQL/MariaDB and SQLite.
//!
//! A [`Source`] holds one connection pool of one dialect. For an entity (a
//! table or a query, see [`From`]) it describes the columns ([`Source::describe`]),
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
//! segment is read with its own keyset cursor by [`Source::read_range`].
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
//! batches within the bind limits.
//!
//! # PostgreSQL types
//!
//! | SQL type | `SqlValue` |
//! |---|---|
//! | `smallint`, `integer`, `bigint` | `Int` |
//! | `numeric` (any precision, `NaN`, `±Infinity`) | `Decimal`, exactly as PostgreSQL prints it (`12.3400`, `NaN`) |
//! | `real` | `Float` via the `f32`'s shortest text (`0.1` stays `0.1`) |
//! | `double precision` | `Float` (`NaN`, `±Infinity` kept; the mapping rejects them) |
//! | `text`, `varchar`, `char(n)` (padding kept), `name`, `citext` | `Text` |
//! | `boolean` | `Bool` |
//! | `bytea` | `Bytes` |
//! | `date` | `Date`; `±infinity` → `Invalid("infinity date")` |
//! | `time` | `Time`; `24:00:00` → `Invalid` |
//! | `timestamp` | `Timestamp`; `±infinity` → `Invalid("infinity timestamp")` |
//! | `timestamptz` | `TimestampTz`, normalised to UTC; `±infinity` → `Invalid("infinity timestamp")` |
//! | `uuid` | `Text`, lowercase hyphenated |
//! | `json`, `jsonb` | `Json`, numbers with their exact digits |
//! | arrays of any type, any dimension | `Array` (nested for more dimensions), NULL elements → `Null`; elements decoded as the scalar type above (int, numeric, real/double, text types, bool, date, time, timestamp, timestamptz, uuid, bytea, json); other element types → `Text` (or `Json` when not a string) |
//! | enums, domains, `interval`, `inet`, `money`, `timetz`, … | `Text`, PostgreSQL's text output (`::text`) |
//!
//! # MySQL / MariaDB types
//!
//! The session uses `utf8mb4` and time zone `+00:00`, so text of any column
//! charset (latin1 included) arrives as UTF-8, and `TIMESTAMP` values are UTC.
//! TLS follows the URL's `ssl-mode` (`disabled`, `preferred` — the default —,
//! `required`, `verify_ca`, `verify_identity`) and `ssl-ca`.
//!
//! | SQL type | `SqlValue` |
//! |---|---|
//! | `TINYINT(1)`, `BOOLEAN` | `Bool` for 0 and 1; any other value stays `Int` (nothing is lost) |
//! | `TINYINT`, `SMALLINT`, `MEDIUMINT`, `INT`, `BIGINT` (signed or unsigned) | `Int`; `BIGINT UNSIGNED` above `i64::MAX` → `UInt` |
//! | `YEAR` | `Int` |
//! | `BIT(n)` | `Int` (`UInt` for a `BIT(64)` value above `i64::MAX`) |
//! | `DECIMAL(p,s)` | `Decimal`, exact text (`1.500`) |
//! | `FLOAT` | `Float` via the `f32`'s shortest text |
//! | `DOUBLE` | `Float` |
//! | `CHAR`, `VARCHAR`, `TEXT` family | `Text` |
//! | `ENUM` | `Text` (the label) |
//! | `SET` | `TextSet`, split on `,`; the empty set → empty `TextSet` |
//! | `JSON` (MySQL's type, and MariaDB's `LONGTEXT … CHECK (json_valid(…))` alias) | `Json`; invalid text → `Invalid` |
//! | `BINARY`, `VARBINARY`, `BLOB` family, spatial types | `Bytes` |
//! | `DATE` | `Date`; `0000-00-00` → `Invalid("zero date 0000-00-00 cannot be represented")`, other impossible dates → `Invalid` |
//! | `DATETIME` | `Timestamp`: no zone (the mapping's `timezone` says which; UTC by default); zero dates → `Invalid` |
//! | `TIMESTAMP` | `TimestampTz`: an instant, read in UTC; zero dates → `Invalid` |
//! | `TIME` | `Time`; negative or ≥ 24h values → `Invalid` (a duration, not a time of day) |
//! | MariaDB `UUID`, `INET6`, anything else | `Text` (`CAST(… AS CHAR)`) |
//!
//! For a query entity the types are those the server reports for the result
//! columns; MariaDB reports a JSON column as `LONGTEXT` there, so it arrives as
//! `Text` (read the table, or parse it in the mapping).
//!
//! # SQLite types
//!
//! SQLite types values, not columns: each value is decoded by its storage
//! class, with the declared column type as a hint.
//!
//! | Storage class (declared type) | `SqlValue` |
//! |---|---|
//! | `NULL` | `Null` |
//! | `INTEGER` | `Int`; declared `BOOLEAN`/`BOOL` and the value 0 or 1 → `Bool` |
//! | `REAL` | `Float` |
//! | `TEXT` | `Text`; declared `DECIMAL`/`NUMERIC` → `Decimal`; declared `JSON` → `Json` (invalid JSON → `Invalid` with the parser's reason); declared `DATE` / `DATETIME` / `TIMESTAMP` with ISO text → `Date` / `Timestamp` / `TimestampTz` |
//! | `BLOB` | `Bytes` |
//!
//! SQLite's own `NUMERIC` affinity (declared `DECIMAL`, `NUMERIC`, …) already
//! stores a number literal such as `'12.30'` as `REAL` 12.3 or `INTEGER` when it
//! is written, keeping about 15 significant digits: such values arrive as
//! `Float`/`Int`, and only text that is no number literal arrives as `Decimal`
//! (which the mapping then rejects with its reason).
//!
//! Dates and times in SQLite are whatever the application stored. Text in a
//! column declared `DATE` that reads `YYYY-MM-DD` → `Date`; text in a column
//! declared `DATETIME` or `TIMESTAMP` that reads as ISO 8601 (`2024-01-02
//! 03:04:05`, `T` separator, fraction) → `Timestamp`, with an offset or `Z` →
//! `TimestampTz` in UTC. Anything else (other text, Julian day numbers, Unix
//! seconds) stays `Text`, `Float` or `Int`. For a query entity the declared types
//! are those SQLite reports for the query's columns.
//!
//! SQLite orders such keys by the text stored, not by the decoded value, so a
//! cursor or segment bound on a date, timestamp or JSON key is bound as the
//! very text the table holds for it (`2024-01-02T03:04:05` and `2024-01-02
//! 03:04:05` decode alike but sort apart). One value stored as two different
//! texts in a key column is an error: no cursor can tell those rows apart.

#![warn(missing_docs)]

mod children;
mod error;
mod keys;
mod mysql;
mod postgres;
mod proof;
mod segment;
mod sql;
mod sqlite;
mod sqlite_keys;

use sql2ddb_core::{Column, Row, SqlValue};

pub use children::{ChildQuery, MAX_BIND_VALUES, MAX_PARENTS_PER_QUERY};
pub use error::{SourceError, SourceErrorKind};
pub use proof::KeyProof;
pub use segment::{
    default_read_parallelism, Segment, MAX_DEFAULT_READ_PARALLELISM, ROWS_PER_SEGMENT,
};

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

/// What an entity reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From<'a> {
    /// A table, `table` or `schema.table` (PostgreSQL schema, MySQL database,
    /// SQLite attached database). Each part is quoted for the dialect.
    Table(&'a str),
    /// A `SELECT` statement, wrapped as a subquery; needs an explicit key.
    Query(&'a str),
}

impl From<'_> {
    /// A short name for messages: the table name, or `query`.
    pub fn display_name(&self) -> &str {
        match self {
            From::Table(name) => name,
            From::Query(_) => "query",
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

/// Prebuilt statements for reading one entity page by page.
#[derive(Debug, Clone)]
pub struct PageQuery {
    dialect: Dialect,
    entity: String,
    columns: Vec<Column>,
    key_indices: Vec<usize>,
    page_size: usize,
    /// The entity's `FROM` item, aliased `t`.
    relation: String,
    /// Select-list expressions, one per column.
    select: Vec<String>,
    /// Key column references (`t."k"`), in key order.
    key_refs: Vec<String>,
    /// Per key column: text before and after a placeholder (a cast).
    params: Vec<(String, String)>,
    statements: sql::PageSql,
    decoders: Decoders,
}

/// Per-column decoding plans, one kind per dialect.
#[derive(Debug, Clone)]
enum Decoders {
    Postgres(Vec<postgres::Kind>),
    MySql(Vec<mysql::Kind>),
    Sqlite(Vec<sqlite::Hint>),
}

/// What a dialect contributes to a [`PageQuery`].
pub(crate) struct DialectPlan {
    /// Select-list expressions, one per column.
    select: Vec<String>,
    /// Per key column: text before and after the placeholder (a cast).
    params: Vec<(String, String)>,
    decoders: Decoders,
}

impl PageQuery {
    /// The cursor values of a row: its key columns, in key order.
    pub fn key_of(&self, row: &Row) -> Vec<SqlValue> {
        self.key_indices.iter().map(|&i| row[i].clone()).collect()
    }

    /// The columns every row holds, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Positions of the key columns within a row.
    pub fn key_indices(&self) -> &[usize] {
        &self.key_indices
    }

    /// Most rows a page holds.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The statement for pages after a cursor, for logs and `plan` output.
    pub fn sql(&self) -> &str {
        &self.statements.after.sql
    }
}

/// One connection pool to one SQL source.
#[derive(Debug, Clone)]
pub struct Source {
    pool: Pool,
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
        let max = max_connections.max(1);
        let scheme = url
            .split_once(':')
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default();
        let pool = match scheme.as_str() {
            "postgres" | "postgresql" => Pool::Postgres(postgres::connect(url, max).await?),
            "mysql" | "mariadb" => Pool::MySql(mysql::connect(url, max).await?),
            "sqlite" => Pool::Sqlite(sqlite::connect(url, max).await?),
            _ => {
                return Err(SourceError::config(format!(
                    "unsupported source URL {url}: expected postgres://, mysql://, mariadb:// or sqlite:"
                )))
            }
        };
        Ok(Source { pool })
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
    pub async fn describe(&self, from: &From<'_>) -> Result<Shape, SourceError> {
        match &self.pool {
            Pool::Postgres(p) => postgres::describe(p, from).await,
            Pool::MySql(p) => mysql::describe(p, from).await,
            Pool::Sqlite(p) => sqlite::describe(p, from).await,
        }
    }

    /// [`Source::describe`] for the mapping's entity `entity`: every error
    /// names it (see [`SourceError::for_entity`]). A query entity's SQL error
    /// shows the server's message and, where the server gives the place, the
    /// line and column within the query, the line and a caret under it.
    pub async fn describe_named(
        &self,
        entity: &str,
        from: &From<'_>,
    ) -> Result<Shape, SourceError> {
        self.describe(from).await.map_err(|e| e.for_entity(entity))
    }

    /// `SELECT count(*)` of the entity (for progress and the final check).
    pub async fn count(&self, from: &From<'_>) -> Result<u64, SourceError> {
        let sql = sql::count_sql(self.dialect(), from)?;
        let context = format!("count rows of {}", from.display_name());
        let n: i64 = match &self.pool {
            Pool::Postgres(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(p)
                .await
                .map_err(|e| SourceError::query(&context, e))?,
            Pool::MySql(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(p)
                .await
                .map_err(|e| SourceError::query(&context, e))?,
            Pool::Sqlite(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(p)
                .await
                .map_err(|e| SourceError::query(&context, e))?,
        };
        Ok(n.max(0) as u64)
    }

    /// Builds the page statements for an entity read in `key` order, at most
    /// `page_size` rows a page. An empty `key` means the table's primary key;
    /// a query entity must name its key. Every key column must be one of the
    /// shape's columns.
    pub fn page_query(
        &self,
        from: &From<'_>,
        shape: &Shape,
        key: &[String],
        page_size: usize,
    ) -> Result<PageQuery, SourceError> {
        let entity = from.display_name().to_string();
        let key: Vec<String> =
            match (key.is_empty(), from) {
                (false, _) => key.to_vec(),
                (true, From::Query(_)) => return Err(SourceError::config(
                    "a query entity needs `key = [...]`: the columns that order and page its rows",
                )),
                (true, From::Table(_)) if shape.primary_key.is_empty() => {
                    return Err(SourceError::config(format!(
                        "table {entity} has no primary key: set `key = [...]` for it"
                    )))
                }
                (true, From::Table(_)) => shape.primary_key.clone(),
            };
        if page_size == 0 {
            return Err(SourceError::config("page size must be at least 1"));
        }
        let mut key_indices = Vec::with_capacity(key.len());
        for k in &key {
            let i = shape
                .columns
                .iter()
                .position(|c| &c.name == k)
                .ok_or_else(|| {
                    let names: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
                    SourceError::config(format!(
                        "key column {k} is not a column of {entity} (columns: {})",
                        names.join(", ")
                    ))
                })?;
            key_indices.push(i);
        }
        let dialect = self.dialect();
        let plan = match dialect {
            Dialect::Postgres => postgres::plan(&shape.columns, &key_indices)?,
            Dialect::MySql => mysql::plan(&shape.columns, &key_indices)?,
            Dialect::Sqlite => sqlite::plan(&shape.columns, &key_indices)?,
        };
        let key_refs: Vec<String> = key.iter().map(|k| sql::column_ref(dialect, k)).collect();
        let relation = sql::relation(dialect, from)?;
        let statements = sql::page_sql(
            dialect,
            &relation,
            &plan.select,
            &key_refs,
            |i, placeholder| format!("{}{placeholder}{}", plan.params[i].0, plan.params[i].1),
            page_size,
        );
        Ok(PageQuery {
            dialect,
            entity,
            columns: shape.columns.clone(),
            key_indices,
            page_size,
            relation,
            select: plan.select,
            key_refs,
            params: plan.params,
            statements,
            decoders: plan.decoders,
        })
    }

    /// The next page: at most `page_size` rows strictly after `after` (the key
    /// values of the last row of the previous page; `None` = from the start),
    /// in key order. An empty page means the end. The same as
    /// [`Source::read_range`] with no upper bound.
    pub async fn read_page(
        &self,
        q: &PageQuery,
        after: Option<&[SqlValue]>,
    ) -> Result<Vec<Row>, SourceError> {
        self.read_range(q, after, None).await
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
                postgres::fetch(p, entity, columns, kinds, sql, values).await
            }
            (Pool::MySql(p), Decoders::MySql(kinds)) => {
                mysql::fetch(p, entity, columns, kinds, sql, values).await
            }
            (Pool::Sqlite(p), Decoders::Sqlite(hints)) => {
                sqlite::fetch(p, entity, columns, hints, sql, values).await
            }
            _ => Err(SourceError::config("page query built for another dialect")),
        }
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        match &self.pool {
            Pool::Postgres(p) => p.close().await,
            Pool::MySql(p) => p.close().await,
            Pool::Sqlite(p) => p.close().await,
        }
    }
}

/// The statement and cursor values of one page read: rows after `after`
/// (exclusive) up to `until` (inclusive), either bound optional.
pub(crate) fn page_statement<'q>(
    q: &'q PageQuery,
    after: Option<&'q [SqlValue]>,
    until: Option<&'q [SqlValue]>,
) -> (&'q str, Vec<&'q SqlValue>) {
    let st = match (after.is_some(), until.is_some()) {
        (false, false) => &q.statements.first,
        (true, false) => &q.statements.after,
        (false, true) => &q.statements.until,
        (true, true) => &q.statements.between,
    };
    let values = st
        .binds
        .iter()
        .filter_map(|b| match *b {
            sql::Bind::After(i) => after.map(|a| &a[i]),
            sql::Bind::Until(i) => until.map(|u| &u[i]),
        })
        .collect();
    (&st.sql, values)
}

/// An `f32` widened through its shortest text, so `0.1f32` becomes `0.1f64`.
pub(crate) fn widen_f32(f: f32) -> f64 {
    if f.is_finite() {
        f.to_string().parse().unwrap_or(f as f64)
    } else {
        f as f64
    }
}

/// A cursor value that cannot be bound (NULL, invalid, nested).
pub(crate) fn cursor_error(entity: &str, v: &SqlValue) -> SourceError {
    SourceError::config(format!(
        "cannot page {entity} after a key value {v:?}: key columns must hold plain, non-NULL values"
    ))
}
