//! Values of binary log row images turned into exactly what the full load's
//! MySQL reader gives for the same column: the reader selects most columns
//! as text (`CAST(… AS CHAR)`) and parses that text by the column's kind, so
//! a binlog value is first written as that text (the server's format), then
//! parsed by the same function. Floats and byte strings are read natively,
//! as the reader reads them.
//!
//! Row images carry no column names and, unless `binlog_row_metadata =
//! FULL`, no signedness nor `ENUM`/`SET` labels: those come from
//! `information_schema` (columns in ordinal position).

use chrono::DateTime;
use mysql_async::binlog::value::BinlogValue;
use mysql_async::Value;
use sql2ddb_core::SqlValue;

use super::TupleValue;
use crate::mysql::{kind_of, parse_text, Kind};

/// How one column of a table's row images is decoded.
#[derive(Debug, Clone)]
pub(crate) struct ColumnDecoder {
    kind: Kind,
    /// `UNSIGNED` integer: the image holds its bits as a signed number.
    unsigned: bool,
    /// Integer width in bits (a negative image of an unsigned column is
    /// taken modulo 2^bits).
    bits: u32,
    /// `YEAR`: the image's 1900 is the zero year.
    year: bool,
    /// `CHAR(n)`: reads strip trailing spaces.
    char_pad: bool,
    /// `BINARY(n)`: reads pad with zero bytes to n.
    binary_len: Option<usize>,
    /// The character set of character data not in UTF-8 (utf8, utf8mb3,
    /// utf8mb4, ascii): its values are converted by the server
    /// ([`ColumnDecoder::foreign_charset`]), as the full load's reads are.
    foreign: Option<String>,
    /// `ENUM`/`SET` labels, in declaration order.
    labels: Vec<String>,
    /// Fractional digits of a `TIME`/`DATETIME`/`TIMESTAMP(n)`: the server
    /// writes exactly that many.
    fsp: usize,
}

impl ColumnDecoder {
    /// The decoder of a column of type `sql_type` (`COLUMN_TYPE`, or `json`
    /// for MariaDB's checked JSON text) in character set `charset`.
    pub(crate) fn new(sql_type: &str, charset: Option<&str>) -> Self {
        let t = sql_type.trim().to_ascii_lowercase();
        let base = t
            .split(|c: char| c == '(' || c.is_whitespace())
            .next()
            .unwrap_or_default()
            .to_string();
        let bits = match base.as_str() {
            "tinyint" => 8,
            "smallint" => 16,
            "mediumint" => 24,
            "int" | "integer" => 32,
            _ => 64,
        };
        let binary_len = match base.as_str() {
            "binary" => t
                .strip_prefix("binary(")
                .and_then(|r| r.split(')').next())
                .and_then(|n| n.parse().ok()),
            _ => None,
        };
        let labels = match base.as_str() {
            "enum" | "set" => labels(sql_type),
            _ => Vec::new(),
        };
        let fsp = match base.as_str() {
            "time" | "datetime" | "timestamp" => t
                .split_once('(')
                .and_then(|(_, r)| r.split(')').next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0),
            _ => 0,
        };
        ColumnDecoder {
            fsp,
            kind: kind_of(sql_type),
            unsigned: t.contains("unsigned"),
            bits,
            year: base == "year",
            char_pad: base == "char",
            binary_len,
            foreign: charset
                .map(str::to_ascii_lowercase)
                .filter(|c| !(c.starts_with("utf8") || c == "ascii" || c == "binary")),
            labels,
        }
    }

    /// One value of a row image: `None` when the image does not hold the
    /// column (then [`TupleValue::Unchanged`]: the row is read again).
    pub(crate) fn decode(&self, value: Option<&BinlogValue<'_>>) -> TupleValue {
        match value {
            None | Some(BinlogValue::JsonDiff(_)) => TupleValue::Unchanged,
            Some(BinlogValue::Value(Value::NULL)) => TupleValue::Null,
            Some(BinlogValue::Jsonb(j)) => match serde_json::Value::try_from(j.clone()) {
                Ok(json) => TupleValue::Value(parse_text(Kind::Json, json.to_string())),
                Err(_) => TupleValue::Unchanged,
            },
            Some(BinlogValue::Value(v)) => match self.value(v) {
                Some(v) => TupleValue::Value(v),
                None => TupleValue::Unchanged,
            },
        }
    }

