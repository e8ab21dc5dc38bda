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
use sql2ddb_core::{Column, Row};

use crate::error::Location;
use crate::plan::{AttrDef, EntitySource};
use crate::spec::{Nulls, RawAttr};

mod bind;
mod load;

pub(crate) use bind::{bind_embeds, describe_sizes, BoundEmbed};

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
