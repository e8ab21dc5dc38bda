//! One batch of changes applied to the table: every change mapped as the
//! full load maps its row, each item's changes folded in source order into
//! its last state ([`prepare`]), then the puts and deletes written
//! (different items in parallel), all acknowledged before the caller moves
//! its checkpoint ([`write`]).

use std::collections::HashMap;

use sql2ddb_core::{KeyAttr, Row, SqlValue};
use sql2ddb_dynamo::write_pointer;
use sql2ddb_source::cdc::{ChangeBatch, ChangeOp, RowChange, TupleValue};
use sql2ddb_source::Source;

use super::entities::{ByTable, Followed};
use super::plan::{rows_of, without_unchanged, ApplyCounts, Plan, Target, Tuple};
use super::rerender;
use super::stream::BatchEnd;
use crate::error::EngineError;

/// Rows of one entity's changes: the new and old tuples, decoded.
struct Decoded {
    new: Vec<Option<Row>>,
    old: Vec<Option<Row>>,
}

/// Decodes the tuples of `changes` (all of `f`'s table) as the full load's
/// pages decode; a new tuple lacking a value (an unchanged TOASTed value)
/// is read again by key, as the row is now.
async fn decode(
    source: &Source,
    f: &Followed,
    changes: &[&RowChange],
) -> Result<Decoded, EngineError> {
    let news: Vec<Tuple<'_>> = changes
        .iter()
        .filter_map(|c| Some((c.columns.as_slice(), c.new.as_deref()?)))
        .collect();
    let mut new_rows = rows_of(source, &f.query, &news).await?;
    // Old tuples: only the key templates' columns are read from them, and
    // those are never TOASTed away; a value left out is taken as NULL.
    let olds: Vec<(&[String], Vec<TupleValue>)> = changes
        .iter()
        .filter_map(|c| Some((c.columns.as_slice(), without_unchanged(c.old.as_deref()?))))
        .collect();
    let old_refs: Vec<Tuple<'_>> = olds.iter().map(|(c, t)| (*c, t.as_slice())).collect();
    let old_rows = rows_of(source, &f.query, &old_refs).await?;
    // Rows that need reading again, by their primary key: the key is
    // decoded from the tuple (key values are never left out of it).
    let missing: Vec<usize> = (0..news.len()).filter(|&i| new_rows[i].is_none()).collect();
    if !missing.is_empty() {
        let partial: Vec<(&[String], Vec<TupleValue>)> = missing
            .iter()
            .map(|&i| (news[i].0, without_unchanged(news[i].1)))
            .collect();
        let refs: Vec<Tuple<'_>> = partial.iter().map(|(c, t)| (*c, t.as_slice())).collect();
        let keys: Vec<Vec<SqlValue>> = rows_of(source, &f.query, &refs)
            .await?
            .into_iter()
            .map(|row| {
                row.map(|r| f.query.key_of(&r))
                    .ok_or_else(|| EngineError::Entity {
                        entity: f.name.clone(),
                        message: format!("a change of {} came without its key columns", f.table),
                    })
            })
            .collect::<Result<_, _>>()?;
        let found = source.read_keys(&f.query, &keys).await?;
        for (&i, key) in missing.iter().zip(&keys) {
            new_rows[i] = found.iter().find(|r| f.query.key_of(r) == *key).cloned();
        }
    }
    // Spread back: one slot per change.
    let (mut new_it, mut old_it) = (new_rows.into_iter(), old_rows.into_iter());
    let mut out = Decoded {
        new: Vec::with_capacity(changes.len()),
        old: Vec::with_capacity(changes.len()),
    };
    for c in changes {
        out.new
            .push(c.new.as_ref().and_then(|_| new_it.next().flatten()));
        out.old
            .push(c.old.as_ref().and_then(|_| old_it.next().flatten()));
    }
    Ok(out)
}

