//! An entity's item key alone, for following changes: a deleted row's item
//! is removed by its key, rendered from the row's identity (its old tuple)
//! without mapping the rest of the row.

use sql2ddb_core::{Item, Reject, Row};

use crate::bind::BoundEntity;
use crate::template::BoundPart;

impl BoundEntity {
    /// The item key (`pk` and `sk` attributes) a row maps to, rendered by
    /// the same templates and conversions as [`BoundEntity::map_row`]; only
    /// the columns of [`BoundEntity::key_template_columns`] are read.
    #[allow(clippy::result_large_err)]
    pub fn item_key(&self, row: &Row) -> Result<Item, Reject> {
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
        let localized = self.localize(row);
        let values = localized.as_ref().unwrap_or(row);
        let mut item = Item::new();
        for key in std::iter::once(&self.pk).chain(&self.sk) {
            let v = key.value(values).map_err(|(c, r)| self.reject(row, c, r))?;
            item.insert(key.attr.clone(), v);
        }
        Ok(item)
    }

    /// Positions (within a row) of the columns the item key templates read,
    /// in order, each once.
    pub fn key_template_columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for key in std::iter::once(&self.pk).chain(&self.sk) {
            for part in &key.template.parts {
                if let BoundPart::Col { idx, .. } = part {
                    if !out.contains(idx) {
                        out.push(*idx);
                    }
                }
            }
        }
        out
    }

    /// Whether the entity nests child rows (`[[entity.embed]]`).
    pub fn has_embeds(&self) -> bool {
        !self.embeds.is_empty()
    }
}
