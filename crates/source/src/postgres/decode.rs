//! PostgreSQL decoding: each column by its [`Kind`]; dates and times from
//! their binary form, arrays through `to_jsonb`.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc};
use serde_json::Value as Json;
use sql2ddb_core::SqlValue;
use sqlx::postgres::{PgRow, PgValueFormat, Postgres};
use sqlx::{Row as _, ValueRef};

use super::{Elem, Kind};
use crate::fetch::{bind_plain, BoundQuery, BoxError, Driver};

impl Driver for Postgres {
    type Decoder = Kind;

    fn bind<'q>(query: BoundQuery<'q, Self>, value: &SqlValue) -> Option<BoundQuery<'q, Self>> {
        let query = match bind_plain(query, value) {
            Ok(bound) => return Some(bound),
            Err(query) => query,
        };
        Some(match value {
            SqlValue::UInt(u) => query.bind(u.to_string()),
            SqlValue::Date(d) => query.bind(*d),
            SqlValue::Time(t) => query.bind(*t),
            SqlValue::Timestamp(ts) => query.bind(*ts),
            SqlValue::TimestampTz(ts) => query.bind(*ts),
            _ => return None,
        })
    }

    fn decode(row: &PgRow, i: usize, kind: Kind) -> Result<SqlValue, BoxError> {
        decode_column(row, i, kind)
    }
}

fn decode_column(row: &PgRow, i: usize, kind: Kind) -> Result<SqlValue, BoxError> {
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