    /// The character set of a value of this column that only the server
    /// can turn into text (`latin1`, `cp1251`, `sjis`…), with its bytes;
    /// `None` when [`ColumnDecoder::decode`] reads it itself.
    pub(crate) fn foreign_charset<'v>(
        &self,
        value: Option<&'v BinlogValue<'_>>,
    ) -> Option<(&str, &'v [u8])> {
        let charset = self.foreign.as_deref()?;
        match (self.kind, value) {
            (Kind::Text | Kind::Json, Some(BinlogValue::Value(Value::Bytes(b))))
                if self.labels.is_empty() =>
            {
                Some((charset, b.as_slice()))
            }
            _ => None,
        }
    }

    /// A character value as the server converted it to UTF-8, read as the
    /// full load reads it (`CHAR(n)` without its padding).
    pub(crate) fn text_value(&self, text: String) -> TupleValue {
        TupleValue::Value(self.text(text))
    }

    fn text(&self, mut s: String) -> SqlValue {
        if self.char_pad {
            s.truncate(s.trim_end_matches(' ').len());
        }
        parse_text(self.kind, s)
    }

    /// A value of a row image as the full load reads it for this column;
    /// `None` when only the source can say (the row is read again).
    fn value(&self, v: &Value) -> Option<SqlValue> {
        let text = match self.kind {
            Kind::Float | Kind::Double => return float_value(self.kind, v),
            Kind::Bytes => return self.binary_value(v),
            Kind::Text | Kind::Json | Kind::Set => return self.character_value(v),
            Kind::Int | Kind::Bool => self.integer_text(v)?,
            Kind::Bit => bit_text(v)?,
            Kind::Decimal => match v {
                Value::Bytes(b) => String::from_utf8(b.clone()).ok()?,
                _ => return None,
            },
            Kind::Date | Kind::DateTime | Kind::Timestamp | Kind::Time => self.temporal_text(v)?,
            // Anything else (UUID, INET6, …): its text form is the
            // server's; the row is read again.
            Kind::Other => return None,
        };
        Some(parse_text(self.kind, text))
    }

    /// A `BINARY`/`VARBINARY`/`BLOB` value, padded as the server pads a
    /// `BINARY(n)` when read.
    fn binary_value(&self, v: &Value) -> Option<SqlValue> {
        let Value::Bytes(b) = v else {
            return None;
        };
        let mut b = b.clone();
        if let Some(n) = self.binary_len {
            if b.len() < n {
                b.resize(n, 0);
            }
        }
        Some(SqlValue::Bytes(b))
    }

    /// A character, `ENUM`, `SET` or JSON value; `None` for text in a
    /// character set only the server converts.
    fn character_value(&self, v: &Value) -> Option<SqlValue> {
        let text = match (self.kind, v) {
            (Kind::Text, Value::Int(i)) if !self.labels.is_empty() => {
                // An ENUM's image is its index; 0 is the empty error value.
                match *i {
                    0 => String::new(),
                    i => self.labels.get(usize::try_from(i - 1).ok()?)?.clone(),
                }
            }
            (Kind::Set, Value::Bytes(mask)) => {
                let chosen: Vec<&str> = self
                    .labels
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0))
                    .map(|(_, l)| l.as_str())
                    .collect();
                chosen.join(",")
            }
            (Kind::Text | Kind::Json, Value::Bytes(b)) => {
                if self.foreign.is_some() {
                    return None;
                }
                return Some(self.text(String::from_utf8(b.clone()).ok()?));
            }
            _ => return None,
        };
        Some(parse_text(self.kind, text))
    }

    /// An integer (or `YEAR`, or boolean) as the server writes it: an
    /// unsigned column's image holds its bits as a signed number.
    fn integer_text(&self, v: &Value) -> Option<String> {
        Some(match v {
            Value::Bytes(b) if self.year => match std::str::from_utf8(b).ok()? {
                "1900" => "0".to_string(),
                y => y.to_string(),
            },
            Value::Int(i) => {
                if self.unsigned && *i < 0 {
                    let mask = match self.bits {
                        64 => u64::MAX,
                        b => (1u64 << b) - 1,
                    };
                    ((*i as u64) & mask).to_string()
                } else {
                    i.to_string()
                }
            }
            Value::UInt(u) => u.to_string(),
            _ => return None,
        })
    }

    /// A `DATE`, `DATETIME`, `TIMESTAMP` or `TIME` as the server writes it,
    /// with exactly the column's fractional digits.
    fn temporal_text(&self, v: &Value) -> Option<String> {
        Some(match (self.kind, v) {
            (Kind::Timestamp, Value::Bytes(b)) => {
                epoch_text(std::str::from_utf8(b).ok()?, self.fsp)?
            }
            (Kind::Timestamp, Value::Int(secs)) => epoch_text(&secs.to_string(), self.fsp)?,
            (Kind::Date, Value::Date(y, m, d, ..)) => format!("{y:04}-{m:02}-{d:02}"),
            (Kind::DateTime | Kind::Timestamp, Value::Date(y, mo, d, h, mi, s, us)) => {
                let t = format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}");
                t + &fraction(*us, self.fsp)
            }
            // mysql_common decodes a negative TIME(1)/TIME(2) with a
            // fraction wrongly: such columns are read from the source.
            (Kind::Time, Value::Time(..)) if matches!(self.fsp, 1 | 2) => return None,
            (Kind::Time, Value::Time(negative, days, h, m, s, us)) => {
                let hours = u64::from(*days) * 24 + u64::from(*h);
                let sign = if *negative { "-" } else { "" };
                format!("{sign}{hours:02}:{m:02}:{s:02}") + &fraction(*us, self.fsp)
            }
            _ => return None,
        })
    }
}

