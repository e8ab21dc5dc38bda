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
    if binary {
        if let Some(value) = decode_binary(bytes, kind)? {
            return Ok(value);
        }
    }
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

/// The common kinds decoded straight from the value's bytes in binary
/// format, as sqlx's own `Decode` reads them (integers of one to eight
/// bytes, sign-extended; a bool's first byte; text as UTF-8), without
/// looking the column up again; `None` for the kinds left to the match in
/// [`decode_column`].
fn decode_binary(bytes: &[u8], kind: Kind) -> Result<Option<SqlValue>, BoxError> {
    Ok(Some(match kind {
        Kind::Int2 => SqlValue::Int(i16::try_from(int_be(bytes)?)?.into()),
        Kind::Int4 => SqlValue::Int(i32::try_from(int_be(bytes)?)?.into()),
        Kind::Int8 => SqlValue::Int(int_be(bytes)?),
        Kind::Float4 => SqlValue::Float(crate::widen_f32(f32::from_be_bytes(bytes.try_into()?))),
        Kind::Float8 => SqlValue::Float(f64::from_be_bytes(bytes.try_into()?)),
        Kind::Bool => SqlValue::Bool(*bytes.first().ok_or("empty boolean value")? != 0),
        // Selected as `::text` or read raw: the bytes are the text.
        Kind::Numeric => SqlValue::Decimal(std::str::from_utf8(bytes)?.to_owned()),
        Kind::Text | Kind::Other => SqlValue::Text(std::str::from_utf8(bytes)?.to_owned()),
        Kind::Bytea => SqlValue::Bytes(bytes.to_vec()),
        _ => return Ok(None),
    }))
}

/// A replicated value's text (the column type's output function, as the
/// slot sends it) decoded in the process, to the value a page read gives
/// for the same stored value; `None` for the kinds whose text depends on a
/// setting of the session or whose page read is not their text (floats,
/// dates and times, bytea, arrays): those are cast by the server.
///
/// Each kind here is read by the page either as the same output
/// function's text (`numeric`, `json`, anything else selected `::text`,
/// text types read raw) or in a binary form whose text is canonical
/// (integers, `boolean` as `t`/`f`, `uuid` in lowercase with hyphens).
pub(crate) fn decode_text(text: &str, kind: Kind) -> Option<SqlValue> {
    Some(match kind {
        Kind::Int2 => SqlValue::Int(text.parse::<i16>().ok()?.into()),
        Kind::Int4 => SqlValue::Int(text.parse::<i32>().ok()?.into()),
        Kind::Int8 => SqlValue::Int(text.parse::<i64>().ok()?),
        Kind::Numeric => SqlValue::Decimal(text.to_owned()),
        Kind::Text | Kind::Other => SqlValue::Text(text.to_owned()),
        Kind::Bool => match text {
            "t" => SqlValue::Bool(true),
            "f" => SqlValue::Bool(false),
            _ => return None,
        },
        Kind::Uuid => SqlValue::Text(uuid::Uuid::parse_str(text).ok()?.hyphenated().to_string()),
        Kind::Json => SqlValue::Json(serde_json::from_str(text).ok()?),
        Kind::Float4
        | Kind::Float8
        | Kind::Bytea
        | Kind::Date
        | Kind::Time
        | Kind::Timestamp
        | Kind::TimestampTz
        | Kind::Array(_) => return None,
    })
}

