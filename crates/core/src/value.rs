//! Values as a source reads them, before any mapping.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// One column of a source result set, as introspected before reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Column name exactly as the source reports it.
    pub name: String,
    /// The source's own type name (e.g. `int8`, `numeric`, `VARCHAR`), for messages and docs.
    pub sql_type: String,
}

/// A value read from a SQL source, in a dialect-neutral form.
///
/// Sources decide the variant; the mapping decides the DynamoDB type.
/// Serialisable (externally tagged, `{"Int": 7}`) so a keyset cursor can be
/// stored and read back with its exact types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SqlValue {
    /// SQL NULL.
    Null,
    /// boolean.
    Bool(bool),
    /// Any signed integer width.
    Int(i64),
    /// Unsigned integers that do not fit `i64` (MySQL `BIGINT UNSIGNED`).
    UInt(u64),
    /// Binary floating point; NaN and infinities are kept so the mapping can reject them.
    Float(f64),
    /// Exact decimal as text (`-12.3400`, `NaN` for PostgreSQL's numeric NaN).
    Decimal(String),
    /// Text of any kind: char, varchar, text, enum labels, uuid.
    Text(String),
    /// Binary data: bytea, blob, varbinary.
    Bytes(Vec<u8>),
    /// Calendar date without zone.
    Date(NaiveDate),
    /// Time of day without zone.
    Time(NaiveTime),
    /// Timestamp without zone (documented as UTC unless the mapping says otherwise).
    Timestamp(NaiveDateTime),
    /// Timestamp with zone, normalised to UTC by the source.
    TimestampTz(DateTime<Utc>),
    /// json / jsonb, numbers kept with their exact digits.
    Json(Json),
    /// SQL arrays.
    Array(Vec<SqlValue>),
    /// A set of strings (MySQL `SET`).
    TextSet(Vec<String>),
    /// A value the source read but cannot represent (e.g. MySQL zero date); the reason says why.
    Invalid(String),
}

/// A row: values in the order of the entity's columns.
pub type Row = Vec<SqlValue>;

impl SqlValue {
    /// Whether the value is SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, SqlValue::Null)
    }

    /// Plain-text rendering used inside key templates and messages.
    /// `None` for values that have no single-line text form (NULL, bytes, arrays, json objects).
    pub fn to_text(&self) -> Option<String> {
        Some(match self {
            SqlValue::Null | SqlValue::Invalid(_) => return None,
            SqlValue::Bool(b) => b.to_string(),
            SqlValue::Int(i) => i.to_string(),
            SqlValue::UInt(u) => u.to_string(),
            SqlValue::Float(f) => f.to_string(),
            SqlValue::Decimal(d) => d.clone(),
            SqlValue::Text(s) => s.clone(),
            SqlValue::Bytes(_) | SqlValue::Array(_) | SqlValue::TextSet(_) => return None,
            SqlValue::Date(d) => d.format("%Y-%m-%d").to_string(),
            SqlValue::Time(t) => format_time(t),
            SqlValue::Timestamp(ts) => format_naive_timestamp(ts),
            SqlValue::TimestampTz(ts) => format_utc(ts),
            SqlValue::Json(Json::String(s)) => s.clone(),
            SqlValue::Json(Json::Number(n)) => n.to_string(),
            SqlValue::Json(Json::Bool(b)) => b.to_string(),
            SqlValue::Json(_) => return None,
        })
    }

    /// JSON rendering for reject files and reports (bytes as base64, timestamps as RFC 3339).
    pub fn to_json(&self) -> Json {
        use base64::Engine;
        match self {
            SqlValue::Null => Json::Null,
            SqlValue::Bool(b) => Json::Bool(*b),
            SqlValue::Int(i) => Json::from(*i),
            SqlValue::UInt(u) => Json::from(*u),
            SqlValue::Float(f) => serde_json::Number::from_f64(*f)
                .map(Json::Number)
                .unwrap_or_else(|| Json::String(f.to_string())),
            SqlValue::Decimal(d) => Json::String(d.clone()),
            SqlValue::Text(s) => Json::String(s.clone()),
            SqlValue::Bytes(b) => Json::String(base64::engine::general_purpose::STANDARD.encode(b)),
            SqlValue::Json(j) => j.clone(),
            SqlValue::Array(a) => Json::Array(a.iter().map(SqlValue::to_json).collect()),
            SqlValue::TextSet(s) => Json::Array(s.iter().cloned().map(Json::String).collect()),
            SqlValue::Invalid(reason) => Json::String(format!("<invalid: {reason}>")),
            other => Json::String(other.to_text().unwrap_or_default()),
        }
    }
}

