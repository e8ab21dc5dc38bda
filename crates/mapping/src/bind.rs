//! Binding an entity to the columns its source returns, and mapping rows.

use std::collections::{HashMap, HashSet};

use serde_json::Value as Json;
use sql2ddb_core::{
    check_item, normalize_number, AttrValue, Column, Item, ItemProblem, KeyAttr, MappedItem,
    Reject, Row, SqlValue,
};

use crate::convert::{convert, convert_formatted, ConvOpts};
use crate::error::{Location, MappingError};
use crate::plan::{AttrKind, Entity, Plan};
use crate::spec::KeyType;
use crate::template::{BoundPart, BoundTemplate, Part, Template};

/// An entity bound to its source's columns: maps rows to items with no lookups by name.
///
/// Cheap to share: it is `Send + Sync` and holds only resolved indices and literals.
#[derive(Debug, Clone)]
pub struct BoundEntity {
    name: String,
    /// Values per row the source returns.
    width: usize,
    keys: Vec<KeyAttr>,
    pk: BoundKey,
    sk: Option<BoundKey>,
    fields: Vec<Field>,
    /// Keyset key columns, for `source_key`.
    key_columns: Vec<(String, usize)>,
    /// Columns shown in rejects (all but excluded ones).
    visible: Vec<(String, usize)>,
}

#[derive(Debug, Clone)]
struct BoundKey {
    attr: String,
    kind: KeyType,
    template: BoundTemplate,
    /// Column index when the template is exactly `{column}`.
    single: Option<usize>,
    role: &'static str,
}

#[derive(Debug, Clone)]
struct Field {
    attr: String,
    /// The source column, for rejects.
    column: Option<String>,
    value: FieldValue,
}

#[derive(Debug, Clone)]
enum FieldValue {
    Copy {
        idx: usize,
        opts: ConvOpts,
        formatted: bool,
    },
    Literal(AttrValue),
    Render(BoundTemplate),
}

/// SQL types a `format` may be applied to (an empty type: the source could not tell).
fn is_timestamp_type(sql_type: &str) -> bool {
    let t = sql_type.to_ascii_lowercase();
    t.is_empty() || t.contains("timestamp") || t.contains("datetime")
}

struct Binder<'a> {
    entity: &'a Entity,
    columns: &'a [Column],
    /// Usable columns by name.
    index: HashMap<&'a str, usize>,
    excluded: HashSet<&'a str>,
    available: Vec<String>,
}

impl<'a> Binder<'a> {
    fn error(&self, at: &Location, column: Option<&str>, message: String) -> MappingError {
        MappingError::Bind {
            at: at.clone(),
            entity: self.entity.name.clone(),
            column: column.map(str::to_string),
            available: self.available.clone().into_boxed_slice(),
            message,
        }
    }

    fn column(&self, name: &str, at: &Location, used_in: &str) -> Result<usize, MappingError> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        let why = if self.excluded.contains(name) {
            format!("{used_in} uses column {name:?}, which is excluded")
        } else {
            format!("{used_in} uses column {name:?}, which the source does not return")
        };
        Err(self.error(at, Some(name), why))
    }

    fn template(&self, t: &Template, used_in: &str) -> Result<BoundTemplate, MappingError> {
        let mut parts = Vec::with_capacity(t.parts.len());
        let mut names: Vec<&str> = Vec::new();
        for p in &t.parts {
            parts.push(match p {
                Part::Lit(s) => BoundPart::Lit(s.clone()),
                Part::Col(ph) => {
                    let idx =
                        self.column(&ph.column, &ph.at, &format!("{used_in} {:?}", t.text))?;
                    if !names.contains(&ph.column.as_str()) {
                        names.push(&ph.column);
                    }
                    BoundPart::Col {
                        idx,
                        name: ph.column.clone(),
                        width: ph.width,
                    }
                }
            });
        }
        Ok(BoundTemplate {
            text: t.text.clone(),
            parts,
            source_column: match names.as_slice() {
                [one] => Some(one.to_string()),
                _ => None,
            },
        })
    }

    fn key(
        &self,
        t: &Template,
        attr: &KeyAttr,
        role: &'static str,
    ) -> Result<BoundKey, MappingError> {
        let template = self.template(t, &format!("{role} template"))?;
        Ok(BoundKey {
            attr: attr.name.clone(),
            kind: match attr.kind.as_str() {
                "N" => KeyType::N,
                "B" => KeyType::B,
                _ => KeyType::S,
            },
            single: t.single_column().map(|c| self.index[c]),
            template,
            role,
        })
    }
}

