//! Binding embeds to their sources' columns, and turning a parent's child
//! rows into the embed's attribute value.
//!
//! The mapping does no IO: the engine reads the children of a page of parents
//! (see [`Entity::embeds`](crate::Entity::embeds)), groups them by parent into
//! [`ChildRows`], and [`BoundEntity::map_row_with_children`](crate::BoundEntity::map_row_with_children)
//! converts them by the same rules as the parent's own columns.

use std::collections::BTreeMap;

use sql2ddb_core::limits::value_size;
use sql2ddb_core::{AttrValue, Column, Item, Row};

use super::binder::Binder;
use super::fields::{map_fields, Field};
use crate::error::{Location, MappingError};
use crate::plan::Embed;

/// The columns an embed's source returns, given to
/// [`Entity::bind_with_children`](crate::Entity::bind_with_children): one per
/// embed, in embed order, each with its own nested embeds' shapes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildShape {
    /// The child source's columns, in the order of its rows.
    pub columns: Vec<Column>,
    /// The children's key (the embed's `key`, else the source's primary key):
    /// what nested embeds' `parent_key` match. May be empty without nested embeds.
    pub key: Vec<String>,
    /// Shapes of the nested embeds, in embed order.
    pub children: Vec<ChildShape>,
}

/// The child rows of one parent row: for each embed, in embed order, its
/// rows in the order they are to appear (the source's `order_by` order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChildRows {
    /// Per embed, the rows of this parent.
    pub embeds: Vec<Vec<ChildRow>>,
}

/// One child row and, for nested embeds, its own children.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRow {
    /// The values, in the order of the embed's bound columns.
    pub row: Row,
    /// The children of this row, per nested embed.
    pub children: ChildRows,
}

impl ChildRow {
    /// A child row without nested embeds.
    pub fn leaf(row: Row) -> Self {
        ChildRow {
            row,
            children: ChildRows::default(),
        }
    }
}

/// An embed bound to its source's columns.
#[derive(Debug, Clone)]
pub(crate) struct BoundEmbed {
    name: String,
    width: usize,
    fields: Vec<Field>,
    /// For `as = "map"`: the key column's index.
    map_key: Option<usize>,
    embeds: Vec<BoundEmbed>,
}

/// Binds `embeds` of a parent bound by `parent`, whose rows have the key
/// columns `parent_key`, to `shapes` (one per embed).
pub(crate) fn bind_embeds(
    parent: &Binder<'_>,
    embeds: &[Embed],
    parent_key: &[String],
    shapes: &[ChildShape],
    at: &Location,
) -> Result<Vec<BoundEmbed>, MappingError> {
    if embeds.len() != shapes.len() {
        return Err(parent.error(
            at,
            None,
            format!(
                "has {} embeds, but the columns of {} were given",
                embeds.len(),
                shapes.len()
            ),
        ));
    }
    embeds
        .iter()
        .zip(shapes)
        .map(|(e, shape)| bind_embed(parent, e, parent_key, shape))
        .collect()
}

