//! SQL value → DynamoDB attribute value, by the rules in the crate documentation.

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::Value as Json;
use sql2ddb_core::value::{format_time, format_utc};
use sql2ddb_core::{normalize_number, AttrValue, SqlValue};

use crate::spec::{AttrType, Invalid, Nulls, NumericAs, TimeFormat};
use crate::template::kind_name;

/// Per-attribute conversion options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConvOpts {
    /// Timestamp format.
    pub format: TimeFormat,
    /// Number or string for numeric values.
    pub numeric_as: NumericAs,
    /// What a NULL becomes at the top level.
    pub nulls: Nulls,
    /// What a value that cannot be written does: reject the row, or count as NULL.
    pub invalid: Invalid,
    /// `type`: the DynamoDB type to write whatever the value's own.
    pub kind: Option<AttrType>,
    /// The zone of zone-less timestamps; `None` = UTC.
    pub zone: Option<Tz>,
}

/// Converts a column value. `Ok(None)`: the attribute is left out (NULL with
/// `nulls = "omit"`, or an empty set). `Err`: the reason to reject the row;
/// with `invalid = "null"` such a value is taken as NULL instead.
pub(crate) fn convert(v: &SqlValue, opts: &ConvOpts) -> Result<Option<AttrValue>, String> {
    or_null(convert_strict(v, opts), opts)
}

/// A conversion's result, where `invalid = "null"` turns a failure into NULL.
fn or_null(
    converted: Result<Option<AttrValue>, String>,
    opts: &ConvOpts,
) -> Result<Option<AttrValue>, String> {
    match converted {
        Err(_) if opts.invalid == Invalid::Null => convert_strict(&SqlValue::Null, opts),
        other => other,
    }
}

fn convert_strict(v: &SqlValue, opts: &ConvOpts) -> Result<Option<AttrValue>, String> {
    Ok(Some(match v {
        SqlValue::Null => match opts.nulls {
            Nulls::Omit => return Ok(None),
            Nulls::Null => AttrValue::Null,
        },
        other if opts.kind.is_some() => typed(other, opts)?,
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
        SqlValue::Timestamp(ts) => timestamp(&in_zone(ts, opts.zone)?, opts.format),
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
            let ts = parse_timestamp(s, opts.zone).map(|ts| Some(timestamp(&ts, opts.format)));
            or_null(ts, opts)
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

/// Timestamps some sources (SQLite) hand over as text; without an offset,
/// taken in `zone`.
fn parse_timestamp(s: &str, zone: Option<Tz>) -> Result<DateTime<Utc>, String> {
    if let Ok(ts) = DateTime::parse_from_rfc3339(s) {
        return Ok(ts.with_timezone(&Utc));
    }
    let naive = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .ok_or_else(|| {
            format!("text {s:?} is not a timestamp (RFC 3339 or YYYY-MM-DD HH:MM:SS), needed by its format")
        })?;
    in_zone(&naive, zone)
}

/// A zone-less timestamp taken in `zone` (UTC when `None`), as UTC. A local
/// time that occurs twice (clocks set back) is the earlier instant; one that
/// never occurs (clocks set forward) is an error.
pub(crate) fn in_zone(ts: &NaiveDateTime, zone: Option<Tz>) -> Result<DateTime<Utc>, String> {
    let Some(zone) = zone else {
        return Ok(ts.and_utc());
    };
    match zone.from_local_datetime(ts) {
        LocalResult::Single(t) => Ok(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(earlier, _) => Ok(earlier.with_timezone(&Utc)),
        LocalResult::None => Err(format!(
            "{ts} does not exist in time zone {zone} (the clocks skip it for daylight saving)"
        )),
    }
}

/// A value written as the attribute's `type` says.
fn typed(v: &SqlValue, opts: &ConvOpts) -> Result<AttrValue, String> {
    let Some(kind) = opts.kind else {
        return convert_value(v, opts);
    };
    if let SqlValue::Invalid(reason) = v {
        return Err(reason.clone());
    }
    let cannot = |name: &str| format!("{} cannot be written as {name} (its type)", kind_name(v));
    let number = |digits: &str| normalize_number(digits).map_err(|e| e.to_string());
    Ok(match kind {
        AttrType::N => AttrValue::N(match v {
            SqlValue::Bool(b) | SqlValue::Json(Json::Bool(b)) => u8::from(*b).to_string(),
            SqlValue::Int(i) => i.to_string(),
            SqlValue::UInt(u) => u.to_string(),
            SqlValue::Float(f) => float_number(*f)?,
            SqlValue::Decimal(d) => number(d)?,
            SqlValue::Json(Json::Number(n)) => number(&n.to_string())?,
            SqlValue::Text(t) => {
                number(t).map_err(|e| format!("text {t:?} is not a number: {e}"))?
            }
            _ => return Err(cannot("N")),
        }),
        AttrType::S => AttrValue::S(match v {
            SqlValue::Timestamp(ts) => format_utc(&in_zone(ts, opts.zone)?),
            SqlValue::Json(j @ (Json::Object(_) | Json::Array(_) | Json::Null)) => j.to_string(),
            other => other.to_text().ok_or_else(|| cannot("S"))?,
        }),
        AttrType::Bool => AttrValue::Bool(match v {
            SqlValue::Bool(b) | SqlValue::Json(Json::Bool(b)) => *b,
            SqlValue::Int(0) | SqlValue::UInt(0) => false,
            SqlValue::Int(1) | SqlValue::UInt(1) => true,
            SqlValue::Int(_) | SqlValue::UInt(_) => {
                return Err(format!(
                    "{} is not a boolean (0 or 1), needed by type BOOL",
                    v.to_text().unwrap_or_default()
                ))
            }
            _ => return Err(cannot("BOOL")),
        }),
    })
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
