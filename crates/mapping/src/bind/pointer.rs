//! Binding a `[[pointer]]` to its entity's columns, and picking each batch's
//! candidate; the writer moves the pointer with one conditional write (see
//! [`PointerUpdate`]).

use sql2ddb_core::{normalize_number, AttrValue, Column, Item, PointerUpdate, Row, SqlValue};

use super::binder::Binder;
use super::fields::{map_fields, Field};
use super::key::BoundKey;
use crate::error::MappingError;
use crate::plan::{Plan, Pointer};
use crate::spec::{Nulls, TimeFormat};

impl Pointer {
    /// Binds the pointer to the columns its entity's source returns (every
    /// column may be used, excluded ones too): a column the source does not
    /// return is an error at its place in the mapping.
    pub fn bind(&self, plan: &Plan, columns: &[Column]) -> Result<BoundPointer, MappingError> {
        let who = format!("{} (pointer {})", self.entity, self.name);
        let (mut b, _) = Binder::new(&who, &self.def.at, columns, &[])?;
        b.zone = plan.source.timezone;
        let pk = b.key(&self.def.pk, &plan.target.pk, "pointer pk")?;
        let sk = match (&self.def.sk, &plan.target.sk) {
            (Some(t), Some(attr)) => Some(b.key(t, attr, "pointer sk")?),
            _ => None,
        };
        let value = b.column(&self.column, &self.def.column_at, "the pointer value")?;
        let fields = b.fields(Nulls::Omit, &self.def.attributes, false, &[])?;
        Ok(BoundPointer {
            name: self.name.clone(),
            attribute: self.attribute.clone(),
            is_max: self.is_max,
            pk,
            sk,
            value,
            format: self.def.format,
            fields,
        })
    }
}

/// A pointer bound to its entity's columns.
#[derive(Debug, Clone)]
pub struct BoundPointer {
    name: String,
    attribute: String,
    is_max: bool,
    pk: BoundKey,
    sk: Option<BoundKey>,
    value: usize,
    format: TimeFormat,
    fields: Vec<Field>,
}

impl BoundPointer {
    /// The pointer's label.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The best candidate of `rows` (rows of one batch whose items were
    /// written, in the entity's bound column order) for each pointer key they
    /// produce, in order of first appearance: the row with the largest value
    /// (smallest for `min`), numbers compared numerically and strings by their
    /// bytes, with the attributes taken from that row. Rows whose value is
    /// NULL or not a number, text, date or timestamp, or whose key or
    /// attributes cannot be rendered, are no candidates.
    pub fn candidates(&self, rows: &[Row]) -> Vec<PointerUpdate> {
        self.candidates_indexed(rows)
            .into_iter()
            .map(|(_, b)| b)
            .collect()
    }

    /// [`BoundPointer::candidates`], each with the index in `rows` of the row
    /// it was taken from (so the caller can tie it to that row's item).
    pub fn candidates_indexed(&self, rows: &[Row]) -> Vec<(usize, PointerUpdate)> {
        let mut best: Vec<(PointerUpdate, usize)> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let Some(value) = pointer_value(&row[self.value], self.format) else {
                continue;
            };
            let Ok(pk) = self.pk.value(row) else { continue };
            let sk = match self.sk.as_ref().map(|k| k.value(row)) {
                None => None,
                Some(Ok(v)) => Some(v),
                Some(Err(_)) => continue,
            };
            let update = PointerUpdate {
                name: self.name.clone(),
                pk,
                sk,
                attribute: self.attribute.clone(),
                value,
                is_max: self.is_max,
                attributes: Item::new(),
                cleared: Vec::new(),
            };
            let mut attributes = Item::new();
            if map_fields(&self.fields, row, &mut attributes).is_err() {
                continue;
            }
            // A NULL leaves its attribute out, as the full load maps it:
            // the pointer item loses the older row's value too.
            let cleared = self
                .fields
                .iter()
                .filter(|f| f.attr != self.attribute && !attributes.contains_key(&f.attr))
                .map(|f| f.attr.clone())
                .collect();
            let update = PointerUpdate {
                attributes,
                cleared,
                ..update
            };
            match best
                .iter_mut()
                .find(|(b, _)| b.pk == update.pk && b.sk == update.sk)
            {
                Some((b, at)) => {
                    if update.supersedes(b) {
                        (*b, *at) = (update, i);
                    }
                }
                None => best.push((update, i)),
            }
        }
        best.into_iter().map(|(b, i)| (i, b)).collect()
    }

    /// The candidate of a pointer with one fixed key (the usual literal
    /// `LAST_ORDER`): the best of [`BoundPointer::candidates`] over `rows`.
    pub fn candidate(&self, rows: &[Row]) -> Option<PointerUpdate> {
        self.candidates(rows)
            .into_iter()
            .reduce(|a, b| if b.supersedes(&a) { b } else { a })
    }
}

/// A pointer value: numbers as `N`, text and dates as `S`, timestamps as
/// RFC 3339 with a fixed six-digit fraction (so their text order is their
/// time order) or as epoch numbers with `format`.
fn pointer_value(v: &SqlValue, format: TimeFormat) -> Option<AttrValue> {
    let ts = |t: &chrono::DateTime<chrono::Utc>| match format {
        TimeFormat::Rfc3339 => AttrValue::S(t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()),
        TimeFormat::EpochSeconds => AttrValue::N(t.timestamp().to_string()),
        TimeFormat::EpochMillis => AttrValue::N(t.timestamp_millis().to_string()),
    };
    Some(match v {
        SqlValue::Int(i) => AttrValue::N(i.to_string()),
        SqlValue::UInt(u) => AttrValue::N(u.to_string()),
        SqlValue::Float(f) if f.is_finite() => AttrValue::N(normalize_number(&f.to_string()).ok()?),
        SqlValue::Decimal(d) => AttrValue::N(normalize_number(d).ok()?),
        SqlValue::Json(serde_json::Value::Number(n)) => {
            AttrValue::N(normalize_number(&n.to_string()).ok()?)
        }
        SqlValue::Text(s) | SqlValue::Json(serde_json::Value::String(s)) => AttrValue::S(s.clone()),
        SqlValue::Date(d) => AttrValue::S(d.format("%Y-%m-%d").to_string()),
        SqlValue::Timestamp(t) => ts(&t.and_utc()),
        SqlValue::TimestampTz(t) => ts(t),
        _ => return None,
    })
}
