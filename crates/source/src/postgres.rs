//! PostgreSQL: introspection through the catalog, decoding by the column's type.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc};
use serde_json::Value as Json;
use sql2ddb_core::{Column, Row, SqlValue};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow, PgValueFormat, Postgres};
use sqlx::{
    AssertSqlSafe, Column as _, Connection, Executor, Row as _, SqlSafeStr, Statement, ValueRef,
};

use crate::sql::{self, column_ref};
use crate::{Decoders, Dialect, DialectPlan, From, Shape, SourceError};

/// How one column is selected and decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int2,
    Int4,
    Int8,
    /// Selected as `::text`.
    Numeric,
    Float4,
    Float8,
    /// Any text type, read raw so `char(n)` keeps its padding.
    Text,
    Bool,
    Bytea,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Uuid,
    /// json / jsonb, selected as `::text` and parsed (exact numbers).
    Json,
    /// An array, selected as `to_jsonb(…)::text`.
    Array(Elem),
    /// Anything else (enums, domains, interval, …), selected as `::text`.
    Other,
}

/// Element type of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    Int,
    Numeric,
    Float,
    Text,
    Bool,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Bytea,
    Json,
    Other,
}

/// Classifies a `format_type` name (`integer`, `numeric(10,2)`, `text[]`, …).
pub(crate) fn kind_of(sql_type: &str) -> Kind {
    if let Some(elem) = sql_type.strip_suffix("[]") {
        let elem = match kind_of(elem) {
            Kind::Int2 | Kind::Int4 | Kind::Int8 => Elem::Int,
            Kind::Numeric => Elem::Numeric,
            Kind::Float4 | Kind::Float8 => Elem::Float,
            Kind::Text | Kind::Uuid => Elem::Text,
            Kind::Bool => Elem::Bool,
            Kind::Date => Elem::Date,
            Kind::Time => Elem::Time,
            Kind::Timestamp => Elem::Timestamp,
            Kind::TimestampTz => Elem::TimestampTz,
            Kind::Bytea => Elem::Bytea,
            Kind::Json => Elem::Json,
            Kind::Array(_) | Kind::Other => Elem::Other,
        };
        return Kind::Array(elem);
    }
    // Strip a type modifier: `numeric(10,2)`, `time(3) without time zone`.
    let base: String = match (sql_type.find('('), sql_type.find(')')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{}", &sql_type[..open], &sql_type[close + 1..])
        }
        _ => sql_type.to_string(),
    };
    match base.as_str() {
        "smallint" => Kind::Int2,
        "integer" => Kind::Int4,
        "bigint" => Kind::Int8,
        "numeric" => Kind::Numeric,
        "real" => Kind::Float4,
        "double precision" => Kind::Float8,
        "text" | "character varying" | "character" | "bpchar" | "name" => Kind::Text,
        s if s == "citext" || s.ends_with(".citext") => Kind::Text,
        "boolean" => Kind::Bool,
        "bytea" => Kind::Bytea,
        "date" => Kind::Date,
        "time without time zone" => Kind::Time,
        "timestamp without time zone" => Kind::Timestamp,
        "timestamp with time zone" => Kind::TimestampTz,
        "uuid" => Kind::Uuid,
        "json" | "jsonb" => Kind::Json,
        _ => Kind::Other,
    }
}

pub(crate) async fn connect(url: &str, max: u32) -> Result<PgPool, SourceError> {
    let opts: PgConnectOptions = url
        .parse()
        .map_err(|e| SourceError::config(format!("invalid PostgreSQL URL {url}: {e}")))?;
    // One direct connection first: the pool retries a refused connection until
    // its acquire timeout, a direct attempt fails at once with the real reason.
    let conn = sqlx::PgConnection::connect_with(&opts)
        .await
        .map_err(|e| SourceError::connect(url, e))?;
    let _ = conn.close().await;
    PgPoolOptions::new()
        .max_connections(max)
        .connect_with(opts)
        .await
        .map_err(|e| SourceError::connect(url, e))
}

const TABLE_COLUMNS: &str = "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
     FROM pg_attribute a \
     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
     ORDER BY a.attnum";

const PRIMARY_KEY: &str = "SELECT a.attname::text \
     FROM pg_index i \
     CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
     WHERE i.indrelid = to_regclass($1) AND i.indisprimary \
     ORDER BY k.ord";