/// A `FLOAT` or `DOUBLE` (`kind`), read natively as the full load reads it.
fn float_value(kind: Kind, v: &Value) -> Option<SqlValue> {
    match (kind, v) {
        (Kind::Float, Value::Float(f)) => Some(SqlValue::Float(crate::widen_f32(*f))),
        (Kind::Float | Kind::Double, Value::Double(d)) => Some(SqlValue::Float(*d)),
        (Kind::Double, Value::Float(f)) => Some(SqlValue::Float(*f as f64)),
        _ => None,
    }
}

/// A `BIT(n)` as the unsigned integer it is selected as (n ≤ 64).
fn bit_text(v: &Value) -> Option<String> {
    match v {
        Value::Bytes(b) if b.len() <= 8 => Some(
            b.iter()
                .fold(0u64, |n, &byte| (n << 8) | u64::from(byte))
                .to_string(),
        ),
        _ => None,
    }
}

/// `.fff` of `micros` with `fsp` digits, as the server writes them.
fn fraction(micros: u32, fsp: usize) -> String {
    match fsp.min(6) {
        0 => String::new(),
        n => format!(".{:0n$}", micros / 10u32.pow(6 - n as u32)),
    }
}

/// A `TIMESTAMP` image (seconds since the epoch, maybe `.micros`) as the
/// session (UTC) writes it; 0 is the zero timestamp.
fn epoch_text(image: &str, fsp: usize) -> Option<String> {
    let (secs, micros) = match image.split_once('.') {
        Some((s, us)) => (s.parse::<i64>().ok()?, us.parse::<u32>().ok()?),
        None => (image.parse::<i64>().ok()?, 0),
    };
    if secs == 0 && micros == 0 {
        return Some(format!("0000-00-00 00:00:00{}", fraction(0, fsp)));
    }
    let t = DateTime::from_timestamp(secs, micros * 1000)?.naive_utc();
    Some(t.format("%Y-%m-%d %H:%M:%S").to_string() + &fraction(micros, fsp))
}

