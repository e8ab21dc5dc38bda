//! `[[pointer]]`: an item at a fixed key holding the largest (or smallest)
//! value of a column written so far, such as `LAST_ORDER`. The mapping picks
//! each batch's candidate; the writer moves the pointer with one conditional
//! write (see [`PointerUpdate`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_spanned::Spanned;
use sql2ddb_core::{normalize_number, AttrValue, Column, Item, PointerUpdate, Row, SqlValue};

use crate::bind::{map_fields, BoundKey, Field};
use crate::binder::Binder;
use crate::error::{Location, MappingError};
use crate::load::Loader;
use crate::plan::{AttrDef, Entity, Plan, TargetSpec};
use crate::spec::{Nulls, RawAttr, TimeFormat};
use crate::template::Template;

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[pointer]] table with entity, pk and max or min"
)]
pub(crate) struct RawPointer {
    pub name: Option<Spanned<String>>,
    pub entity: Spanned<String>,
    pub pk: Spanned<String>,
    pub sk: Option<Spanned<String>>,
    pub max: Option<Spanned<RawPointerValue>>,
    pub min: Option<Spanned<RawPointerValue>>,
    #[serde(default)]
    pub attributes: BTreeMap<Spanned<String>, Spanned<RawAttr>>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { attribute = \"orderId\", column = \"order_id\" }"
)]
pub(crate) struct RawPointerValue {
    pub attribute: Spanned<String>,
    pub column: Spanned<String>,
    pub format: Option<Spanned<TimeFormat>>,
}

/// One `[[pointer]]`, bound to its entity's columns with [`Pointer::bind`].
#[derive(Debug, Clone)]
pub struct Pointer {
    /// Label in reports: `name`, else the key as written (`LAST_ORDER`).
    pub name: String,
    /// The entity whose written rows move the pointer.
    pub entity: String,
    /// The attribute holding the value.
    pub attribute: String,
    /// The column the value comes from.
    pub column: String,
    /// `max` (`true`) or `min`.
    pub is_max: bool,
    def: PointerDef,
}

#[derive(Debug, Clone)]
struct PointerDef {
    at: Location,
    pk: Template,
    sk: Option<Template>,
    column_at: Location,
    format: TimeFormat,
    attributes: Vec<AttrDef>,
}

impl Pointer {
    /// The partition key template as written.
    pub fn pk_template(&self) -> &str {
        &self.def.pk.text
    }

    /// The sort key template as written, if any.
    pub fn sk_template(&self) -> Option<&str> {
        self.def.sk.as_ref().map(|t| t.text.as_str())
    }

    pub(crate) fn templates(&self) -> (&Template, Option<&Template>) {
        (&self.def.pk, self.def.sk.as_ref())
    }

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
            };
            let mut attributes = Item::new();
            if map_fields(&self.fields, row, &mut attributes).is_err() {
                continue;
            }
            let update = PointerUpdate {
                attributes,
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

impl Loader<'_, '_> {
    /// One `[[pointer]]`, checked against the entities and the table's keys.
    pub(crate) fn pointer(
        &self,
        spanned: &Spanned<RawPointer>,
        target: &TargetSpec,
        entities: &[Entity],
    ) -> Result<Pointer, MappingError> {
        let p = spanned.get_ref();
        let entity = p.entity.get_ref();
        if !entities.iter().any(|e| &e.name == entity) {
            let names: Vec<&str> = entities.iter().map(|e| e.name.as_str()).collect();
            return Err(self.invalid(
                &p.entity.span(),
                format!(
                    "pointer names entity {entity:?}, which the mapping does not define (entities: {})",
                    names.join(", ")
                ),
            ));
        }
        let (value, is_max) = match (&p.max, &p.min) {
            (Some(v), None) => (v, true),
            (None, Some(v)) => (v, false),
            (Some(_), Some(v)) => {
                return Err(self.invalid(&v.span(), "a pointer has max or min, not both".into()))
            }
            (None, None) => {
                return Err(MappingError::MissingKey {
                    at: self.sm.at(spanned.span().start),
                    key: "max".into(),
                    message:
                        "pointer needs max = { attribute = \"…\", column = \"…\" } (or min = …)"
                            .into(),
                })
            }
        };
        let v = value.get_ref();
        let attribute = v.attribute.get_ref().clone();
        let mut reserved: Vec<&str> = target.key_names();
        if attribute.is_empty() || reserved.contains(&attribute.as_str()) {
            return Err(self.invalid(
                &v.attribute.span(),
                format!("{attribute:?} cannot hold the pointer's value: name a non-key attribute"),
            ));
        }
        reserved.push(&attribute);
        let attributes = self.attributes(&p.attributes, &reserved)?;
        let pk = self.key_template(&p.pk, &target.pk)?;
        let sk = self.sort_key_template(p.sk.as_ref(), target, spanned.span().start, "pointer")?;
        let name = match &p.name {
            Some(n) if n.get_ref().trim().is_empty() => {
                return Err(self.invalid(&n.span(), "pointer name is empty".into()))
            }
            Some(n) => n.get_ref().clone(),
            None => match &sk {
                Some(sk) if sk.text != pk.text => format!("{}/{}", pk.text, sk.text),
                _ => pk.text.clone(),
            },
        };
        Ok(Pointer {
            name,
            entity: entity.clone(),
            attribute,
            column: v.column.get_ref().clone(),
            is_max,
            def: PointerDef {
                at: self.sm.at(spanned.span().start),
                pk,
                sk,
                column_at: self.sm.at(v.column.span().start),
                format: v.format.as_ref().map(|f| *f.get_ref()).unwrap_or_default(),
                attributes,
            },
        })
    }
}
