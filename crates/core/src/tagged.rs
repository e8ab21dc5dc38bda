//! The typed JSON of the rejects file: a value keeps its SQL type, so a row
//! can be read again by its key (`run --only-rejects`) and a reader can tell
//! a date from text and bytes from base64 text.
//!
//! Values JSON holds natively stay plain: `null`, `true`, integers, finite
//! floats, text. Every other kind is a one-key object naming it:
//! `{"$decimal": "12.30"}`, `{"$bytes": "<base64>"}`, `{"$date": "2024-01-02"}`,
//! `{"$time": "03:04:05"}`, `{"$timestamp": "2024-01-02T03:04:05"}` (no
//! zone), `{"$timestamptz": "2024-01-02T03:04:05Z"}`, `{"$json": …}`,
//! `{"$set": ["a", "b"]}`, `{"$float": "NaN"}`, `{"$invalid": "why"}`;
//! arrays are JSON arrays of such values.

use base64::Engine;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use serde_json::{Map, Value as Json};

use crate::value::{format_time, format_utc, SqlValue};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn tag(name: &str, value: Json) -> Json {
    let mut m = Map::with_capacity(1);
    m.insert(name.to_string(), value);
    Json::Object(m)
}

impl SqlValue {
    /// The value as typed JSON (see the module docs).
    pub fn to_tagged_json(&self) -> Json {
        match self {
            SqlValue::Null => Json::Null,
            SqlValue::Bool(b) => Json::Bool(*b),
            SqlValue::Int(i) => Json::from(*i),
            SqlValue::UInt(u) => Json::from(*u),
            SqlValue::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(n) if f.fract() != 0.0 || f.abs() >= 1e16 => Json::Number(n),
                // `1.0` would read back as an integer: keep its type.
                _ => tag("$float", Json::String(f.to_string())),
            },
            SqlValue::Decimal(d) => tag("$decimal", Json::String(d.clone())),
            SqlValue::Text(s) => Json::String(s.clone()),
            SqlValue::Bytes(b) => tag("$bytes", Json::String(B64.encode(b))),
            SqlValue::Date(d) => tag("$date", Json::String(d.format("%Y-%m-%d").to_string())),
            SqlValue::Time(t) => tag("$time", Json::String(format_time(t))),
            SqlValue::Timestamp(ts) => tag(
                "$timestamp",
                Json::String(ts.format("%Y-%m-%dT%H:%M:%S%.f").to_string()),
            ),
            SqlValue::TimestampTz(ts) => tag("$timestamptz", Json::String(format_utc(ts))),
            SqlValue::Json(j) => tag("$json", j.clone()),
            SqlValue::Array(a) => Json::Array(a.iter().map(SqlValue::to_tagged_json).collect()),
            SqlValue::TextSet(s) => tag(
                "$set",
                Json::Array(s.iter().cloned().map(Json::String).collect()),
            ),
            SqlValue::Invalid(reason) => tag("$invalid", Json::String(reason.clone())),
        }
    }

    /// Reads typed JSON back (the inverse of [`SqlValue::to_tagged_json`]).
    pub fn from_tagged_json(json: &Json) -> Result<SqlValue, crate::FormatError> {
        SqlValue::read_tagged(json).map_err(crate::FormatError)
    }

    fn read_tagged(json: &Json) -> Result<SqlValue, String> {
        let text = |v: &Json| -> Result<String, String> {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("expected a string in {json}"))
        };
        Ok(match json {
            Json::Null => SqlValue::Null,
            Json::Bool(b) => SqlValue::Bool(*b),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    SqlValue::Int(i)
                } else if let Some(u) = n.as_u64() {
                    SqlValue::UInt(u)
                } else {
                    let f: f64 = n
                        .to_string()
                        .parse()
                        .map_err(|_| format!("not a number: {n}"))?;
                    SqlValue::Float(f)
                }
            }
            Json::String(s) => SqlValue::Text(s.clone()),
            Json::Array(a) => SqlValue::Array(
                a.iter()
                    .map(SqlValue::read_tagged)
                    .collect::<Result<_, _>>()?,
            ),
            Json::Object(m) if m.len() == 1 => {
                let (name, v) = m.iter().next().expect("one entry");
                let bad = |e: &dyn std::fmt::Display| format!("bad {name} value {v}: {e}");
                match name.as_str() {
                    "$float" => SqlValue::Float(text(v)?.parse().map_err(|e| bad(&e))?),
                    "$decimal" => SqlValue::Decimal(text(v)?),
                    "$bytes" => SqlValue::Bytes(B64.decode(text(v)?).map_err(|e| bad(&e))?),
                    "$date" => SqlValue::Date(
                        NaiveDate::parse_from_str(&text(v)?, "%Y-%m-%d").map_err(|e| bad(&e))?,
                    ),
                    "$time" => SqlValue::Time(
                        NaiveTime::parse_from_str(&text(v)?, "%H:%M:%S%.f").map_err(|e| bad(&e))?,
                    ),
                    "$timestamp" => SqlValue::Timestamp(
                        NaiveDateTime::parse_from_str(&text(v)?, "%Y-%m-%dT%H:%M:%S%.f")
                            .map_err(|e| bad(&e))?,
                    ),
                    "$timestamptz" => SqlValue::TimestampTz(
                        DateTime::parse_from_rfc3339(&text(v)?)
                            .map_err(|e| bad(&e))?
                            .with_timezone(&Utc),
                    ),
                    "$json" => SqlValue::Json(v.clone()),
                    "$set" => SqlValue::TextSet(
                        v.as_array()
                            .ok_or_else(|| bad(&"expected an array"))?
                            .iter()
                            .map(text)
                            .collect::<Result<_, _>>()?,
                    ),
                    "$invalid" => SqlValue::Invalid(text(v)?),
                    other => return Err(format!("unknown value type {other} in {json}")),
                }
            }
            Json::Object(_) => return Err(format!("not a typed value: {json}")),
        })
    }
}

