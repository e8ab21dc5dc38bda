//! The one fetch loop: bind the cursor values, run the statement, decode every
//! row column by column. Written once, generic over the sqlx database; each
//! dialect contributes only how it binds a value and how it decodes a column
//! (its [`Driver`] impl).

use sql2ddb_core::{Column as SqlColumn, Row, SqlValue};
use sqlx::query::Query;
use sqlx::{
    AssertSqlSafe, Column as _, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments,
    Pool, Row as _, SqlSafeStr, Statement, Type, TypeInfo,
};

use crate::sql;
use crate::{Dialect, Relation, SourceError};

/// A decoding failure, as the drivers report it.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A statement of database `DB` that takes bound values.
pub(crate) type BoundQuery<'q, DB> = Query<'q, DB, <DB as Database>::Arguments>;

/// What one dialect adds to the fetch loop.
pub(crate) trait Driver: Database {
    /// How one column is decoded (chosen once per column from its type).
    type Decoder: Copy;

    /// `query` with `value` bound as the next placeholder; `None` for a value
    /// that cannot be a cursor in this dialect.
    fn bind<'q>(query: BoundQuery<'q, Self>, value: &SqlValue) -> Option<BoundQuery<'q, Self>>;

    /// Column `i` of `row`, decoded as `decoder` says.
    fn decode(row: &Self::Row, i: usize, decoder: Self::Decoder) -> Result<SqlValue, BoxError>;
}

/// Runs `sql` with `values` bound in order and decodes each row with
/// `decoders`, one per column; `columns` name the values in decoding errors.
pub(crate) async fn fetch<DB: Driver>(
    pool: &Pool<DB>,
    entity: &str,
    columns: &[SqlColumn],
    decoders: &[DB::Decoder],
    sql: &str,
    values: &[&SqlValue],
) -> Result<Vec<Row>, SourceError>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let rows = bind_all::<DB>(entity, sql, values)?
        .fetch_all(pool)
        .await
        .map_err(|e| SourceError::query(format!("read {entity}"), e))?;
    // Sized up front: collecting `Result`s cannot tell a vector its length,
    // so each row's values were grown twice on the way to ten columns.
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut values = Vec::with_capacity(decoders.len());
        for (i, decoder) in decoders.iter().enumerate() {
            values.push(
                DB::decode(row, i, *decoder)
                    .map_err(|e| SourceError::decode(&columns[i].name, e))?,
            );
        }
        out.push(values);
    }
    Ok(out)
}

/// The count that `sql` (a `SELECT count(*) …`) returns with `values` bound
/// in order, as [`fetch`] binds them.
pub(crate) async fn fetch_count<DB: Driver>(
    pool: &Pool<DB>,
    entity: &str,
    sql: &str,
    values: &[&SqlValue],
) -> Result<i64, SourceError>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let context = format!("count rows of {entity}");
    bind_all::<DB>(entity, sql, values)?
        .fetch_one(pool)
        .await
        .and_then(|row| row.try_get::<i64, _>(0))
        .map_err(|e| SourceError::query(context, e))
}

/// `sql` with the cursor `values` bound in order: the one bind loop of every
/// statement that takes key values.
fn bind_all<'q, DB: Driver>(
    entity: &str,
    sql: &'q str,
    values: &[&SqlValue],
) -> Result<BoundQuery<'q, DB>, SourceError> {
    let mut query = sqlx::query::<DB>(AssertSqlSafe(sql));
    for &v in values {
        query = DB::bind(query, v).ok_or_else(|| cursor_error(entity, v))?;
    }
    Ok(query)
}

/// The one `i64` a statement such as `SELECT count(*) …` returns.
pub(crate) async fn fetch_i64<DB>(
    pool: &Pool<DB>,
    context: &str,
    sql: String,
) -> Result<i64, SourceError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    sqlx::query_scalar::<DB, i64>(AssertSqlSafe(sql))
        .fetch_one(pool)
        .await
        .map_err(|e| SourceError::query(context, e))
}

/// The first row of a statement that returns `n` optional texts and then an
/// `i64`, if it returns any row.
pub(crate) async fn fetch_texts_and_i64<DB>(
    pool: &Pool<DB>,
    context: &str,
    sql: String,
    n: usize,
) -> Result<Option<(Vec<Option<String>>, i64)>, SourceError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    Option<String>: Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let row = sqlx::query::<DB>(AssertSqlSafe(sql))
        .fetch_optional(pool)
        .await
        .map_err(|e| SourceError::query(context, e))?;
    let Some(row) = row else { return Ok(None) };
    let texts = (0..n)
        .map(|i| row.try_get::<Option<String>, _>(i))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SourceError::query(context, e))?;
    let count = row
        .try_get::<i64, _>(n)
        .map_err(|e| SourceError::query(context, e))?;
    Ok(Some((texts, count)))
}

/// The result columns of a query entity, from its prepared `SELECT * …
/// LIMIT 0`; an error points into the query.
pub(crate) async fn prepare_query<DB>(
    pool: &Pool<DB>,
    dialect: Dialect,
    from: &Relation<'_>,
    query: &str,
) -> Result<DB::Statement, SourceError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let context = format!("describe {}", from.display_name());
    let statement = sql::describe_sql(dialect, from)?;
    pool.prepare(AssertSqlSafe(statement.clone()).into_sql_str())
        .await
        .map_err(|e| SourceError::query_in(&context, e, &statement, query))
}

/// The columns of a prepared statement, typed by the driver's type names.
pub(crate) fn statement_columns<S: Statement>(stmt: &S) -> Vec<SqlColumn> {
    stmt.columns()
        .iter()
        .map(|c| SqlColumn {
            name: c.name().to_string(),
            sql_type: c.type_info().name().to_string(),
        })
        .collect()
}

/// `query` with `value` bound, for the values every dialect binds alike
/// (integers, booleans, floats, text, bytes); `Err(query)` for the others.
pub(crate) fn bind_plain<'q, DB>(
    query: BoundQuery<'q, DB>,
    value: &SqlValue,
) -> Result<BoundQuery<'q, DB>, BoundQuery<'q, DB>>
where
    DB: Database,
    i64: for<'e> Encode<'e, DB> + Type<DB>,
    bool: for<'e> Encode<'e, DB> + Type<DB>,
    f64: for<'e> Encode<'e, DB> + Type<DB>,
    String: for<'e> Encode<'e, DB> + Type<DB>,
    Vec<u8>: for<'e> Encode<'e, DB> + Type<DB>,
{
    Ok(match value {
        SqlValue::Int(i) => query.bind(*i),
        SqlValue::Bool(b) => query.bind(*b),
        SqlValue::Float(f) => query.bind(*f),
        SqlValue::Decimal(s) | SqlValue::Text(s) => query.bind(s.clone()),
        SqlValue::Bytes(b) => query.bind(b.clone()),
        _ => return Err(query),
    })
}

/// A cursor value that cannot be bound (NULL, invalid, nested).
pub(crate) fn cursor_error(entity: &str, v: &SqlValue) -> SourceError {
    SourceError::config(format!(
        "cannot page {entity} after a key value {v:?}: key columns must hold plain, non-NULL values"
    ))
}