fn bind_embed(
    parent: &Binder<'_>,
    e: &Embed,
    parent_key: &[String],
    shape: &ChildShape,
) -> Result<BoundEmbed, MappingError> {
    let def = &e.def;
    if parent.index.contains_key(e.name.as_str()) {
        return Err(parent.error(
            &def.at,
            Some(&e.name),
            format!(
                "column {:?} has the name of embed {:?}: exclude the column or rename the embed",
                e.name, e.name
            ),
        ));
    }
    let entity = format!("{}.{}", parent.entity, e.name);
    let (mut b, all) = Binder::new(&entity, &def.at, &shape.columns, &def.exclude)?;
    // Children follow their parent's `[source] timezone` and `invalid` default.
    b.zone = parent.zone;
    b.invalid = parent.invalid;
    if parent_key.len() != e.parent_key.len() {
        return Err(b.error(
            &def.parent_key_at,
            None,
            format!(
                "parent_key has {} column(s), but the parent's key ({}) has {}",
                e.parent_key.len(),
                parent_key.join(", "),
                parent_key.len()
            ),
        ));
    }
    let must_exist = |name: &str, at: &Location, what: &str| -> Result<usize, MappingError> {
        all.get(name).copied().ok_or_else(|| {
            b.error(
                at,
                Some(name),
                format!("{what} names column {name:?}, which the source does not return"),
            )
        })
    };
    for c in &e.parent_key {
        must_exist(c, &def.parent_key_at, "parent_key")?;
    }
    for (c, at) in e.order_by.iter().zip(&def.order_by_at) {
        must_exist(c, at, "order_by")?;
    }
    let map_key = def
        .map_key
        .as_ref()
        .map(|(c, at)| must_exist(c, at, "map_key"))
        .transpose()?;
    if !e.embeds.is_empty() && shape.key.is_empty() {
        return Err(b.error(
            &def.at,
            None,
            format!(
                "embed {:?} has nested embeds, so its rows need a key: set key = [\"col\", …] or read a table with a primary key",
                e.name
            ),
        ));
    }
    for k in &shape.key {
        must_exist(k, &def.at, "key")?;
    }
    let fields = b.fields(def.nulls, &def.attributes, true, &[])?;
    let embeds = bind_embeds(&b, &e.embeds, &shape.key, &shape.children, &def.at)?;
    Ok(BoundEmbed {
        name: e.name.clone(),
        width: shape.columns.len(),
        fields,
        map_key,
        embeds,
    })
}

impl BoundEmbed {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The embed's attribute value for one parent's children; the error
    /// names the child column (as `embed.column`) and the reason.
    pub(crate) fn value(&self, rows: &[ChildRow]) -> Result<AttrValue, (Option<String>, String)> {
        let mut list = Vec::with_capacity(if self.map_key.is_none() {
            rows.len()
        } else {
            0
        });
        let mut map = BTreeMap::new();
        for (n, child) in rows.iter().enumerate() {
            let at = |column: Option<String>, reason: String| {
                (
                    column.map(|c| format!("{}.{c}", self.name)),
                    format!("embed {}, child row {}: {reason}", self.name, n + 1),
                )
            };
            if child.row.len() != self.width {
                return Err(at(
                    None,
                    format!(
                        "has {} values, the embed was bound to {} columns",
                        child.row.len(),
                        self.width
                    ),
                ));
            }
            if child.children.embeds.len() != self.embeds.len() {
                return Err(at(
                    None,
                    format!(
                        "came with the children of {} embeds, the embed has {}",
                        child.children.embeds.len(),
                        self.embeds.len()
                    ),
                ));
            }
            let mut m = Item::new();
            map_fields(&self.fields, &child.row, &mut m).map_err(|(c, r)| at(c, r))?;
            for (e, rows) in self.embeds.iter().zip(&child.children.embeds) {
                m.insert(e.name.clone(), e.value(rows).map_err(|(c, r)| at(c, r))?);
            }
            match self.map_key {
                None => list.push(AttrValue::M(m)),
                Some(idx) => {
                    let Some(key) = child.row[idx].to_text() else {
                        return Err(at(
                            None,
                            format!(
                                "its map key is {:?}, which has no text form",
                                child.row[idx]
                            ),
                        ));
                    };
                    if map.insert(key.clone(), AttrValue::M(m)).is_some() {
                        return Err(at(
                            None,
                            format!("map key {key:?} appears twice among this parent's children (one would overwrite the other)"),
                        ));
                    }
                }
            }
        }
        Ok(match self.map_key {
            None => AttrValue::L(list),
            Some(_) => AttrValue::M(map),
        })
    }
}

/// `; embed lines holds 5000 child rows (480012 bytes)` for each embed of an
/// item found too large, largest first.
pub(crate) fn describe_sizes(embeds: &[BoundEmbed], item: &Item, children: &ChildRows) -> String {
    let mut sizes: Vec<(usize, &str, usize)> = embeds
        .iter()
        .zip(&children.embeds)
        .map(|(e, rows)| {
            let size = item
                .get(&e.name)
                .map_or(0, |v| e.name.len() + value_size(v));
            (size, e.name.as_str(), rows.len())
        })
        .collect();
    sizes.sort_by_key(|s| std::cmp::Reverse(s.0));
    sizes
        .iter()
        .map(|(size, name, count)| {
            format!("; embed {name} holds {count} child rows ({size} bytes)")
        })
        .collect()
}
