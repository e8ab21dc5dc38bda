//! `[[entity.embed]]`: child rows nested into their parent's item, as a list
//! of maps or a map of maps, to any depth (an embed may have its own embeds).
//!
//! The mapping does no IO: the engine reads the children of a page of parents
//! (see [`Entity::embeds`](crate::Entity::embeds)), groups them by parent into
//! [`ChildRows`], and [`BoundEntity::map_row_with_children`](crate::BoundEntity::map_row_with_children)
//! converts them by the same rules as the parent's own columns.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_spanned::Spanned;
use sql2ddb_core::limits::value_size;
use sql2ddb_core::{AttrValue, Column, Item, Row};

use crate::bind::{map_fields, Field};
use crate::binder::Binder;
use crate::error::{Location, MappingError};
use crate::load::Loader;
use crate::plan::{AttrDef, EntitySource};
use crate::spec::{Nulls, RawAttr};

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an [[entity.embed]] table with name, from and parent_key"
)]
pub(crate) struct RawEmbed {
    pub name: Spanned<String>,
    pub from: Option<Spanned<String>>,
    pub query: Option<Spanned<String>>,
    pub parent_key: Spanned<Vec<Spanned<String>>>,
    pub key: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub order_by: Vec<Spanned<String>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<String>>,
    #[serde(rename = "as")]
    pub shape: Option<Spanned<EmbedAs>>,
    pub map_key: Option<Spanned<String>>,
    pub nulls: Option<Nulls>,
    #[serde(default)]
    pub attributes: BTreeMap<Spanned<String>, Spanned<RawAttr>>,
    #[serde(default)]
    pub embed: Vec<Spanned<RawEmbed>>,
}

/// `as = "list" | "map"`.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EmbedAs {
    #[default]
    List,
    Map,
}

/// One `[[entity.embed]]`: what the engine reads for each page of parents.
#[derive(Debug, Clone)]
pub struct Embed {
    /// The attribute that holds the children on the parent's item.
    pub name: String,
    /// The children's table or query.
    pub from: EntitySource,
    /// Child columns that hold the parent's key, in the order of the parent's key columns.
    pub parent_key: Vec<String>,
    /// The children's own key, when declared: what nested embeds match their
    /// `parent_key` against (else the engine uses the source's primary key).
    pub key: Option<Vec<String>>,
    /// Child columns the children of one parent are ordered by.
    pub order_by: Vec<String>,
    pub(crate) def: EmbedDef,
    pub(crate) embeds: Vec<Embed>,
}

/// The parts of an embed only binding needs.
#[derive(Debug, Clone)]
pub(crate) struct EmbedDef {
    pub at: Location,
    pub parent_key_at: Location,
    pub order_by_at: Vec<Location>,
    pub exclude: Vec<(String, Location)>,
    pub nulls: Nulls,
    pub attributes: Vec<AttrDef>,
    pub map_key: Option<(String, Location)>,
}

impl Embed {
    /// Nested `[[entity.embed.embed]]`, in file order.
    pub fn embeds(&self) -> &[Embed] {
        &self.embeds
    }

    /// The map key column for `as = "map"`, `None` for a list.
    pub fn map_key(&self) -> Option<&str> {
        self.def.map_key.as_ref().map(|(c, _)| c.as_str())
    }
}

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

impl Loader<'_, '_> {
    /// The `[[…embed]]` tables of a parent whose key columns are `parent_key`
    /// (when declared) and whose attributes are `siblings`.
    pub(crate) fn embeds(
        &self,
        raw: &[Spanned<RawEmbed>],
        parent_key: Option<&[String]>,
        siblings: &[AttrDef],
        reserved: &[&str],
    ) -> Result<Vec<Embed>, MappingError> {
        let mut out: Vec<Embed> = Vec::with_capacity(raw.len());
        for spanned in raw {
            let e = spanned.get_ref();
            let name = e.name.get_ref().clone();
            let taken = if name.trim().is_empty() {
                Some("embed name is empty".to_string())
            } else if reserved.contains(&name.as_str()) {
                Some(format!(
                    "embed {name:?} has the name of a key attribute of the table"
                ))
            } else if siblings.iter().any(|a| a.name == name) {
                Some(format!(
                    "embed {name:?} has the name of an attribute of its parent"
                ))
            } else if out.iter().any(|o| o.name == name) {
                Some(format!("duplicate embed name {name:?}"))
            } else {
                None
            };
            if let Some(message) = taken {
                return Err(self.invalid(&e.name.span(), message));
            }
            let what = format!("embed {name:?}");
            let from = self.source(&e.from, &e.query, spanned.span().start, &what)?;
            let pk_list = self
                .key_columns(Some(&e.parent_key))?
                .expect("parent_key is required");
            if let Some(parent) = parent_key {
                if parent.len() != pk_list.len() {
                    return Err(self.invalid(
                        &e.parent_key.span(),
                        format!(
                            "parent_key has {} column(s), but the parent's key ({}) has {}",
                            pk_list.len(),
                            parent.join(", "),
                            parent.len()
                        ),
                    ));
                }
            }
            let key = self.key_columns(e.key.as_ref())?;
            let shape = e.shape.as_ref().map(|s| *s.get_ref()).unwrap_or_default();
            let map_key = match (shape, &e.map_key) {
                (EmbedAs::Map, Some(k)) => Some((k.get_ref().clone(), self.sm.at(k.span().start))),
                (EmbedAs::Map, None) => {
                    return Err(MappingError::MissingKey {
                        at: self.sm.at(e.shape.as_ref().expect("as = map").span().start),
                        key: "map_key".into(),
                        message: format!(
                            "{what} has as = \"map\" but no map_key: name the column whose text keys the map"
                        ),
                    })
                }
                (EmbedAs::List, Some(k)) => {
                    return Err(self.invalid(
                        &k.span(),
                        format!("{what} has a map_key but is a list: add as = \"map\""),
                    ))
                }
                (EmbedAs::List, None) => None,
            };
            let attributes = self.attributes(&e.attributes, &[])?;
            let embeds = self.embeds(&e.embed, key.as_deref(), &attributes, &[])?;
            out.push(Embed {
                name,
                from,
                parent_key: pk_list,
                key,
                order_by: e.order_by.iter().map(|c| c.get_ref().clone()).collect(),
                def: EmbedDef {
                    at: self.sm.at(spanned.span().start),
                    parent_key_at: self.sm.at(e.parent_key.span().start),
                    order_by_at: e
                        .order_by
                        .iter()
                        .map(|c| self.sm.at(c.span().start))
                        .collect(),
                    exclude: self.exclude(&e.exclude),
                    nulls: e.nulls.unwrap_or_default(),
                    attributes,
                    map_key,
                },
                embeds,
            });
        }
        Ok(out)
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
