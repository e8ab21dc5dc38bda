//! The raw shapes several tables share: a key attribute (`{ name, type }`,
//! of the table and of its indexes), an `attributes` value (of an entity, an
//! embed or a pointer) and the options that say how a value is written.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_spanned::Spanned;

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a key table like { name = \"PK\", type = \"S\" }"
)]
pub(crate) struct RawKey {
    pub name: Spanned<String>,
    #[serde(rename = "type")]
    pub kind: KeyType,
}

/// DynamoDB key attribute types, read as `"S"`, `"N"` or `"B"`.
pub(crate) use sql2ddb_core::KeyType;

/// What a NULL column becomes.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Nulls {
    /// Left out of the item.
    #[default]
    Omit,
    /// Written as `{NULL: true}`.
    Null,
}

/// What a value the mapping cannot write (a zero date, NaN, a number beyond
/// DynamoDB's range…) does to its row.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Invalid {
    /// The row is rejected, with the column and the reason.
    #[default]
    Reject,
    /// The value is taken as SQL NULL (so `nulls` decides: omitted or `NULL`).
    Null,
}

/// The DynamoDB type an attribute is written as, whatever the column's type.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrType {
    /// A string: the value's text form.
    S,
    /// A number: booleans as 1/0, numeric text parsed.
    N,
    /// A boolean: integers 0/1 too.
    #[serde(rename = "BOOL")]
    Bool,
}

/// How a timestamp column is written.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TimeFormat {
    /// S, RFC 3339 in UTC.
    #[default]
    Rfc3339,
    /// N, whole seconds since the Unix epoch.
    EpochSeconds,
    /// N, whole milliseconds since the Unix epoch.
    EpochMillis,
}

/// How numeric columns are written.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NumericAs {
    /// N (checked against DynamoDB's number rules).
    #[default]
    Number,
    /// S, the digits as the source gave them.
    String,
}

/// An `[entity.attributes]` value: a template string or a column table.
pub(crate) enum RawAttr {
    Template(String),
    Column(RawAttrColumn),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table like { column = \"name\" }")]
pub(crate) struct RawAttrColumn {
    pub column: Spanned<String>,
    pub format: Option<Spanned<TimeFormat>>,
    pub numeric_as: Option<NumericAs>,
    #[serde(rename = "type")]
    pub kind: Option<Spanned<AttrType>>,
    pub invalid: Option<Invalid>,
}

// Hand-written rather than `#[serde(untagged)]`: untagged buffers the value
// and loses the spans and the precise errors of the inner table.
impl<'de> Deserialize<'de> for RawAttr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AttrVisitor;
        impl<'de> Visitor<'de> for AttrVisitor {
            type Value = RawAttr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a template string or a table like { column = \"name\" }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawAttr, E> {
                Ok(RawAttr::Template(s.to_string()))
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawAttr, M::Error> {
                RawAttrColumn::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(RawAttr::Column)
            }
        }
        d.deserialize_any(AttrVisitor)
    }
}