/// `HH:MM:SS` with a fraction only when there is one.
pub fn format_time(t: &NaiveTime) -> String {
    t.format("%H:%M:%S%.f").to_string()
}

/// A zone-less timestamp, rendered as UTC RFC 3339 (`2024-01-02T03:04:05Z`).
pub fn format_naive_timestamp(ts: &NaiveDateTime) -> String {
    format_utc(&ts.and_utc())
}

/// RFC 3339 in UTC with a `Z`, fraction only when there is one (3, 6 or 9
/// digits, as few as it takes), exactly as chrono's `%Y-%m-%dT%H:%M:%S%.fZ`.
pub fn format_utc(ts: &DateTime<Utc>) -> String {
    // Written digit by digit: a timestamp column is formatted for every row,
    // and chrono reads its format string each time. The date and the time of
    // day are read once (each of chrono's field getters on a `DateTime`
    // works the local time out again).
    let naive = ts.naive_utc();
    let (date, time) = (naive.date(), naive.time());
    let (year, nanos) = (date.year(), time.nanosecond());
    if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
        // Signed or five-digit years, and leap seconds: chrono's own rules.
        return ts.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string();
    }
    let seconds = time.num_seconds_from_midnight();
    // `YYYY-MM-DDTHH:MM:SS.fffffffffZ`: at most 30 bytes, all ASCII.
    let mut out = [0u8; 30];
    put_digits(&mut out[0..4], year as u32);
    out[4] = b'-';
    put_digits(&mut out[5..7], date.month());
    out[7] = b'-';
    put_digits(&mut out[8..10], date.day());
    out[10] = b'T';
    put_digits(&mut out[11..13], seconds / 3600);
    out[13] = b':';
    put_digits(&mut out[14..16], seconds / 60 % 60);
    out[16] = b':';
    put_digits(&mut out[17..19], seconds % 60);
    let mut len = 19;
    if nanos != 0 {
        out[len] = b'.';
        let (value, width) = match (nanos % 1_000_000, nanos % 1_000) {
            (0, _) => (nanos / 1_000_000, 3),
            (_, 0) => (nanos / 1_000, 6),
            _ => (nanos, 9),
        };
        put_digits(&mut out[len + 1..len + 1 + width], value);
        len += 1 + width;
    }
    out[len] = b'Z';
    len += 1;
    std::str::from_utf8(&out[..len])
        .expect("digits and separators are ASCII")
        .to_owned()
}

/// `value`'s last `out.len()` decimal digits, zero-padded, into `out`.
fn put_digits(out: &mut [u8], mut value: u32) {
    for slot in out.iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// A row as a JSON object keyed by column name, for rejects.
pub fn row_to_json(columns: &[Column], row: &[SqlValue]) -> Json {
    let mut obj = serde_json::Map::with_capacity(columns.len());
    for (c, v) in columns.iter().zip(row) {
        obj.insert(c.name.clone(), v.to_json());
    }
    Json::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_written_as_chrono_writes_them() {
        let chrono_way = |ts: &DateTime<Utc>| ts.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut cases: Vec<DateTime<Utc>> = Vec::new();
        for _ in 0..20_000 {
            // Seconds from year 0 to 9999, and fractions of every width.
            let secs = (next() % 315_537_897_600) as i64 - 62_167_219_200;
            let nanos = match next() % 4 {
                0 => 0,
                1 => (next() % 1000) as u32 * 1_000_000,
                2 => (next() % 1_000_000) as u32 * 1_000,
                _ => (next() % 1_000_000_000) as u32,
            };
            cases.push(DateTime::from_timestamp(secs, nanos).unwrap());
        }
        // Edges, a leap second and years chrono writes with a sign.
        cases.push(DateTime::from_timestamp(0, 0).unwrap());
        cases.push(DateTime::from_timestamp(-62_167_219_200, 1).unwrap());
        cases.push(DateTime::from_timestamp(253_402_300_799, 999_999_999).unwrap());
        cases.push(DateTime::from_timestamp(253_402_300_800, 5_000_000).unwrap());
        cases.push(DateTime::from_timestamp(-62_167_219_201, 0).unwrap());
        cases.push(
            NaiveDate::from_ymd_opt(2016, 12, 31)
                .unwrap()
                .and_hms_nano_opt(23, 59, 59, 1_500_000_000)
                .unwrap()
                .and_utc(),
        );
        for ts in &cases {
            assert_eq!(format_utc(ts), chrono_way(ts), "{ts:?}");
        }
        assert_eq!(
            format_utc(&DateTime::from_timestamp(1_704_164_645, 678_000_000).unwrap()),
            "2024-01-02T03:04:05.678Z"
        );
    }
}