/// The labels of `enum('a','b')` / `set('a','b')`, quotes undone.
fn labels(sql_type: &str) -> Vec<String> {
    let Some(open) = sql_type.find('(') else {
        return Vec::new();
    };
    let rest = &sql_type[open + 1..];
    let body = &rest[..rest.rfind(')').unwrap_or(rest.len())];
    let mut out = Vec::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let mut label = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    label.push('\'');
                }
                '\'' => break,
                '\\' => {
                    if let Some(n) = chars.next() {
                        label.push(n);
                    }
                }
                c => label.push(c),
            }
        }
        out.push(label);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(sql_type: &str, v: Value) -> TupleValue {
        ColumnDecoder::new(sql_type, Some("utf8mb4")).decode(Some(&BinlogValue::Value(v)))
    }

    fn value(v: SqlValue) -> TupleValue {
        TupleValue::Value(v)
    }

    #[test]
    fn unsigned_integers_come_back_from_their_signed_images() {
        assert_eq!(
            decode("int(10) unsigned", Value::Int(-1)),
            value(SqlValue::Int(u32::MAX as i64))
        );
        assert_eq!(
            decode("bigint(20) unsigned", Value::Int(-1)),
            value(SqlValue::UInt(u64::MAX))
        );
        assert_eq!(
            decode("mediumint(8) unsigned", Value::Int(-1)),
            value(SqlValue::Int((1 << 24) - 1))
        );
        assert_eq!(decode("int(11)", Value::Int(-5)), value(SqlValue::Int(-5)));
        assert_eq!(
            decode("tinyint(1)", Value::Int(1)),
            value(SqlValue::Bool(true))
        );
    }

    #[test]
    fn enums_sets_bits_and_years_read_as_the_server_writes_them() {
        assert_eq!(
            decode("enum('a','it''s')", Value::Int(2)),
            value(SqlValue::Text("it's".into()))
        );
        assert_eq!(
            decode("enum('a')", Value::Int(0)),
            value(SqlValue::Text(String::new()))
        );
        assert_eq!(
            decode("set('x','y','z')", Value::Bytes(vec![0b101])),
            value(SqlValue::TextSet(vec!["x".into(), "z".into()]))
        );
        assert_eq!(
            decode("bit(10)", Value::Bytes(vec![1, 2])),
            value(SqlValue::Int(258))
        );
        assert_eq!(
            decode("year(4)", Value::Bytes(b"2024".to_vec())),
            value(SqlValue::Int(2024))
        );
        assert_eq!(
            decode("year(4)", Value::Bytes(b"1900".to_vec())),
            value(SqlValue::Int(0))
        );
    }

    #[test]
    fn times_read_as_the_server_writes_them_in_utc() {
        assert_eq!(
            decode("timestamp(6)", Value::Bytes(b"86400.5".to_vec())),
            value(parse_text(
                Kind::Timestamp,
                "1970-01-02 00:00:00.000005".into()
            ))
        );
        assert!(matches!(
            decode("timestamp", Value::Bytes(b"0".to_vec())),
            TupleValue::Value(SqlValue::Invalid(_))
        ));
        assert_eq!(
            decode("datetime(6)", Value::Date(2024, 2, 29, 23, 59, 1, 250)),
            value(parse_text(
                Kind::DateTime,
                "2024-02-29 23:59:01.000250".into()
            ))
        );
        assert!(matches!(
            decode("time", Value::Time(false, 1, 2, 0, 0, 0)),
            TupleValue::Value(SqlValue::Invalid(_))
        ));
        assert_eq!(
            decode("time(2)", Value::Time(false, 0, 1, 2, 3, 0)),
            TupleValue::Unchanged
        );
        assert_eq!(
            decode("date", Value::Date(2024, 1, 5, 0, 0, 0, 0)),
            value(parse_text(Kind::Date, "2024-01-05".into()))
        );
    }

    #[test]
    fn strings_bytes_and_what_only_the_server_can_write() {
        assert_eq!(
            decode("char(5)", Value::Bytes(b"ab  ".to_vec())),
            value(SqlValue::Text("ab".into()))
        );
        assert_eq!(
            decode("binary(3)", Value::Bytes(vec![7])),
            value(SqlValue::Bytes(vec![7, 0, 0]))
        );
        assert_eq!(
            ColumnDecoder::new("varchar(5)", Some("latin1"))
                .decode(Some(&BinlogValue::Value(Value::Bytes(b"a".to_vec())))),
            TupleValue::Unchanged
        );
        assert_eq!(
            decode("uuid", Value::Bytes(vec![0; 16])),
            TupleValue::Unchanged
        );
        assert_eq!(
            ColumnDecoder::new("int", None).decode(None),
            TupleValue::Unchanged
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        const TYPES: [&str; 22] = [
            "int(11)",
            "int(10) unsigned",
            "bigint(20) unsigned",
            "tinyint(1)",
            "mediumint(8) unsigned",
            "decimal(10,2)",
            "float",
            "double",
            "varchar(20)",
            "char(4)",
            "binary(4)",
            "text",
            "enum('a','b')",
            "set('x','y')",
            "bit(12)",
            "year(4)",
            "date",
            "datetime(3)",
            "timestamp(6)",
            "time(1)",
            "time",
            "json",
        ];

        fn any_value() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::NULL),
                any::<i64>().prop_map(Value::Int),
                any::<u64>().prop_map(Value::UInt),
                any::<f32>().prop_map(Value::Float),
                any::<f64>().prop_map(Value::Double),
                proptest::collection::vec(any::<u8>(), 0..24).prop_map(Value::Bytes),
                (
                    any::<u16>(),
                    any::<u8>(),
                    any::<u8>(),
                    any::<u8>(),
                    any::<u8>(),
                    any::<u8>(),
                    any::<u32>()
                )
                    .prop_map(|(y, mo, d, h, mi, s, us)| Value::Date(y, mo, d, h, mi, s, us)),
                (
                    any::<bool>(),
                    any::<u32>(),
                    any::<u8>(),
                    any::<u8>(),
                    any::<u8>(),
                    any::<u32>()
                )
                    .prop_map(|(n, d, h, m, s, us)| Value::Time(n, d, h, m, s, us)),
            ]
        }

        proptest! {
            /// Whatever a row image holds, decoding gives a value, a NULL
            /// or "read the row again": never a panic.
            #[test]
            fn any_image_value_decodes_without_a_panic(t in 0..TYPES.len(), v in any_value()) {
                let _ = ColumnDecoder::new(TYPES[t], Some("utf8mb4"))
                    .decode(Some(&BinlogValue::Value(v)));
            }

            /// An unsigned column's image comes back as the number the
            /// server holds: within the column's range, equal modulo 2^bits.
            #[test]
            fn unsigned_images_stay_in_their_column_range(i in any::<i64>()) {
                for (t, bits) in [("tinyint(3) unsigned", 8u32), ("smallint(5) unsigned", 16),
                    ("mediumint(8) unsigned", 24), ("int(10) unsigned", 32)] {
                    let image = i % (1i64 << (bits - 1));
                    let got = decode(t, Value::Int(image));
                    let want = (image as u64) & ((1u64 << bits) - 1);
                    prop_assert_eq!(got, value(SqlValue::Int(want as i64)));
                }
            }

            /// Bytes that are not UTF-8 in a UTF-8 column are never taken
            /// for another text: the row is read again.
            #[test]
            fn text_that_is_not_utf8_is_read_again(b in proptest::collection::vec(any::<u8>(), 1..24)) {
                let got = decode("varchar(30)", Value::Bytes(b.clone()));
                match String::from_utf8(b) {
                    Ok(s) => prop_assert_eq!(got, value(SqlValue::Text(s))),
                    Err(_) => prop_assert_eq!(got, TupleValue::Unchanged),
                }
            }

            /// Labels of any `ENUM` text parse without a panic, and an
            /// index past them is read again, not taken for a label.
            #[test]
            fn enum_indexes_past_the_labels_are_read_again(text in ".{0,40}", i in 3i64..1000) {
                let _ = labels(&text);
                prop_assert_eq!(decode("enum('a','b')", Value::Int(i)), TupleValue::Unchanged);
            }
        }
    }
}
