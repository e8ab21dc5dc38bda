//! Items with embedded children: a change of the parent row or of one of
//! its children re-renders the parent's item from the source — the parent
//! row and its children as they are when the batch is applied, which is at
//! or after every change of the batch, so the item ends as the source is.

use std::collections::HashMap;

use sql2ddb_core::SqlValue;
use sql2ddb_source::cdc::{RowChange, TupleValue};
use sql2ddb_source::Source;

use super::entities::ByTable;
use super::plan::{rows_of, values_text, without_unchanged, Action, Plan, Tuple};
use crate::error::EngineError;
use crate::run::embed;

/// Marks the parents of every child row `relevant` touches — where it was
/// (old tuple) and where it is (new tuple) — for re-rendering.
pub(super) async fn children_changed(
    source: &Source,
    by_table: &ByTable,
    relevant: &[&RowChange],
    dirty: &mut HashMap<(u32, usize), Vec<Vec<SqlValue>>>,
) -> Result<(), EngineError> {
    for (oid, list) in &by_table.children {
        let mine: Vec<&RowChange> = relevant.iter().copied().filter(|c| c.oid == *oid).collect();
        if mine.is_empty() {
            continue;
        }
        let tuples: Vec<(&[String], Vec<TupleValue>)> = mine
            .iter()
            .flat_map(|c| {
                c.old
                    .iter()
                    .chain(c.new.iter())
                    .map(|t| (c.columns.as_slice(), t))
            })
            .map(|(columns, t)| (columns, without_unchanged(t)))
            .collect();
        let refs: Vec<Tuple<'_>> = tuples.iter().map(|(c, t)| (*c, t.as_slice())).collect();
        for child in list {
            let rows = rows_of(source, &child.query, &refs).await?;
            for row in rows.into_iter().flatten() {
                let key = child.query.key_of(&row);
                // A child that points at no parent belongs to no item.
                if key.iter().any(|v| matches!(v, SqlValue::Null)) {
                    continue;
                }
                dirty.entry(child.parent).or_default().push(key);
            }
        }
    }
    Ok(())
}

/// Reads every marked parent and its children again and puts its item; a
/// parent no longer there is left to the delete that removed it.
pub(super) async fn rerender(
    source: &Source,
    by_table: &ByTable,
    plan: &mut Plan,
) -> Result<(), EngineError> {
    let dirty = std::mem::take(&mut plan.dirty);
    for ((oid, i), mut keys) in dirty {
        let f = &by_table.parents[&oid][i];
        let mut seen = std::collections::HashSet::new();
        keys.retain(|k| seen.insert(format!("{k:?}")));
        let rows = source.read_keys(&f.query, &keys).await?;
        let parent_keys: Vec<Vec<SqlValue>> = rows.iter().map(|r| f.query.key_of(r)).collect();
        let children = embed::fetch(source, &f.children, &parent_keys).await?;
        for (row, children) in rows.iter().zip(children) {
            match f.bound.encode_row_with_children(row, &children) {
                Ok(item) => {
                    let k = values_text(&plan.keys, &item.key);
                    plan.pointed(f, (oid, i), &k, row);
                    plan.put_at(k, Action::Put(item));
                }
                Err(r) => {
                    // As in a full load, a rejected row has no item.
                    plan.rejects.push(r);
                    if let Ok(k) = f.bound.item_key(row) {
                        plan.put(&k, Action::Delete(k.clone()));
                    }
                }
            }
        }
    }
    Ok(())
}
