//! `UnprocessedItems` matched to the items sent, by primary key.
//!
//! DynamoDB may return an unprocessed item in another encoding than the one
//! sent: attributes and set elements in another order, a number in another
//! normal form, binary in another base64 spelling. Only its primary key is
//! sure to identify it, so each returned item is found among the chunk's by
//! its key values, typed as the table's key schema defines them. A returned
//! item that matches none sent, a key returned twice or a request that is
//! not a put of ours makes the whole chunk unprocessed: puts are idempotent,
//! so sending the rest again costs capacity, never an item.

use sql2ddb_core::{normalize_number, AttrValue, EncodedItem, Item, KeyAttr};

/// One request DynamoDB returned unprocessed for our table.
#[derive(Debug, Clone, PartialEq)]
pub enum Returned {
    /// A put request, with the item as the service wrote it back.
    Put(Item),
    /// Anything else (a delete request, or an empty one): never ours.
    Other,
}

/// The indices of `items` that `returned` names, in order; every index when
/// the answer cannot be matched item for item (see the module's
/// documentation).
pub fn match_by_key(items: &[&EncodedItem], keys: &[KeyAttr], returned: &[Returned]) -> Vec<usize> {
    let everything = || (0..items.len()).collect();
    if returned.len() > items.len() {
        return everything();
    }
    let mut found = vec![false; items.len()];
    for r in returned {
        let Returned::Put(item) = r else {
            return everything();
        };
        let hits: Vec<usize> = items
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                keys.iter().zip(&m.key).all(|(k, ours)| {
                    item.get(&k.name)
                        .is_some_and(|theirs| same_key_value(ours, theirs))
                })
            })
            .map(|(i, _)| i)
            .collect();
        match hits[..] {
            [i] if !found[i] => found[i] = true,
            // No item of ours, one returned twice, or two of ours alike.
            _ => return everything(),
        }
    }
    found
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.then_some(i))
        .collect()
}

/// Whether two values of a key attribute are the same value: numbers by
/// their value, strings and binary by their content.
fn same_key_value(a: &AttrValue, b: &AttrValue) -> bool {
    match (a, b) {
        (AttrValue::N(x), AttrValue::N(y)) => {
            x == y
                || matches!(
                    (normalize_number(x), normalize_number(y)),
                    (Ok(x), Ok(y)) if x == y
                )
        }
        (AttrValue::S(x), AttrValue::S(y)) => x == y,
        (AttrValue::B(x), AttrValue::B(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
