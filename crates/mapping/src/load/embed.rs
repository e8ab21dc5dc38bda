//! Loading `[[…embed]]` tables, nested to any depth, into [`Embed`]s.

use serde_spanned::Spanned;

use super::Loader;
use crate::error::{Location, MappingError};
use crate::plan::{AttrDef, Embed, EmbedDef};
use crate::spec::{EmbedAs, RawEmbed};

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
            self.check_embed_name(&e.name, siblings, reserved, &out)?;
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
            let map_key = self.map_key(e, &what)?;
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

    /// An embed's name: not empty, and not the name of a table key, a
    /// sibling attribute or an earlier embed of the same parent.
    fn check_embed_name(
        &self,
        spanned_name: &Spanned<String>,
        siblings: &[AttrDef],
        reserved: &[&str],
        earlier: &[Embed],
    ) -> Result<(), MappingError> {
        let name = spanned_name.get_ref();
        let taken = if name.trim().is_empty() {
            Some("embed name is empty".to_string())
        } else if reserved.contains(&name.as_str()) {
            Some(format!(
                "embed {name:?} has the name of a key attribute of the table"
            ))
        } else if siblings.iter().any(|a| &a.name == name) {
            Some(format!(
                "embed {name:?} has the name of an attribute of its parent"
            ))
        } else if earlier.iter().any(|o| &o.name == name) {
            Some(format!("duplicate embed name {name:?}"))
        } else {
            None
        };
        match taken {
            Some(message) => Err(self.invalid(&spanned_name.span(), message)),
            None => Ok(()),
        }
    }

    /// `map_key`, required by `as = "map"` and refused on a list.
    fn map_key(
        &self,
        e: &RawEmbed,
        what: &str,
    ) -> Result<Option<(String, Location)>, MappingError> {
        let shape = e.shape.as_ref().map(|s| *s.get_ref()).unwrap_or_default();
        Ok(match (shape, &e.map_key) {
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
        })
    }
}
