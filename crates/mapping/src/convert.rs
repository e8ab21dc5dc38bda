//! SQL value → DynamoDB attribute value, by the rules in the crate documentation.

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value as Json;
use sql2ddb_core::value::{format_time, format_utc};
use sql2ddb_core::{normalize_number, AttrValue, SqlValue};

use crate::spec::{Nulls, NumericAs, TimeFormat};

/// Per-attribute conversion options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConvOpts {
    /// Timestamp format.
    pub format: TimeFormat,
    /// Number or string for numeric values.
    pub numeric_as: NumericAs,
    /// What a NULL becomes at the top level.
    pub nulls: Nulls,
}

/// Converts a column value. `Ok(None)`: the attribute is left out (NULL with
/// `nulls = "omit"`, or an empty set). `Err`: the reason to reject the row.
pub(crate) fn convert(v: &SqlValue, opts: &ConvOpts) -> Result<Option<AttrValue>, String> {
    Ok(Some(match v {
        SqlValue::Null => match opts.nulls {
            Nulls::Omit => return Ok(None),
            Nulls::Null => AttrValue::Null,
        },
        SqlValue::TextSet(set) => {
            if set.is_empty() {
                return Ok(None);
            }
            AttrValue::SS(dedup(set))
        }
        other => convert_value(other, opts)?,
    }))
}

/// Converts a value that is always present (list elements; NULL → NULL, an empty set → empty L).
fn convert_value(v: &SqlValue, opts: &ConvOpts) -> Result<AttrValue, String> {
    let string = matches!(opts.numeric_as, NumericAs::String);
    Ok(match v {
        SqlValue::Null => AttrValue::Null,
        SqlValue::Bool(b) => AttrValue::Bool(*b),
        SqlValue::Int(i) if string => AttrValue::S(i.to_string()),
        SqlValue::Int(i) => AttrValue::N(i.to_string()),
        SqlValue::UInt(u) if string => AttrValue::S(u.to_string()),
        SqlValue::UInt(u) => AttrValue::N(u.to_string()),
        SqlValue::Float(f) if string => AttrValue::S(f.to_string()),
        SqlValue::Float(f) => AttrValue::N(float_number(*f)?),
        SqlValue::Decimal(d) if string => AttrValue::S(d.clone()),
        SqlValue::Decimal(d) => AttrValue::N(normalize_number(d).map_err(|e| e.to_string())?),
        SqlValue::Text(s) => AttrValue::S(s.clone()),
        SqlValue::Bytes(b) => AttrValue::B(b.clone()),
        SqlValue::Date(d) => AttrValue::S(d.format("%Y-%m-%d").to_string()),
        SqlValue::Time(t) => AttrValue::S(format_time(t)),
        SqlValue::Timestamp(ts) => timestamp(&ts.and_utc(), opts.format),
        SqlValue::TimestampTz(ts) => timestamp(ts, opts.format),
        SqlValue::Json(j) => json(j)?,
        SqlValue::Array(items) => AttrValue::L(
            items
                .iter()
                .map(|e| convert_value(e, opts))
                .collect::<Result<_, _>>()?,
        ),
        SqlValue::TextSet(set) if set.is_empty() => AttrValue::L(Vec::new()),
        SqlValue::TextSet(set) => AttrValue::SS(dedup(set)),
        SqlValue::Invalid(reason) => return Err(reason.clone()),
    })
}

/// Converts a value of a column that has an explicit `format`: timestamps and
/// text holding a timestamp are formatted, anything else converts as usual.
pub(crate) fn convert_formatted(
    v: &SqlValue,
    opts: &ConvOpts,
) -> Result<Option<AttrValue>, String> {
    match v {
        SqlValue::Text(s) => {
            let ts = parse_timestamp(s).ok_or_else(|| {
                format!("text {s:?} is not a timestamp (RFC 3339 or YYYY-MM-DD HH:MM:SS), needed by its format")
            })?;
            Ok(Some(timestamp(&ts, opts.format)))
        }
        SqlValue::Date(d) if opts.format != TimeFormat::Rfc3339 => Ok(Some(timestamp(
            &d.and_time(chrono::NaiveTime::MIN).and_utc(),
            opts.format,
        ))),
        other => convert(other, opts),
    }
}

/// A finite float as a DynamoDB number; Rust's shortest round-trip text, checked.
fn float_number(f: f64) -> Result<String, String> {
    if !f.is_finite() {
        return Err(format!(
            "{f} is not a number DynamoDB can store (DynamoDB has no NaN/Infinity)"
        ));
    }
    normalize_number(&format!("{f}")).map_err(|e| e.to_string())
}

fn timestamp(ts: &DateTime<Utc>, format: TimeFormat) -> AttrValue {
    match format {
        TimeFormat::Rfc3339 => AttrValue::S(format_utc(ts)),
        TimeFormat::EpochSeconds => AttrValue::N(ts.timestamp().to_string()),
        TimeFormat::EpochMillis => AttrValue::N(ts.timestamp_millis().to_string()),
    }
}

/// Timestamps some sources (SQLite) hand over as text.
fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(ts) = DateTime::parse_from_rfc3339(s) {
        return Some(ts.with_timezone(&Utc));
    }
    ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .map(|ts| ts.and_utc())
}

/// JSON → M / L / S / N / BOOL / NULL; numbers keep their exact digits.
fn json(j: &Json) -> Result<AttrValue, String> {
    Ok(match j {
        Json::Null => AttrValue::Null,
        Json::Bool(b) => AttrValue::Bool(*b),
        Json::Number(n) => {
            AttrValue::N(normalize_number(&n.to_string()).map_err(|e| e.to_string())?)
        }
        Json::String(s) => AttrValue::S(s.clone()),
        Json::Array(a) => AttrValue::L(a.iter().map(json).collect::<Result<_, _>>()?),
        Json::Object(o) => AttrValue::M(
            o.iter()
                .map(|(k, v)| Ok((k.clone(), json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// Sorted and without duplicates: DynamoDB sets reject duplicates.
fn dedup(set: &[String]) -> Vec<String> {
    let mut v = set.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}