// Without a type modifier, format_type names bpchar `character`, which as a
// cast means char(1): use the unbounded internal name instead.
const TYPE_NAMES: &str =
    "SELECT CASE WHEN u.o = 1042 THEN 'bpchar' ELSE format_type(u.o::oid, NULL) END \
     FROM unnest($1::int8[]) WITH ORDINALITY AS u(o, n) ORDER BY u.n";

pub(crate) async fn describe(pool: &PgPool, from: &From<'_>) -> Result<Shape, SourceError> {
    let context = format!("describe {}", from.display_name());
    match from {
        From::Table(name) => {
            let qualified = sql::quote_table(Dialect::Postgres, name);
            let rows: Vec<(String, String)> = sqlx::query_as(TABLE_COLUMNS)
                .bind(&qualified)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            if rows.is_empty() {
                return Err(SourceError::not_found(format!(
                    "table {name} does not exist (or is not visible to this user)"
                )));
            }
            let primary_key: Vec<String> = sqlx::query_scalar(PRIMARY_KEY)
                .bind(&qualified)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            Ok(Shape {
                columns: rows
                    .into_iter()
                    .map(|(name, sql_type)| Column { name, sql_type })
                    .collect(),
                primary_key,
            })
        }
        From::Query(query) => {
            let statement = sql::describe_sql(Dialect::Postgres, from)?;
            let stmt = pool
                .prepare(AssertSqlSafe(statement.clone()).into_sql_str())
                .await
                .map_err(|e| SourceError::query_in(&context, e, &statement, query))?;
            let oids: Vec<i64> = stmt
                .columns()
                .iter()
                .map(|c| c.type_info().oid().map_or(0, |o| i64::from(o.0)))
                .collect();
            let names: Vec<String> = sqlx::query_scalar(TYPE_NAMES)
                .bind(&oids)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            Ok(Shape {
                columns: stmt
                    .columns()
                    .iter()
                    .zip(names)
                    .map(|(c, sql_type)| Column {
                        name: c.name().to_string(),
                        sql_type,
                    })
                    .collect(),
                primary_key: Vec::new(),
            })
        }
    }
}

pub(crate) fn plan(columns: &[Column], key_indices: &[usize]) -> Result<DialectPlan, SourceError> {
    let kinds: Vec<Kind> = columns.iter().map(|c| kind_of(&c.sql_type)).collect();
    let select = columns
        .iter()
        .zip(&kinds)
        .map(|(c, kind)| {
            let col = column_ref(Dialect::Postgres, &c.name);
            match kind {
                Kind::Numeric | Kind::Json | Kind::Other => format!("{col}::text"),
                Kind::Array(_) => format!("to_jsonb({col})::text"),
                _ => col,
            }
        })
        .collect();
    let mut params = Vec::with_capacity(key_indices.len());
    for &i in key_indices {
        if matches!(kinds[i], Kind::Array(_) | Kind::Json) {
            return Err(SourceError::config(format!(
                "key column {} is of type {}, which cannot order pages; choose another key",
                columns[i].name, columns[i].sql_type
            )));
        }
        // Cast every cursor value to the key column's own type, so a text-bound
        // numeric, uuid or enum compares as that type.
        params.push(("CAST(".to_string(), format!(" AS {})", columns[i].sql_type)));
    }
    Ok(DialectPlan {
        select,
        params,
        decoders: Decoders::Postgres(kinds),
    })
}