impl Entity {
    /// Binds the entity to the columns its source returns, in order, and the
    /// keyset key columns actually used. Every column name in the mapping is
    /// resolved here, so [`BoundEntity::map_row`] does no lookups by name.
    pub fn bind(
        &self,
        plan: &Plan,
        columns: &[Column],
        key: &[String],
    ) -> Result<BoundEntity, MappingError> {
        let def = &self.def;
        let excluded: HashSet<&str> = def.exclude.iter().map(|(c, _)| c.as_str()).collect();
        let mut index = HashMap::with_capacity(columns.len());
        let mut available = Vec::with_capacity(columns.len());
        let mut all = HashMap::with_capacity(columns.len());
        for (i, c) in columns.iter().enumerate() {
            if all.insert(c.name.as_str(), i).is_some() {
                let b = Binder {
                    entity: self,
                    columns,
                    index,
                    excluded,
                    available,
                };
                return Err(b.error(
                    &def.at,
                    Some(&c.name),
                    format!(
                        "the source returns two columns named {:?}: alias one of them",
                        c.name
                    ),
                ));
            }
            if !excluded.contains(c.name.as_str()) {
                index.insert(c.name.as_str(), i);
                available.push(c.name.clone());
            }
        }
        let b = Binder {
            entity: self,
            columns,
            index,
            excluded,
            available,
        };
        for (name, at) in &def.exclude {
            if !all.contains_key(name.as_str()) {
                return Err(b.error(
                    at,
                    Some(name),
                    format!("exclude names column {name:?}, which the source does not return"),
                ));
            }
        }
        let key_at = def.key_at.as_ref().unwrap_or(&def.at);
        let key_columns = key
            .iter()
            .map(|k| match all.get(k.as_str()) {
                Some(&i) => Ok((k.clone(), i)),
                None => Err(b.error(
                    key_at,
                    Some(k),
                    format!("key column {k:?} is not among the source's columns"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let keys = plan.key_attrs();
        for k in &keys {
            if b.index.contains_key(k.name.as_str()) {
                return Err(b.error(
                    &def.at,
                    Some(&k.name),
                    format!(
                        "column {:?} has the name of the table's key attribute: exclude it, or alias it in a query",
                        k.name
                    ),
                ));
            }
        }
        let pk = b.key(&def.pk, &plan.target.pk, "pk")?;
        let sk = match (&def.sk, &plan.target.sk) {
            (Some(t), Some(attr)) => Some(b.key(t, attr, "sk")?),
            _ => None,
        };
        let default_opts = ConvOpts {
            nulls: def.nulls,
            ..ConvOpts::default()
        };
        let overridden: HashSet<&str> = def.attributes.iter().map(|a| a.name.as_str()).collect();
        let mut fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !b.excluded.contains(c.name.as_str()) && !overridden.contains(c.name.as_str())
            })
            .map(|(idx, c)| Field {
                attr: c.name.clone(),
                column: Some(c.name.clone()),
                value: FieldValue::Copy {
                    idx,
                    opts: default_opts,
                    formatted: false,
                },
            })
            .collect();
        for a in &def.attributes {
            let used_in = format!("attribute {:?}", a.name);
            let (column, value) = match &a.kind {
                AttrKind::Template(t) => {
                    if let Some(lit) = t.literal() {
                        (None, FieldValue::Literal(AttrValue::S(lit)))
                    } else if let Some(col) = t.single_column() {
                        let idx = b.column(
                            col,
                            &t.placeholders().next().expect("one placeholder").at,
                            &used_in,
                        )?;
                        (
                            Some(col.to_string()),
                            FieldValue::Copy {
                                idx,
                                opts: default_opts,
                                formatted: false,
                            },
                        )
                    } else {
                        let bt = b.template(t, &format!("{used_in} template"))?;
                        (bt.source_column.clone(), FieldValue::Render(bt))
                    }
                }
                AttrKind::Column {
                    column,
                    at,
                    format,
                    numeric_as,
                } => {
                    let idx = b.column(column, at, &used_in)?;
                    if let Some((_, fat)) = format {
                        let sql_type = &b.columns[idx].sql_type;
                        if !is_timestamp_type(sql_type) {
                            return Err(b.error(
                                fat,
                                Some(column),
                                format!("{used_in} has a format, but column {column:?} is {sql_type}, not a timestamp"),
                            ));
                        }
                    }
                    let opts = ConvOpts {
                        format: format.as_ref().map(|f| f.0).unwrap_or_default(),
                        numeric_as: *numeric_as,
                        nulls: def.nulls,
                    };
                    (
                        Some(column.clone()),
                        FieldValue::Copy {
                            idx,
                            opts,
                            formatted: format.is_some(),
                        },
                    )
                }
            };
            fields.push(Field {
                attr: a.name.clone(),
                column,
                value,
            });
        }
        let visible = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| !b.excluded.contains(c.name.as_str()))
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        Ok(BoundEntity {
            name: self.name.clone(),
            width: columns.len(),
            keys,
            pk,
            sk,
            fields,
            key_columns,
            visible,
        })
    }
}

impl BoundKey {
    fn value(&self, row: &[SqlValue]) -> Result<AttrValue, (Option<String>, String)> {
        if let (KeyType::B, Some(idx)) = (self.kind, self.single) {
            if let SqlValue::Bytes(b) = &row[idx] {
                return Ok(AttrValue::B(b.clone()));
            }
        }
        let text = self
            .template
            .render(row, self.role)
            .map_err(|(c, r)| (Some(c), r))?;
        Ok(match self.kind {
            KeyType::S => AttrValue::S(text),
            KeyType::B => AttrValue::B(text.into_bytes()),
            KeyType::N => AttrValue::N(normalize_number(&text).map_err(|e| {
                (
                    self.template.source_column.clone(),
                    format!(
                        "key attribute {} is of type N, but template {:?} renders {text:?}: {e}",
                        self.attr, self.template.text
                    ),
                )
            })?),
        })
    }
}

impl BoundEntity {
    /// The entity's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Maps one source row (values in the order of the bound columns) to an
    /// item checked against DynamoDB's limits, or to a [`Reject`] that names
    /// the entity, the row's key, the column at fault and the reason.
    // The signature is the engine's contract; a reject is the rare path.
    #[allow(clippy::result_large_err)]
    pub fn map_row(&self, row: &Row) -> Result<MappedItem, Reject> {
        if row.len() != self.width {
            return Err(self.reject(
                row,
                None,
                format!(
                    "row has {} values, the entity was bound to {} columns",
                    row.len(),
                    self.width
                ),
            ));
        }
        let mut item = Item::new();
        for key in std::iter::once(&self.pk).chain(&self.sk) {
            let v = key.value(row).map_err(|(c, r)| self.reject(row, c, r))?;
            item.insert(key.attr.clone(), v);
        }
        for f in &self.fields {
            let col = || f.column.clone();
            let value = match &f.value {
                FieldValue::Copy {
                    idx,
                    opts,
                    formatted: false,
                } => convert(&row[*idx], opts).map_err(|r| (col(), r)),
                FieldValue::Copy {
                    idx,
                    opts,
                    formatted: true,
                } => convert_formatted(&row[*idx], opts).map_err(|r| (col(), r)),
                FieldValue::Literal(v) => Ok(Some(v.clone())),
                FieldValue::Render(t) => t
                    .render(row, &format!("attribute {}", f.attr))
                    .map(|s| Some(AttrValue::S(s)))
                    .map_err(|(c, r)| (Some(c), r)),
            };
            match value {
                Ok(Some(v)) => {
                    item.insert(f.attr.clone(), v);
                }
                Ok(None) => {}
                Err((column, reason)) => return Err(self.reject(row, column, reason)),
            }
        }
        let size = check_item(&item, &self.keys)
            .map_err(|p| self.reject(row, self.problem_column(&p), p.to_string()))?;
        Ok(MappedItem {
            item,
            source_key: self.key_of(row),
            size,
        })
    }

    /// The row's source key: `{"column": value, …}` over the keyset key columns.
    pub fn key_of(&self, row: &Row) -> Json {
        Json::Object(
            self.key_columns
                .iter()
                .map(|(name, i)| {
                    (
                        name.clone(),
                        row.get(*i).map_or(Json::Null, SqlValue::to_json),
                    )
                })
                .collect(),
        )
    }

    fn reject(&self, row: &Row, column: Option<String>, reason: String) -> Reject {
        let shown = self
            .visible
            .iter()
            .filter_map(|(name, i)| row.get(*i).map(|v| (name.clone(), v.to_json())))
            .collect();
        Reject {
            entity: self.name.clone(),
            key: self.key_of(row),
            column,
            reason,
            row: Json::Object(shown),
        }
    }

    /// The source column behind an item problem, when one column is.
    fn problem_column(&self, p: &ItemProblem) -> Option<String> {
        match p {
            ItemProblem::MissingKey { attr }
            | ItemProblem::EmptyKey { attr }
            | ItemProblem::KeyTooLong { attr, .. }
            | ItemProblem::KeyType { attr, .. } => std::iter::once(&self.pk)
                .chain(&self.sk)
                .find(|k| &k.attr == attr)
                .and_then(|k| k.template.source_column.clone()),
            ItemProblem::TooDeep { attr, .. } | ItemProblem::EmptySet { attr } => self
                .fields
                .iter()
                .find(|f| &f.attr == attr)
                .and_then(|f| f.column.clone()),
            _ => None,
        }
    }
}
