//! SQLite: values are decoded by their storage class, with the declared
//! column type as a hint (`BOOLEAN`, `DECIMAL`/`NUMERIC`, `JSON`, `DATE`,
//! `DATETIME`/`TIMESTAMP`: ISO text in a date column becomes a date or a
//! timestamp, so SQLite dates map like the other dialects' do).

use std::path::Path;

use sql2ddb_core::{Column, SqlValue};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteRow};
use sqlx::{Row as _, Sqlite, TypeInfo, ValueRef};

use crate::column_plan::ColumnPlan;
use crate::fetch::{bind_plain, prepare_query, statement_columns, BoundQuery, BoxError, Driver};
use crate::sql::{self, column_ref};
use crate::{Dialect, Relation, Shape, SourceError};

/// What the declared type of a column says about its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hint {
    /// No hint: the storage class decides.
    None,
    /// `BOOLEAN`/`BOOL`: integers 0 and 1 are booleans.
    Bool,
    /// `DECIMAL`/`NUMERIC`: text is an exact decimal.
    Decimal,
    /// `JSON`: text is JSON.
    Json,
    /// `DATE`: `YYYY-MM-DD` text is a date.
    Date,
    /// `DATETIME`/`TIMESTAMP`: ISO text is a timestamp (with an offset: normalised to UTC).
    Timestamp,
}

/// The hint of a declared type.
pub(crate) fn hint_of(declared: &str) -> Hint {
    let t = declared.to_ascii_uppercase();
    if t.contains("BOOL") {
        Hint::Bool
    } else if t.contains("DEC") || t.contains("NUMERIC") {
        Hint::Decimal
    } else if t.contains("JSON") {
        Hint::Json
    } else if t.contains("DATETIME") || t.contains("TIMESTAMP") {
        Hint::Timestamp
    } else if t.contains("DATE") {
        Hint::Date
    } else {
        Hint::None
    }
}

pub(crate) async fn connect(url: &str, pool: SqlitePoolOptions) -> Result<SqlitePool, SourceError> {
    let rest = url
        .get("sqlite:".len()..)
        .map(|r| r.strip_prefix("//").unwrap_or(r))
        .unwrap_or_default();
    let path = rest.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" {
        return Err(SourceError::config(format!(
            "SQLite URL {url} names no file: use sqlite://path/to/file.db or sqlite:file.db"
        )));
    }
    if !Path::new(path).is_file() {
        return Err(SourceError::not_found(format!(
            "SQLite file {path} does not exist"
        )));
    }
    let opts = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .create_if_missing(false);
    pool.connect_with(opts)
        .await
        .map_err(|e| SourceError::connect(url, e))
}

pub(crate) async fn describe(pool: &SqlitePool, from: &Relation<'_>) -> Result<Shape, SourceError> {
    let context = format!("describe {}", from.display_name());
    match from {
        Relation::Table(name) => {
            let (schema, table) = sql::split_table(name);
            let query = match schema {
                Some(schema) => sqlx::query_as::<_, (String, String, i64, i64)>(
                    "SELECT name, type, pk, hidden FROM pragma_table_xinfo(?1, ?2) ORDER BY cid",
                )
                .bind(table)
                .bind(schema),
                None => sqlx::query_as(
                    "SELECT name, type, pk, hidden FROM pragma_table_xinfo(?1) ORDER BY cid",
                )
                .bind(table),
            };
            let rows = query
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            // hidden = 1: hidden columns of virtual tables, not part of `SELECT *`.
            let rows: Vec<_> = rows.into_iter().filter(|r| r.3 != 1).collect();
            if rows.is_empty() {
                return Err(SourceError::not_found(format!(
                    "table {name} does not exist"
                )));
            }
            let mut pk: Vec<(i64, String)> = rows
                .iter()
                .filter(|r| r.2 > 0)
                .map(|r| (r.2, r.0.clone()))
                .collect();
            pk.sort();
            Ok(Shape {
                columns: rows
                    .into_iter()
                    .map(|(name, sql_type, _, _)| Column { name, sql_type })
                    .collect(),
                primary_key: pk.into_iter().map(|(_, name)| name).collect(),
            })
        }
        Relation::Query(query) => {
            let stmt = prepare_query(pool, Dialect::Sqlite, from, query).await?;
            Ok(Shape {
                columns: statement_columns(&stmt),
                primary_key: Vec::new(),
            })
        }
    }
}

