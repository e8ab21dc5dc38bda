//! The attributes of an item: which columns, literals and templates fill
//! them (bound once), and filling them for a row.

use std::collections::HashSet;

use sql2ddb_core::{AttrValue, Item, SqlValue};

use super::binder::{is_timestamp_type, Binder};
use super::gsi::IndexKey;
use super::key::BoundKey;
use crate::convert::{convert, convert_formatted, ConvOpts};
use crate::error::MappingError;
use crate::plan::{AttrDef, AttrKind};
use crate::spec::Nulls;
use crate::template::{BoundTemplate, Template};

/// One attribute of an item (or of an embedded child's map) and where its value comes from.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub attr: String,
    /// The source column, for rejects.
    pub column: Option<String>,
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
    /// A template filling an index key: rendered into the key's type, and
    /// left out when one of its columns is NULL (the item is then not in
    /// that index, a sparse index) instead of rejecting the row.
    RenderKey(BoundKey),
}

impl Binder<'_> {
    /// The attributes of a row: every usable column copied under its own name
    /// (when `copy_columns`), then `attributes`, which override same-named
    /// columns. A template filling an index key renders into the key's type,
    /// as pk/sk do, and is left out when one of its columns is NULL.
    pub(crate) fn fields(
        &self,
        nulls: Nulls,
        attributes: &[AttrDef],
        copy_columns: bool,
        index_keys: &[IndexKey],
    ) -> Result<Vec<Field>, MappingError> {
        let default_opts = ConvOpts {
            nulls,
            invalid: self.invalid,
            zone: self.zone,
            ..ConvOpts::default()
        };
        let mut fields: Vec<Field> = if copy_columns {
            self.copied_columns(attributes, default_opts)
        } else {
            Vec::new()
        };
        for a in attributes {
            let used_in = format!("attribute {:?}", a.name);
            let index_key = index_keys.iter().find(|k| k.attr.name == a.name);
            let (column, value) = match &a.kind {
                AttrKind::Template(t) => {
                    self.template_value(t, index_key, &used_in, default_opts)?
                }
                AttrKind::Column {
                    column,
                    at,
                    format,
                    numeric_as,
                    kind,
                    invalid,
                } => {
                    let idx = self.column(column, at, &used_in)?;
                    if let Some((_, fat)) = format {
                        let sql_type = &self.columns[idx].sql_type;
                        if !is_timestamp_type(sql_type) {
                            return Err(self.error(
                                fat,
                                Some(column),
                                format!("{used_in} has a format, but column {column:?} is {sql_type}, not a timestamp"),
                            ));
                        }
                    }
                    let opts = ConvOpts {
                        format: format.as_ref().map(|f| f.0).unwrap_or_default(),
                        numeric_as: *numeric_as,
                        nulls,
                        invalid: invalid.unwrap_or(self.invalid),
                        kind: *kind,
                        zone: self.zone,
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
        Ok(fields)
    }

    /// Every usable column not overridden by `attributes`, copied under its own name.
    fn copied_columns(&self, attributes: &[AttrDef], opts: ConvOpts) -> Vec<Field> {
        let overridden: HashSet<&str> = attributes.iter().map(|a| a.name.as_str()).collect();
        self.columns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !self.excluded.contains(c.name.as_str()) && !overridden.contains(c.name.as_str())
            })
            .map(|(idx, c)| Field {
                attr: c.name.clone(),
                column: Some(c.name.clone()),
                value: FieldValue::Copy {
                    idx,
                    opts,
                    formatted: false,
                },
            })
            .collect()
    }

    /// A template attribute: a rendered index key, a literal, a copy of its
    /// one column (exactly `{col}`), or rendered text; with its source column.
    fn template_value(
        &self,
        t: &Template,
        index_key: Option<&IndexKey>,
        used_in: &str,
        opts: ConvOpts,
    ) -> Result<(Option<String>, FieldValue), MappingError> {
        if let (Some(k), None) = (index_key, t.single_column()) {
            let role = if k.partition { "index pk" } else { "index sk" };
            let key = self.key(t, &k.attr, role)?;
            return Ok((
                key.template.source_column.clone(),
                FieldValue::RenderKey(key),
            ));
        }
        Ok(if let Some(lit) = t.literal() {
            (None, FieldValue::Literal(AttrValue::S(lit)))
        } else if let Some(col) = t.single_column() {
            let idx = self.column(
                col,
                &t.placeholders().next().expect("one placeholder").at,
                used_in,
            )?;
            (
                Some(col.to_string()),
                FieldValue::Copy {
                    idx,
                    opts,
                    formatted: false,
                },
            )
        } else {
            let bt = self.template(t, &format!("{used_in} template"))?;
            (bt.source_column.clone(), FieldValue::Render(bt))
        })
    }
}

/// Adds the values of `fields` for `row` to `item`; the error names the
/// column at fault (when one is) and the reason.
pub(crate) fn map_fields(
    fields: &[Field],
    row: &[SqlValue],
    item: &mut Item,
) -> Result<(), (Option<String>, String)> {
    for f in fields {
        if let Some(v) = f.value(row)? {
            item.insert(f.attr.clone(), v);
        }
    }
    Ok(())
}

impl Field {
    /// The attribute's value for `row`, `None` when it is left out (a NULL
    /// omitted, a sparse index key); the error names the column at fault
    /// (when one is) and the reason.
    pub(crate) fn value(
        &self,
        row: &[SqlValue],
    ) -> Result<Option<AttrValue>, (Option<String>, String)> {
        let col = || self.column.clone();
        match &self.value {
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
                .render(row, &format!("attribute {}", self.attr))
                .map(|s| Some(AttrValue::S(s)))
                .map_err(|(c, r)| (Some(c), r)),
            FieldValue::RenderKey(k) if k.reads_null(row) => Ok(None),
            FieldValue::RenderKey(k) => k.value(row).map(Some),
        }
    }
}
