//! A key attribute bound to its source's columns: the table's `pk` and `sk`,
//! a pointer's, or a template filling an index key.

use sql2ddb_core::{normalize_number, AttrValue, SqlValue};

use crate::spec::KeyType;
use crate::template::{BoundPart, BoundTemplate};

#[derive(Debug, Clone)]
pub(crate) struct BoundKey {
    pub(crate) attr: String,
    pub(crate) kind: KeyType,
    pub(crate) template: BoundTemplate,
    /// Column index when the template is exactly `{column}`.
    pub(crate) single: Option<usize>,
    pub(crate) role: &'static str,
}

impl BoundKey {
    /// Whether a column the template reads is NULL in `row`.
    pub(crate) fn reads_null(&self, row: &[SqlValue]) -> bool {
        self.template
            .parts
            .iter()
            .any(|p| matches!(p, BoundPart::Col { idx, .. } if row[*idx].is_null()))
    }

    /// The key attribute's value for a row.
    pub(crate) fn value(&self, row: &[SqlValue]) -> Result<AttrValue, (Option<String>, String)> {
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
