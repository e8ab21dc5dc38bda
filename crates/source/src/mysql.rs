//! MySQL and MariaDB: introspection through `information_schema`; most values
//! are selected as text (`CAST(… AS CHAR)`) and parsed by the column's type,
//! which keeps zero dates, out-of-range `TIME` values and `BIGINT UNSIGNED`
//! intact instead of failing inside the driver.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use sql2ddb_core::{Column, SqlValue};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{Connection, MySql, Row as _, ValueRef};

use crate::column_plan::ColumnPlan;
use crate::fetch::{bind_plain, prepare_query, statement_columns, BoundQuery, BoxError, Driver};
use crate::sql::{self, column_ref};
use crate::{Dialect, Relation, Shape, SourceError};

/// How one column is selected and decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `TINYINT(1)` / `BOOLEAN`.
    Bool,
    /// Integers of any width, `YEAR`.
    Int,
    /// `BIT(n)`, selected as an unsigned integer.
    Bit,
    Decimal,
    Float,
    Double,
    /// Character types and `ENUM`.
    Text,
    Set,
    Json,
    Bytes,
    Date,
    /// `DATETIME`: a wall-clock time with no zone.
    DateTime,
    /// `TIMESTAMP`: an instant, read in the session's zone (UTC).
    Timestamp,
    Time,
    /// Anything else, as text.
    Other,
}

/// Classifies a `COLUMN_TYPE` (`int(11) unsigned`, `decimal(65,30)`) or a
/// driver type name (`BIGINT UNSIGNED`, `VARBINARY`).
pub(crate) fn kind_of(sql_type: &str) -> Kind {
    let t = sql_type.trim().to_ascii_lowercase();
    if t.starts_with("tinyint(1)") || t == "boolean" || t == "bool" {
        return Kind::Bool;
    }
    let base = t
        .split(|c: char| c == '(' || c.is_whitespace())
        .next()
        .unwrap_or_default();
    match base {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "year" => Kind::Int,
        "bit" => Kind::Bit,
        "decimal" | "numeric" | "dec" | "fixed" => Kind::Decimal,
        "float" => Kind::Float,
        "double" | "real" => Kind::Double,
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "enum" => Kind::Text,
        "set" => Kind::Set,
        "json" => Kind::Json,
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" | "geometry"
        | "point" | "linestring" | "polygon" | "multipoint" | "multilinestring"
        | "multipolygon" | "geometrycollection" => Kind::Bytes,
        "date" => Kind::Date,
        "datetime" => Kind::DateTime,
        "timestamp" => Kind::Timestamp,
        "time" => Kind::Time,
        _ => Kind::Other,
    }
}

pub(crate) async fn connect(url: &str, pool: MySqlPoolOptions) -> Result<MySqlPool, SourceError> {
    let normalized = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("mariadb") => format!("mysql://{rest}"),
        _ => url.to_string(),
    };
    let opts: MySqlConnectOptions = normalized
        .parse()
        .map_err(|e| SourceError::config(format!("invalid MySQL URL {url}: {e}")))?;
    // utf8mb4 and UTC are sqlx's defaults; set them anyway, the decoding relies on them.
    let opts = opts.charset("utf8mb4").timezone(Some("+00:00".to_string()));
    let conn = sqlx::MySqlConnection::connect_with(&opts)
        .await
        .map_err(|e| SourceError::connect(url, e))?;
    let _ = conn.close().await;
    pool.connect_with(opts)
        .await
        .map_err(|e| SourceError::connect(url, e))
}

const TABLE_COLUMNS: &str =
    "SELECT CONVERT(COLUMN_NAME USING utf8mb4), CONVERT(COLUMN_TYPE USING utf8mb4) \
     FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION";

const PRIMARY_KEY: &str =
    "SELECT CONVERT(COLUMN_NAME USING utf8mb4) FROM information_schema.STATISTICS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' \
     ORDER BY SEQ_IN_INDEX";

// MariaDB's JSON is LONGTEXT with a `json_valid(col)` check; MySQL 8 has no
// TABLE_NAME here (and a real JSON type), so a failure is ignored.
const CHECKS: &str =
    "SELECT CONVERT(CHECK_CLAUSE USING utf8mb4) FROM information_schema.CHECK_CONSTRAINTS \
     WHERE CONSTRAINT_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?";