pub(crate) fn plan(
    columns: &[Column],
    key_indices: &[usize],
) -> Result<ColumnPlan<Hint>, SourceError> {
    Ok(ColumnPlan {
        select: columns
            .iter()
            .map(|c| column_ref(Dialect::Sqlite, &c.name))
            .collect(),
        params: key_indices
            .iter()
            .map(|_| (String::new(), String::new()))
            .collect(),
        decoders: columns.iter().map(|c| hint_of(&c.sql_type)).collect(),
    })
}

impl Driver for Sqlite {
    type Decoder = Hint;

    fn bind<'q>(query: BoundQuery<'q, Self>, value: &SqlValue) -> Option<BoundQuery<'q, Self>> {
        bind_plain(query, value).ok()
    }

    fn decode(row: &SqliteRow, i: usize, hint: Hint) -> Result<SqlValue, BoxError> {
        Ok(decode_column(row, i, hint)?)
    }
}

fn decode_column(row: &SqliteRow, i: usize, hint: Hint) -> Result<SqlValue, sqlx::Error> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(SqlValue::Null);
    }
    // The value's own storage class, not the column's declared type.
    let class = raw.type_info().name().to_string();
    Ok(match class.as_str() {
        "INTEGER" => {
            let n: i64 = row.try_get_unchecked(i)?;
            match (hint, n) {
                (Hint::Bool, 0 | 1) => SqlValue::Bool(n == 1),
                _ => SqlValue::Int(n),
            }
        }
        "REAL" => SqlValue::Float(row.try_get_unchecked(i)?),
        "BLOB" => SqlValue::Bytes(row.try_get_unchecked(i)?),
        _ => text_value(hint, row.try_get_unchecked(i)?),
    })
}

/// A value of storage class TEXT, read by its column's hint.
pub(crate) fn text_value(hint: Hint, s: String) -> SqlValue {
    match hint {
        Hint::Decimal => SqlValue::Decimal(s),
        Hint::Json => match serde_json::from_str(&s) {
            Ok(json) => SqlValue::Json(json),
            Err(e) => SqlValue::Invalid(format!("invalid JSON: {e}")),
        },
        Hint::Date => match chrono::NaiveDate::parse_from_str(&s, "%Y-%m-%d") {
            Ok(d) => SqlValue::Date(d),
            Err(_) => SqlValue::Text(s),
        },
        Hint::Timestamp => parse_timestamp(s),
        Hint::None | Hint::Bool => SqlValue::Text(s),
    }
}

/// ISO text as SQLite's date functions write it (`2024-01-02 03:04:05`, a
/// `T` separator, a fraction, an offset or `Z` all accepted); anything else
/// stays text rather than being guessed at.
fn parse_timestamp(s: String) -> SqlValue {
    if let Ok(ts) = chrono::DateTime::parse_from_rfc3339(&s.replacen(' ', "T", 1)) {
        return SqlValue::TimestampTz(ts.with_timezone(&chrono::Utc));
    }
    for format in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(ts) = chrono::NaiveDateTime::parse_from_str(&s, format) {
            return SqlValue::Timestamp(ts);
        }
    }
    SqlValue::Text(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_from_declared_types() {
        assert_eq!(hint_of("boolean"), Hint::Bool);
        assert_eq!(hint_of("DECIMAL(10,2)"), Hint::Decimal);
        assert_eq!(hint_of("numeric"), Hint::Decimal);
        assert_eq!(hint_of("json"), Hint::Json);
        assert_eq!(hint_of("TEXT"), Hint::None);
        assert_eq!(hint_of("DATETIME"), Hint::Timestamp);
        assert_eq!(hint_of("timestamp"), Hint::Timestamp);
        assert_eq!(hint_of("DATE"), Hint::Date);
    }

    #[test]
    fn iso_text_in_timestamp_columns() {
        use chrono::{NaiveDate, TimeZone, Utc};
        let at = NaiveDate::from_ymd_opt(2024, 1, 2)
            .unwrap()
            .and_hms_milli_opt(3, 4, 5, 600)
            .unwrap();
        assert_eq!(
            parse_timestamp("2024-01-02 03:04:05.6".into()),
            SqlValue::Timestamp(at)
        );
        assert_eq!(
            parse_timestamp("2024-01-02T03:04:05.600".into()),
            SqlValue::Timestamp(at)
        );
        assert_eq!(
            parse_timestamp("2024-01-02T05:04:05+02:00".into()),
            SqlValue::TimestampTz(Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap())
        );
        assert_eq!(
            parse_timestamp("yesterday".into()),
            SqlValue::Text("yesterday".into())
        );
    }
}