/// A value's typed JSON (see the module docs) as something to serialise:
/// [`SqlValue::to_tagged_json`]'s text, without building the JSON value for
/// the kinds that are plain in it (a source key is mostly integers and text).
pub struct Tagged<'a>(pub &'a SqlValue);

impl serde::Serialize for Tagged<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            SqlValue::Null => s.serialize_unit(),
            SqlValue::Bool(b) => s.serialize_bool(*b),
            SqlValue::Int(i) => s.serialize_i64(*i),
            SqlValue::UInt(u) => s.serialize_u64(*u),
            SqlValue::Text(t) => s.serialize_str(t),
            other => other.to_tagged_json().serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_with_its_type() {
        let d = NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
        let t = NaiveTime::from_hms_micro_opt(3, 4, 5, 120).unwrap();
        let values = vec![
            SqlValue::Null,
            SqlValue::Bool(true),
            SqlValue::Int(-7),
            SqlValue::UInt(u64::MAX),
            SqlValue::Float(0.25),
            SqlValue::Float(1.0),
            SqlValue::Float(f64::NAN),
            SqlValue::Decimal("12.3400".into()),
            SqlValue::Text("{\"$date\": \"x\"}".into()),
            SqlValue::Bytes(vec![0, 159, 255]),
            SqlValue::Date(d),
            SqlValue::Time(t),
            SqlValue::Timestamp(d.and_time(t)),
            SqlValue::TimestampTz(d.and_time(t).and_utc()),
            SqlValue::Json(serde_json::json!({"a": [1, 2.50]})),
            SqlValue::Array(vec![SqlValue::Int(1), SqlValue::Null]),
            SqlValue::TextSet(vec!["a".into(), "b".into()]),
            SqlValue::Invalid("zero date 0000-00-00 cannot be represented".into()),
        ];
        for v in values {
            let json = v.to_tagged_json();
            let line = serde_json::to_string(&json).unwrap();
            assert_eq!(serde_json::to_string(&Tagged(&v)).unwrap(), line);
            let back = SqlValue::from_tagged_json(&serde_json::from_str(&line).unwrap()).unwrap();
            match (&v, &back) {
                (SqlValue::Float(a), SqlValue::Float(b)) if a.is_nan() => assert!(b.is_nan()),
                _ => assert_eq!(back, v, "{line}"),
            }
        }
        assert_eq!(
            SqlValue::Bytes(vec![1, 2]).to_tagged_json(),
            serde_json::json!({"$bytes": "AQI="})
        );
        assert_eq!(
            SqlValue::Date(d).to_tagged_json(),
            serde_json::json!({"$date": "2024-02-29"})
        );
        assert!(SqlValue::from_tagged_json(&serde_json::json!({"$nope": 1})).is_err());
    }

    #[test]
    fn tagged_writes_the_plain_kinds_as_their_typed_json_does() {
        for v in [
            SqlValue::Int(i64::MIN),
            SqlValue::Int(0),
            SqlValue::UInt(u64::MAX),
            SqlValue::Bool(false),
            SqlValue::Text("a\"\\\u{1}\u{7f}é\u{1F600}\n".into()),
            SqlValue::Text(String::new()),
        ] {
            assert_eq!(
                serde_json::to_string(&Tagged(&v)).unwrap(),
                serde_json::to_string(&v.to_tagged_json()).unwrap()
            );
        }
    }
}