pub(crate) async fn describe(pool: &MySqlPool, from: &Relation<'_>) -> Result<Shape, SourceError> {
    let context = format!("describe {}", from.display_name());
    match from {
        Relation::Table(name) => {
            let (schema, table) = sql::split_table(name);
            let rows: Vec<(String, String)> = sqlx::query_as(TABLE_COLUMNS)
                .bind(schema)
                .bind(table)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            if rows.is_empty() {
                return Err(SourceError::not_found(format!(
                    "table {name} does not exist"
                )));
            }
            let primary_key: Vec<String> = sqlx::query_scalar(PRIMARY_KEY)
                .bind(schema)
                .bind(table)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            let checks: Vec<String> = sqlx::query_scalar(CHECKS)
                .bind(schema)
                .bind(table)
                .fetch_all(pool)
                .await
                .unwrap_or_default();
            let checks: Vec<String> = checks
                .iter()
                .map(|c| {
                    c.chars()
                        .filter(|c| !c.is_whitespace())
                        .collect::<String>()
                        .to_ascii_lowercase()
                })
                .collect();
            let columns = rows
                .into_iter()
                .map(|(name, sql_type)| {
                    let json_check = format!("json_valid(`{}`)", name.to_ascii_lowercase());
                    let is_json =
                        kind_of(&sql_type) == Kind::Text && checks.iter().any(|c| c == &json_check);
                    Column {
                        sql_type: if is_json {
                            "json".to_string()
                        } else {
                            sql_type
                        },
                        name,
                    }
                })
                .collect();
            Ok(Shape {
                columns,
                primary_key,
            })
        }
        Relation::Query(query) => {
            let stmt = prepare_query(pool, Dialect::MySql, from, query).await?;
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
) -> Result<ColumnPlan<Kind>, SourceError> {
    let kinds: Vec<Kind> = columns.iter().map(|c| kind_of(&c.sql_type)).collect();
    let select = columns
        .iter()
        .zip(&kinds)
        .map(|(c, kind)| {
            let col = column_ref(Dialect::MySql, &c.name);
            match kind {
                Kind::Float | Kind::Double | Kind::Bytes => col,
                Kind::Text | Kind::Set => format!("CONVERT({col} USING utf8mb4)"),
                Kind::Bit => format!("CAST(CAST({col} AS UNSIGNED) AS CHAR)"),
                _ => format!("CAST({col} AS CHAR)"),
            }
        })
        .collect();
    let mut params = Vec::with_capacity(key_indices.len());
    for &i in key_indices {
        let column = &columns[i];
        params.push(match kinds[i] {
            // A string compared with a DECIMAL compares as a double: cast it.
            Kind::Decimal => (
                "CAST(".to_string(),
                format!(" AS {})", decimal_cast(&column.sql_type)),
            ),
            // A FLOAT column compared with a bound DOUBLE never equals its own value.
            Kind::Float | Kind::Json => {
                return Err(SourceError::config(format!(
                    "key column {} is of type {}, which cannot order pages; choose another key",
                    column.name, column.sql_type
                )))
            }
            _ => (String::new(), String::new()),
        });
    }
    Ok(ColumnPlan {
        select,
        params,
        decoders: kinds,
    })
}

/// `DECIMAL(p,s)` of a column type, or the widest decimal when unknown.
fn decimal_cast(sql_type: &str) -> String {
    let t = sql_type.to_ascii_uppercase();
    match (t.find('('), t.find(')')) {
        (Some(open), Some(close)) if open < close => format!("DECIMAL{}", &t[open..=close]),
        _ => "DECIMAL(65,30)".to_string(),
    }
}

impl Driver for MySql {
    type Decoder = Kind;

    fn bind<'q>(query: BoundQuery<'q, Self>, value: &SqlValue) -> Option<BoundQuery<'q, Self>> {
        let query = match bind_plain(query, value) {
            Ok(bound) => return Some(bound),
            Err(query) => query,
        };
        Some(match value {
            SqlValue::UInt(u) => query.bind(*u),
            SqlValue::Date(d) => query.bind(*d),
            SqlValue::Time(t) => query.bind(*t),
            SqlValue::Timestamp(ts) => query.bind(*ts),
            // The session's zone is UTC, so a TIMESTAMP compares with the UTC wall time.
            SqlValue::TimestampTz(ts) => query.bind(ts.naive_utc()),
            SqlValue::TextSet(s) => query.bind(s.join(",")),
            _ => return None,
        })
    }

    fn decode(row: &MySqlRow, i: usize, kind: Kind) -> Result<SqlValue, BoxError> {
        Ok(decode_column(row, i, kind)?)
    }
}