/// Runs one statement with `values` bound in order; decodes each row by `kinds`.
pub(crate) async fn fetch(
    pool: &PgPool,
    entity: &str,
    columns: &[Column],
    kinds: &[Kind],
    sql: &str,
    values: &[&SqlValue],
) -> Result<Vec<Row>, SourceError> {
    let mut query = sqlx::query::<Postgres>(AssertSqlSafe(sql));
    for &v in values {
        query = match v {
            SqlValue::Int(i) => query.bind(*i),
            SqlValue::UInt(u) => query.bind(u.to_string()),
            SqlValue::Bool(b) => query.bind(*b),
            SqlValue::Float(f) => query.bind(*f),
            SqlValue::Decimal(s) | SqlValue::Text(s) => query.bind(s.clone()),
            SqlValue::Bytes(b) => query.bind(b.clone()),
            SqlValue::Date(d) => query.bind(*d),
            SqlValue::Time(t) => query.bind(*t),
            SqlValue::Timestamp(ts) => query.bind(*ts),
            SqlValue::TimestampTz(ts) => query.bind(*ts),
            other => return Err(crate::cursor_error(entity, other)),
        };
    }
    let rows = query
        .fetch_all(pool)
        .await
        .map_err(|e| SourceError::query(format!("read {entity}"), e))?;
    rows.iter()
        .map(|row| {
            kinds
                .iter()
                .enumerate()
                .map(|(i, kind)| {
                    decode(row, i, *kind).map_err(|e| SourceError::decode(&columns[i].name, e))
                })
                .collect()
        })
        .collect()
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn decode(row: &PgRow, i: usize, kind: Kind) -> Result<SqlValue, BoxError> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(SqlValue::Null);
    }
    let binary = raw.format() == PgValueFormat::Binary;
    let bytes = raw.as_bytes()?;
    Ok(match kind {
        Kind::Int2 => SqlValue::Int(row.try_get_unchecked::<i16, _>(i)?.into()),
        Kind::Int4 => SqlValue::Int(row.try_get_unchecked::<i32, _>(i)?.into()),
        Kind::Int8 => SqlValue::Int(row.try_get_unchecked::<i64, _>(i)?),
        Kind::Numeric => SqlValue::Decimal(row.try_get_unchecked::<String, _>(i)?),
        Kind::Float4 => SqlValue::Float(crate::widen_f32(row.try_get_unchecked::<f32, _>(i)?)),
        Kind::Float8 => SqlValue::Float(row.try_get_unchecked::<f64, _>(i)?),
        Kind::Text | Kind::Other => SqlValue::Text(row.try_get_unchecked::<String, _>(i)?),
        Kind::Bool => SqlValue::Bool(row.try_get_unchecked::<bool, _>(i)?),
        Kind::Bytea => SqlValue::Bytes(row.try_get_unchecked::<Vec<u8>, _>(i)?),
        Kind::Uuid => SqlValue::Text(
            row.try_get_unchecked::<uuid::Uuid, _>(i)?
                .hyphenated()
                .to_string(),
        ),
        // Dates and times are read from their binary form: sqlx's own decoding
        // panics on `infinity` and wraps `24:00:00`.
        Kind::Date if binary => date_from_days(i32::from_be_bytes(bytes.try_into()?)),
        Kind::Time if binary => time_from_micros(i64::from_be_bytes(bytes.try_into()?)),
        Kind::Timestamp if binary => {
            match timestamp_from_micros(i64::from_be_bytes(bytes.try_into()?)) {
                Ok(ts) => SqlValue::Timestamp(ts),
                Err(invalid) => invalid,
            }
        }
        Kind::TimestampTz if binary => {
            match timestamp_from_micros(i64::from_be_bytes(bytes.try_into()?)) {
                Ok(ts) => SqlValue::TimestampTz(ts.and_utc()),
                Err(invalid) => invalid,
            }
        }
        Kind::Date | Kind::Time | Kind::Timestamp | Kind::TimestampTz => {
            return Err("expected a binary value".into())
        }
        Kind::Json => SqlValue::Json(serde_json::from_str(
            &row.try_get_unchecked::<String, _>(i)?,
        )?),
        Kind::Array(elem) => {
            let json: Json = serde_json::from_str(&row.try_get_unchecked::<String, _>(i)?)?;
            array_value(json, elem, true)
        }
    })
}

fn epoch() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .expect("2000-01-01 is a valid date")
}

fn date_from_days(days: i32) -> SqlValue {
    if days == i32::MAX || days == i32::MIN {
        return SqlValue::Invalid("infinity date".into());
    }
    match epoch()
        .date()
        .checked_add_signed(TimeDelta::days(days.into()))
    {
        Some(d) => SqlValue::Date(d),
        None => SqlValue::Invalid(format!("date {days} days from 2000-01-01 is out of range")),
    }
}

fn time_from_micros(us: i64) -> SqlValue {
    let secs = us.div_euclid(1_000_000);
    let nanos = (us.rem_euclid(1_000_000) * 1000) as u32;
    match u32::try_from(secs)
        .ok()
        .and_then(|s| NaiveTime::from_num_seconds_from_midnight_opt(s, nanos))
    {
        Some(t) if secs < 86_400 => SqlValue::Time(t),
        _ => SqlValue::Invalid(format!("time of {us} µs is not a time of day (24:00:00?)")),
    }
}

fn timestamp_from_micros(us: i64) -> Result<NaiveDateTime, SqlValue> {
    if us == i64::MAX || us == i64::MIN {
        return Err(SqlValue::Invalid("infinity timestamp".into()));
    }
    epoch()
        .checked_add_signed(TimeDelta::microseconds(us))
        .ok_or_else(|| {
            SqlValue::Invalid(format!("timestamp {us} µs from 2000-01-01 is out of range"))
        })
}