/// A big-endian integer of one to eight bytes, sign-extended (sqlx's
/// `int_decode` for the binary format).
fn int_be(bytes: &[u8]) -> Result<i64, BoxError> {
    match bytes.len() {
        0 => Err("empty integer value".into()),
        n @ 9.. => Err(format!("integer value of {n} bytes, at most 8 expected").into()),
        n => {
            let mut word = if bytes[0] & 0x80 != 0 {
                [0xff; 8]
            } else {
                [0; 8]
            };
            word[8 - n..].copy_from_slice(bytes);
            Ok(i64::from_be_bytes(word))
        }
    }
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

    #[test]
    fn replicated_texts_decode_in_the_process_only_where_the_text_is_the_value() {
        assert_eq!(
            decode_text("-32768", Kind::Int2),
            Some(SqlValue::Int(-32768))
        );
        assert_eq!(decode_text("32768", Kind::Int2), None);
        assert_eq!(
            decode_text("9223372036854775807", Kind::Int8),
            Some(SqlValue::Int(i64::MAX))
        );
        assert_eq!(
            decode_text("-0.50", Kind::Numeric),
            Some(SqlValue::Decimal("-0.50".into()))
        );
        assert_eq!(decode_text("t", Kind::Bool), Some(SqlValue::Bool(true)));
        assert_eq!(decode_text("true", Kind::Bool), None);
        assert_eq!(
            decode_text("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", Kind::Uuid),
            Some(SqlValue::Text(
                "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()
            ))
        );
        assert_eq!(
            decode_text("ab  ", Kind::Text),
            Some(SqlValue::Text("ab  ".into()))
        );
        assert!(matches!(
            decode_text(r#"{"n": 1.50}"#, Kind::Json),
            Some(SqlValue::Json(_))
        ));
        // The server's cast decides these: their text depends on a setting,
        // or their page read is not their text.
        for kind in [
            Kind::Float4,
            Kind::Float8,
            Kind::Date,
            Kind::Time,
            Kind::Timestamp,
            Kind::TimestampTz,
            Kind::Bytea,
            Kind::Array(Elem::Int),
        ] {
            assert_eq!(decode_text("1", kind), None, "{kind:?}");
        }
    }

    #[test]
    fn integers_of_one_to_eight_bytes_are_read_sign_extended() {
        for value in [
            0i64,
            1,
            -1,
            127,
            -128,
            255,
            32_767,
            -32_768,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let all = value.to_be_bytes();
            for n in 1..=8 {
                let fits = (value as i128) >= -(1i128 << (8 * n - 1))
                    && (value as i128) < (1i128 << (8 * n - 1));
                if fits {
                    assert_eq!(
                        int_be(&all[8 - n..]).unwrap(),
                        value,
                        "{value} in {n} bytes"
                    );
                }
            }
        }
        assert!(int_be(&[]).is_err());
        assert!(int_be(&[0; 9]).is_err());
    }

    #[test]
    fn binary_values_decode_by_kind_and_refuse_a_wrong_width() {
        let int4 = decode_binary(&(-7i32).to_be_bytes(), Kind::Int4).unwrap();
        assert_eq!(int4, Some(SqlValue::Int(-7)));
        let too_wide = decode_binary(&(70_000i32).to_be_bytes(), Kind::Int2);
        assert!(too_wide.is_err(), "70000 is not a smallint");
        let float8 = decode_binary(&2.5f64.to_be_bytes(), Kind::Float8).unwrap();
        assert_eq!(float8, Some(SqlValue::Float(2.5)));
        let float4 = decode_binary(&0.1f32.to_be_bytes(), Kind::Float4).unwrap();
        assert_eq!(
            float4,
            Some(SqlValue::Float(0.1)),
            "widened by its shortest text"
        );
        assert!(decode_binary(&[0, 0, 0], Kind::Float4).is_err());
        assert_eq!(
            decode_binary(&[1], Kind::Bool).unwrap(),
            Some(SqlValue::Bool(true))
        );
        assert!(decode_binary(&[], Kind::Bool).is_err());
        assert_eq!(
            decode_binary("12.50".as_bytes(), Kind::Numeric).unwrap(),
            Some(SqlValue::Decimal("12.50".into()))
        );
        assert_eq!(
            decode_binary("é ".as_bytes(), Kind::Text).unwrap(),
            Some(SqlValue::Text("é ".into()))
        );
        assert!(decode_binary(&[0xff], Kind::Text).is_err(), "not UTF-8");
        assert_eq!(
            decode_binary(&[0, 255], Kind::Bytea).unwrap(),
            Some(SqlValue::Bytes(vec![0, 255]))
        );
        assert_eq!(decode_binary(&[0; 8], Kind::Timestamp).unwrap(), None);
    }
}