fn decode_column(row: &MySqlRow, i: usize, kind: Kind) -> Result<SqlValue, sqlx::Error> {
    if row.try_get_raw(i)?.is_null() {
        return Ok(SqlValue::Null);
    }
    Ok(match kind {
        Kind::Float => SqlValue::Float(crate::widen_f32(row.try_get_unchecked(i)?)),
        Kind::Double => SqlValue::Float(row.try_get_unchecked(i)?),
        Kind::Bytes => SqlValue::Bytes(row.try_get_unchecked(i)?),
        _ => parse_text(kind, row.try_get_unchecked(i)?),
    })
}

/// A value selected as text, parsed by its column's kind.
pub(crate) fn parse_text(kind: Kind, s: String) -> SqlValue {
    const ZERO_DATE: &str = "zero date 0000-00-00 cannot be represented";
    match kind {
        Kind::Bool if s == "0" || s == "1" => SqlValue::Bool(s == "1"),
        Kind::Bool | Kind::Int | Kind::Bit => match s.parse::<i64>() {
            Ok(i) => SqlValue::Int(i),
            Err(_) => match s.parse::<u64>() {
                Ok(u) => SqlValue::UInt(u),
                Err(_) => SqlValue::Invalid(format!("{s} is not an integer")),
            },
        },
        Kind::Decimal => SqlValue::Decimal(s),
        Kind::Set if s.is_empty() => SqlValue::TextSet(Vec::new()),
        Kind::Set => SqlValue::TextSet(s.split(',').map(str::to_string).collect()),
        Kind::Json => match serde_json::from_str(&s) {
            Ok(json) => SqlValue::Json(json),
            Err(e) => SqlValue::Invalid(format!("invalid JSON: {e}")),
        },
        Kind::Date if s.starts_with("0000-00-00") => SqlValue::Invalid(ZERO_DATE.into()),
        Kind::Date => NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_or_else(
            |_| SqlValue::Invalid(format!("date {s} cannot be represented")),
            SqlValue::Date,
        ),
        Kind::DateTime | Kind::Timestamp if s.starts_with("0000-00-00") => {
            SqlValue::Invalid(ZERO_DATE.into())
        }
        Kind::DateTime | Kind::Timestamp => {
            match NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S%.f") {
                Ok(ts) if kind == Kind::Timestamp => SqlValue::TimestampTz(ts.and_utc()),
                Ok(ts) => SqlValue::Timestamp(ts),
                Err(_) => SqlValue::Invalid(format!("datetime {s} cannot be represented")),
            }
        }
        Kind::Time => NaiveTime::parse_from_str(&s, "%H:%M:%S%.f").map_or_else(
            |_| {
                SqlValue::Invalid(format!(
                    "TIME {s} is not a time of day (negative, or 24 hours or more)"
                ))
            },
            SqlValue::Time,
        ),
        Kind::Text | Kind::Other | Kind::Float | Kind::Double | Kind::Bytes => SqlValue::Text(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_column_types() {
        assert_eq!(kind_of("tinyint(1)"), Kind::Bool);
        assert_eq!(kind_of("tinyint(4)"), Kind::Int);
        assert_eq!(kind_of("bigint(20) unsigned"), Kind::Int);
        assert_eq!(kind_of("BIGINT UNSIGNED"), Kind::Int);
        assert_eq!(kind_of("decimal(65,30)"), Kind::Decimal);
        assert_eq!(kind_of("set('a','b')"), Kind::Set);
        assert_eq!(kind_of("enum('x')"), Kind::Text);
        assert_eq!(kind_of("VARBINARY"), Kind::Bytes);
        assert_eq!(kind_of("uuid"), Kind::Other);
        assert_eq!(decimal_cast("decimal(10,2) unsigned"), "DECIMAL(10,2)");
    }

    #[test]
    fn parses_text_forms() {
        assert_eq!(
            parse_text(Kind::Int, "18446744073709551615".into()),
            SqlValue::UInt(u64::MAX)
        );
        assert_eq!(parse_text(Kind::Bool, "2".into()), SqlValue::Int(2));
        assert_eq!(
            parse_text(Kind::Set, String::new()),
            SqlValue::TextSet(vec![])
        );
        assert!(matches!(
            parse_text(Kind::Time, "-01:00:00".into()),
            SqlValue::Invalid(_)
        ));
        assert!(matches!(
            parse_text(Kind::Time, "25:00:00".into()),
            SqlValue::Invalid(_)
        ));
        assert!(matches!(
            parse_text(Kind::Date, "2024-00-10".into()),
            SqlValue::Invalid(_)
        ));
    }
}