/// A batch read and made ready to write: each item's last action, the
/// parents re-rendered, the pointer candidates, and where the batch ends.
pub(super) struct Prepared {
    plan: Plan,
    pointed: Vec<((u32, usize), Vec<Row>)>,
    /// Row changes of followed tables.
    pub changes: u64,
    /// Where the checkpoint goes once the batch is written.
    pub end: BatchEnd,
}

/// Maps `batch` (which ends at `end`) into the writes it comes to: every
/// change decoded as the full load decodes rows, each item's changes folded
/// in source order. Reads the source (decoding, re-rendering embeds) but
/// writes nothing, so it may run while the batch before is being written.
pub(super) async fn prepare(
    source: &Source,
    by_table: &ByTable,
    batch: &ChangeBatch,
    end: BatchEnd,
    keys: &[KeyAttr],
) -> Result<Prepared, EngineError> {
    let mut plan = Plan::new(keys);
    let relevant: Vec<&RowChange> = batch
        .changes
        .iter()
        .filter(|c| by_table.follows(c.oid))
        .collect();
    if let Some(t) = relevant.iter().find(|c| c.op == ChangeOp::Truncate) {
        return Err(EngineError::unfollowable(
            t.table.clone(),
            "TRUNCATE",
            format!(
                "the transaction that ends at {}",
                sql2ddb_source::cdc::format_lsn(t.commit_end)
            ),
            "a TRUNCATE empties the table without a change per row, so its items cannot be deleted one by one",
            "load the table again: a new full load of the mapping (`sql2ddb run MAPPING --follow --if-not-empty truncate`, which deletes the table's items first) copies it as it is now and follows from its own snapshot on",
        ));
    }
    // Per followed entity, its table's changes decoded in a few statements.
    let mut decoded: HashMap<(u32, usize), Decoded> = HashMap::new();
    for (oid, followed) in &by_table.parents {
        let mine: Vec<&RowChange> = relevant.iter().copied().filter(|c| c.oid == *oid).collect();
        if mine.is_empty() {
            continue;
        }
        for (i, f) in followed.iter().enumerate() {
            decoded.insert((*oid, i), decode(source, f, &mine).await?);
        }
    }
    let mut seen: HashMap<u32, usize> = HashMap::new();
    for c in &relevant {
        let Some(followed) = by_table.parents.get(&c.oid) else {
            continue;
        };
        let n = {
            let n = seen.entry(c.oid).or_insert(0);
            *n += 1;
            *n - 1
        };
        for (i, f) in followed.iter().enumerate() {
            let d = &decoded[&(c.oid, i)];
            plan.change(f, (c.oid, i), c.op, d.old[n].as_ref(), d.new[n].as_ref());
        }
    }
    // Changes of embedded rows: their parents are re-rendered.
    rerender::children_changed(source, by_table, &relevant, &mut plan.dirty).await?;
    rerender::rerender(source, by_table, &mut plan).await?;
    let pointed = plan.candidates();
    Ok(Prepared {
        plan,
        pointed,
        changes: relevant.len() as u64,
        end,
    })
}

/// Writes a prepared batch: returns once every write it implies is
/// acknowledged (the caller then moves its checkpoint to the batch's end).
pub(super) async fn write(
    by_table: &ByTable,
    prepared: Prepared,
    target: &Target<'_>,
    counts: &mut ApplyCounts,
) -> Result<(), EngineError> {
    let Prepared {
        plan,
        pointed,
        changes,
        ..
    } = prepared;
    plan.write(target, counts).await?;
    counts.changes += changes;
    // Only once the items they point at are written.
    for ((oid, i), rows) in pointed {
        for p in &by_table.parents[&oid][i].pointers {
            for update in p.candidates(&rows) {
                write_pointer(
                    target.dynamo,
                    target.table,
                    target.keys,
                    &update,
                    target.policy,
                )
                .await?;
            }
        }
    }
    Ok(())
}
