//! `[[entity.embed]]`: child rows nested into their parent's item, as a list
//! of maps or a map of maps, to any depth (an embed may have its own embeds).

use super::shared::{AttrDef, EntitySource};
use crate::error::Location;
use crate::spec::Nulls;

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
