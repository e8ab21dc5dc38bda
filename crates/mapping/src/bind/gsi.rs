//! The map-time check of index key attributes (an item without one is fine,
//! a sparse index; a wrong type is not).

use sql2ddb_core::limits::{MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES};
use sql2ddb_core::{AttrValue, Attrs, KeyAttr};

use crate::plan::Gsi;

/// Key attributes of the indexes that are not the table's own keys (those
/// are checked by `check_item`): name, type, the first index using it, and
/// whether it is that index's partition key.
#[derive(Debug, Clone)]
pub(crate) struct IndexKey {
    pub attr: KeyAttr,
    pub index: String,
    pub partition: bool,
}

/// The index key attributes to check on every item.
pub(crate) fn index_keys(gsis: &[Gsi], table_keys: &[KeyAttr]) -> Vec<IndexKey> {
    let mut out: Vec<IndexKey> = Vec::new();
    for g in gsis {
        for (i, k) in g.keys().into_iter().enumerate() {
            if table_keys.iter().any(|t| t.name == k.name)
                || out.iter().any(|o| o.attr.name == k.name)
            {
                continue;
            }
            out.push(IndexKey {
                attr: k,
                index: g.name.clone(),
                partition: i == 0,
            });
        }
    }
    out
}

/// Checks the index key attributes an item carries: a missing one leaves the
/// item out of that index (sparse), but one of another type, empty or too
/// long would fail the whole write. Returns (attribute, reason).
pub(crate) fn check_index_keys<A: Attrs + ?Sized>(
    item: &A,
    keys: &[IndexKey],
) -> Result<(), (String, String)> {
    for k in keys {
        let Some(v) = item.attr(&k.attr.name) else {
            continue;
        };
        let role = if k.partition { "partition" } else { "sort" };
        if v.type_name() != k.attr.kind.as_str() {
            return Err((
                k.attr.name.clone(),
                format!(
                    "attribute {} is of type {}, but it is the {role} key of index {}, of type {}",
                    k.attr.name,
                    v.type_name(),
                    k.index,
                    k.attr.kind
                ),
            ));
        }
        let size = match v {
            AttrValue::S(s) => s.len(),
            AttrValue::B(b) => b.len(),
            _ => 1,
        };
        if size == 0 {
            return Err((
                k.attr.name.clone(),
                format!(
                    "attribute {} is empty, but it is the {role} key of index {} (DynamoDB forbids empty key values)",
                    k.attr.name, k.index
                ),
            ));
        }
        let limit = if k.partition {
            MAX_PARTITION_KEY_BYTES
        } else {
            MAX_SORT_KEY_BYTES
        };
        if size > limit {
            return Err((
                k.attr.name.clone(),
                format!(
                    "attribute {} is {size} bytes, over DynamoDB's limit of {limit} for the {role} key of index {}",
                    k.attr.name, k.index
                ),
            ));
        }
    }
    Ok(())
}
