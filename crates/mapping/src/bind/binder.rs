//! Resolving the column names of a mapping against the columns a source
//! returns: the one place that turns names into row indices and explains a
//! name that does not resolve.

use std::collections::{HashMap, HashSet};

use sql2ddb_core::{Column, KeyAttr};

use super::key::BoundKey;
use crate::error::{Location, MappingError};
use crate::spec::Invalid;
use crate::template::{BoundPart, BoundTemplate, Part, Template};

/// SQL types a `format` may be applied to (an empty type: the source could not tell).
pub(crate) fn is_timestamp_type(sql_type: &str) -> bool {
    let t = sql_type.to_ascii_lowercase();
    t.is_empty() || t.contains("timestamp") || t.contains("datetime")
}

/// Resolves the column names of one entity, embed or pointer against the columns its source returns.
pub(crate) struct Binder<'a> {
    /// The entity name in messages (`order`, or `order.lines` for an embed).
    pub entity: &'a str,
    pub columns: &'a [Column],
    /// Usable columns by name.
    pub index: HashMap<&'a str, usize>,
    /// Every column by name, excluded ones included: templates may read an
    /// excluded column (a key made of a column that is no attribute).
    all: HashMap<&'a str, usize>,
    pub excluded: HashSet<&'a str>,
    pub available: Vec<String>,
    /// `invalid` of attributes that do not set their own.
    pub invalid: Invalid,
    /// `[source] timezone`, for zone-less timestamps.
    pub zone: Option<chrono_tz::Tz>,
}

impl<'a> Binder<'a> {
    /// A binder over `columns` minus `exclude`, which must all be columns; `at`
    /// is the place of the entity (or embed) for errors about the whole row.
    /// Also returns every column by name, excluded ones included.
    pub(crate) fn new(
        entity: &'a str,
        at: &Location,
        columns: &'a [Column],
        exclude: &'a [(String, Location)],
    ) -> Result<(Binder<'a>, HashMap<&'a str, usize>), MappingError> {
        let excluded: HashSet<&str> = exclude.iter().map(|(c, _)| c.as_str()).collect();
        let mut index = HashMap::with_capacity(columns.len());
        let mut available = Vec::with_capacity(columns.len());
        let mut all = HashMap::with_capacity(columns.len());
        let mut duplicate = None;
        for (i, c) in columns.iter().enumerate() {
            if all.insert(c.name.as_str(), i).is_some() {
                duplicate.get_or_insert(c.name.as_str());
            }
            if !excluded.contains(c.name.as_str()) {
                index.insert(c.name.as_str(), i);
                available.push(c.name.clone());
            }
        }
        let b = Binder {
            entity,
            columns,
            index,
            all: all.clone(),
            excluded,
            available,
            invalid: Invalid::default(),
            zone: None,
        };
        if let Some(name) = duplicate {
            return Err(b.error(
                at,
                Some(name),
                format!("the source returns two columns named {name:?}: alias one of them"),
            ));
        }
        for (name, at) in exclude {
            if !all.contains_key(name.as_str()) {
                return Err(b.error(
                    at,
                    Some(name),
                    format!("exclude names column {name:?}, which the source does not return"),
                ));
            }
        }
        Ok((b, all))
    }

    pub(crate) fn error(
        &self,
        at: &Location,
        column: Option<&str>,
        message: String,
    ) -> MappingError {
        MappingError::Bind {
            at: at.clone(),
            entity: self.entity.to_string(),
            column: column.map(str::to_string),
            available: self.available.clone().into_boxed_slice(),
            message,
        }
    }

    pub(crate) fn column(
        &self,
        name: &str,
        at: &Location,
        used_in: &str,
    ) -> Result<usize, MappingError> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        let why = if self.excluded.contains(name) {
            format!("{used_in} uses column {name:?}, which is excluded")
        } else {
            let known = self.available.iter().map(String::as_str);
            match sql2ddb_core::suggest::closest(name, known) {
                Some(near) => format!(
                    "{used_in} uses column {name:?}, which the source does not return; did you mean {near:?}?"
                ),
                None => format!("{used_in} uses column {name:?}, which the source does not return"),
            }
        };
        Err(self.error(at, Some(name), why))
    }

    pub(crate) fn template(
        &self,
        t: &Template,
        used_in: &str,
    ) -> Result<BoundTemplate, MappingError> {
        let mut parts = Vec::with_capacity(t.parts.len());
        let mut names: Vec<&str> = Vec::new();
        for p in &t.parts {
            parts.push(match p {
                Part::Lit(s) => BoundPart::Lit(s.clone()),
                Part::Col(ph) => {
                    let idx = match self.all.get(ph.column.as_str()) {
                        Some(&i) => i,
                        None => {
                            self.column(&ph.column, &ph.at, &format!("{used_in} {:?}", t.text))?
                        }
                    };
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

    pub(crate) fn key(
        &self,
        t: &Template,
        attr: &KeyAttr,
        role: &'static str,
    ) -> Result<BoundKey, MappingError> {
        let template = self.template(t, &format!("{role} template"))?;
        Ok(BoundKey {
            attr: attr.name.clone(),
            kind: attr.kind,
            single: t.single_column().map(|c| self.all[c]),
            template,
            role,
        })
    }
}