/// An array read through `to_jsonb`: nested JSON arrays are dimensions.
fn array_value(json: Json, elem: Elem, top: bool) -> SqlValue {
    match json {
        Json::Null => SqlValue::Null,
        // json elements are themselves JSON: only the outer array is a dimension.
        Json::Array(items) if top || elem != Elem::Json => SqlValue::Array(
            items
                .into_iter()
                .map(|v| array_value(v, elem, false))
                .collect(),
        ),
        scalar => element(scalar, elem),
    }
}

fn element(v: Json, elem: Elem) -> SqlValue {
    let invalid =
        |v: &Json| SqlValue::Invalid(format!("unexpected array element {v} for its type"));
    match (elem, v) {
        (Elem::Json, v) => SqlValue::Json(v),
        (Elem::Int, Json::Number(n)) => n
            .as_i64()
            .map_or_else(|| invalid(&Json::Number(n)), SqlValue::Int),
        (Elem::Numeric, Json::Number(n)) => SqlValue::Decimal(n.to_string()),
        (Elem::Numeric, Json::String(s)) => SqlValue::Decimal(s),
        (Elem::Float, Json::Number(n)) => n.to_string().parse().map_or_else(
            |_| SqlValue::Invalid(format!("bad float {n}")),
            SqlValue::Float,
        ),
        (Elem::Float, Json::String(s)) => s.parse().map_or_else(
            |_| SqlValue::Invalid(format!("bad float {s}")),
            SqlValue::Float,
        ),
        (Elem::Bool, Json::Bool(b)) => SqlValue::Bool(b),
        (Elem::Text | Elem::Other, Json::String(s)) => SqlValue::Text(s),
        (Elem::Other, v) => SqlValue::Json(v),
        (Elem::Date, Json::String(s)) if s.ends_with("infinity") => {
            SqlValue::Invalid("infinity date".into())
        }
        (Elem::Date, Json::String(s)) => NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_or_else(
            |e| SqlValue::Invalid(format!("date {s}: {e}")),
            SqlValue::Date,
        ),
        (Elem::Time, Json::String(s)) => NaiveTime::parse_from_str(&s, "%H:%M:%S%.f").map_or_else(
            |e| SqlValue::Invalid(format!("time {s}: {e}")),
            SqlValue::Time,
        ),
        (Elem::Timestamp | Elem::TimestampTz, Json::String(s)) if s.ends_with("infinity") => {
            SqlValue::Invalid("infinity timestamp".into())
        }
        (Elem::Timestamp, Json::String(s)) => {
            NaiveDateTime::parse_from_str(&s, "%Y-%m-%dT%H:%M:%S%.f").map_or_else(
                |e| SqlValue::Invalid(format!("timestamp {s}: {e}")),
                SqlValue::Timestamp,
            )
        }
        (Elem::TimestampTz, Json::String(s)) => DateTime::parse_from_rfc3339(&s).map_or_else(
            |e| SqlValue::Invalid(format!("timestamptz {s}: {e}")),
            |ts| SqlValue::TimestampTz(ts.with_timezone(&Utc)),
        ),
        (Elem::Bytea, Json::String(s)) => match s.strip_prefix("\\x").and_then(hex) {
            Some(b) => SqlValue::Bytes(b),
            None => SqlValue::Invalid(format!("bytea {s} is not hex")),
        },
        (_, v) => invalid(&v),
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_format_type_names() {
        assert_eq!(kind_of("numeric(60,20)"), Kind::Numeric);
        assert_eq!(kind_of("character(5)"), Kind::Text);
        assert_eq!(kind_of("timestamp(3) with time zone"), Kind::TimestampTz);
        assert_eq!(kind_of("integer[]"), Kind::Array(Elem::Int));
        assert_eq!(kind_of("character varying(10)[]"), Kind::Array(Elem::Text));
        assert_eq!(kind_of("mood"), Kind::Other);
        assert_eq!(kind_of("\"Mood\"[]"), Kind::Array(Elem::Other));
    }

    #[test]
    fn infinities_and_hex() {
        assert_eq!(
            date_from_days(i32::MAX),
            SqlValue::Invalid("infinity date".into())
        );
        assert!(matches!(
            time_from_micros(86_400_000_000),
            SqlValue::Invalid(_)
        ));
        assert_eq!(hex("0aff"), Some(vec![10, 255]));
    }
}
