//! `values = { ":x" = … }`: TOML values as DynamoDB attribute values.
//!
//! A string is `S` (`${VAR}` expanded), an integer or a float `N`, a boolean
//! `BOOL`, a date-time `S` (its TOML text), an array `L`, a table `M`. A
//! table with exactly one DynamoDB type key is that typed value, as in
//! DynamoDB JSON: `{ N = "12.50" }`, `{ SS = ["a", "b"] }`, `{ NULL = true }`.

use std::collections::BTreeMap;
use std::ops::Range;

use serde_spanned::Spanned;
use sql2ddb_core::{normalize_number, AttrValue};

use crate::error::MappingError;
use crate::load::Loader;

const TYPE_KEYS: [&str; 10] = ["S", "N", "B", "BOOL", "NULL", "L", "M", "SS", "NS", "BS"];

/// The attribute value of one `values` entry.
pub(super) fn attr_value(l: &Loader, v: &Spanned<toml::Value>) -> Result<AttrValue, MappingError> {
    convert(l, &v.span(), v.get_ref())
}

fn convert(l: &Loader, span: &Range<usize>, v: &toml::Value) -> Result<AttrValue, MappingError> {
    use toml::Value;
    Ok(match v {
        Value::String(s) => AttrValue::S(expand_string(l, span, s)?),
        Value::Integer(i) => AttrValue::N(i.to_string()),
        Value::Float(f) => {
            AttrValue::N(normalize_number(&f.to_string()).map_err(|e| {
                l.invalid(span, format!("values: {f} is not a DynamoDB number: {e}"))
            })?)
        }
        Value::Boolean(b) => AttrValue::Bool(*b),
        Value::Datetime(d) => AttrValue::S(d.to_string()),
        Value::Array(items) => AttrValue::L(
            items
                .iter()
                .map(|i| convert(l, span, i))
                .collect::<Result<_, _>>()?,
        ),
        Value::Table(t) if t.len() == 1 && TYPE_KEYS.iter().any(|k| t.contains_key(*k)) => {
            v.clone().try_into::<AttrValue>().map_err(|e| {
                l.invalid(
                    span,
                    format!("values: not a DynamoDB typed value: {}", e.message()),
                )
            })?
        }
        Value::Table(t) => AttrValue::M(
            t.iter()
                .map(|(k, v)| Ok((k.clone(), convert(l, span, v)?)))
                .collect::<Result<BTreeMap<_, _>, MappingError>>()?,
        ),
    })
}

fn expand_string(l: &Loader, span: &Range<usize>, s: &str) -> Result<String, MappingError> {
    // A nested string has no span of its own: its errors point at the value.
    l.expand(&Spanned::new(span.clone(), s.to_string()))
}
