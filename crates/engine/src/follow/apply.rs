//! One batch of changes applied to the table: every change mapped as the
//! full load maps its row, each item's changes folded in source order into
//! its last state, then the puts and deletes written (different items in
//! parallel), all acknowledged before the caller moves the slot.

use std::collections::HashMap;

use futures::StreamExt;
use sql2ddb_core::{EncodedItem, Item, KeyAttr, Reject, Row, SqlValue};
use sql2ddb_dynamo::{delete_item, write_pointer, Dynamo, RetryPolicy, TableWriter};
use sql2ddb_source::cdc::{ChangeBatch, ChangeOp, RowChange, TupleValue};
use sql2ddb_source::Source;

use super::entities::{ByTable, Followed};
use super::rerender;
use crate::error::EngineError;
use crate::rejects::RejectsFile;

/// Deletes in flight at once.
const DELETES_IN_FLIGHT: usize = 16;

/// What applying batches did, summed.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ApplyCounts {
    /// Row changes read from the slot (of followed tables).
    pub changes: u64,
    /// Items put.
    pub puts: u64,
    /// Items deleted (deleted rows, and old keys of rows whose key changed).
    pub deletes: u64,
    /// Changes folded into a later change of the same item in their batch.
    pub folded: u64,
    /// Rows that could not become items, written to the rejects file.
    pub rejected: u64,
}

/// Where one item ends up after a batch.
pub(super) enum Action {
    Put(EncodedItem),
    Delete(Item),
}

/// The table an apply writes to.
pub(super) struct Target<'a> {
    pub dynamo: &'a Dynamo,
    pub writer: &'a TableWriter,
    pub table: &'a str,
    pub keys: &'a [KeyAttr],
    pub policy: &'a RetryPolicy,
    pub rejects: &'a RejectsFile,
}

/// The text an item key is folded under.
pub(super) fn key_text(key: &Item) -> String {
    let mut pairs: Vec<_> = key.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    pairs.sort();
    pairs.join("\u{1f}")
}

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

/// A tuple and the column names it carries values of, in order.
pub(super) type Tuple<'a> = (&'a [String], &'a [TupleValue]);

/// [`Source::rows_of_tuples`] for tuples that may carry different columns
/// (the table was altered between them): each run of tuples with the same
/// columns is decoded by its own statements.
pub(super) async fn rows_of(
    source: &Source,
    q: &sql2ddb_source::PageQuery,
    tuples: &[Tuple<'_>],
) -> Result<Vec<Option<Row>>, EngineError> {
    let mut out = Vec::with_capacity(tuples.len());
    let mut start = 0;
    while start < tuples.len() {
        let columns = tuples[start].0;
        let end = (start..tuples.len())
            .find(|&i| tuples[i].0 != columns)
            .unwrap_or(tuples.len());
        let run: Vec<&[TupleValue]> = tuples[start..end].iter().map(|t| t.1).collect();
        out.extend(source.rows_of_tuples(q, columns, &run).await?);
        start = end;
    }
    Ok(out)
}

/// A tuple with its left-out values taken as NULL.
pub(super) fn without_unchanged(t: &[TupleValue]) -> Vec<TupleValue> {
    t.iter()
        .map(|v| match v {
            TupleValue::Unchanged => TupleValue::Null,
            other => other.clone(),
        })
        .collect()
}

/// Applies `batch`: returns once every write it implies is acknowledged.
pub(super) async fn apply(
    source: &Source,
    by_table: &ByTable,
    batch: &ChangeBatch,
    target: &Target<'_>,
    counts: &mut ApplyCounts,
) -> Result<(), EngineError> {
    let mut plan = Plan {
        keys: target.keys.to_vec(),
        ..Plan::default()
    };
    let relevant: Vec<&RowChange> = batch
        .changes
        .iter()
        .filter(|c| by_table.follows(c.oid))
        .collect();
    counts.changes += relevant.len() as u64;
    if let Some(t) = relevant.iter().find(|c| c.op == ChangeOp::Truncate) {
        return Err(EngineError::Config(format!(
            "table {} was truncated: a TRUNCATE cannot be followed item by item; run the full load again (a new run) to copy the table as it is now",
            t.table
        )));
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
    plan.write(target, counts).await?;
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

/// What a batch comes to: each item's last action, rejects, and the
/// parents (by entity and key) to re-render from the source.
#[derive(Default)]
pub(super) struct Plan {
    /// The table's key attributes.
    pub(super) keys: Vec<KeyAttr>,
    actions: HashMap<String, Action>,
    pub(super) rejects: Vec<Reject>,
    folded: u64,
    /// Per entity (table OID, position), the keys of parents whose item is
    /// re-rendered from the source after the batch.
    pub(super) dirty: HashMap<(u32, usize), Vec<Vec<SqlValue>>>,
    /// Per entity with pointers, the rows whose items are put: the
    /// pointers' candidates once those writes are acknowledged.
    pub(super) pointed: HashMap<(u32, usize), Vec<(String, Row)>>,
}

impl Plan {
    /// Keeps `row` (of the entity at `at`, whose item has key `key`) as a
    /// pointer candidate.
    pub(super) fn pointed(&mut self, f: &Followed, at: (u32, usize), key: &Item, row: &Row) {
        if !f.pointers.is_empty() {
            self.pointed
                .entry(at)
                .or_default()
                .push((key_text(key), row.clone()));
        }
    }

    /// The pointer candidates whose items the batch still puts (a row put,
    /// then deleted in the same batch, points at nothing).
    fn candidates(&mut self) -> Vec<((u32, usize), Vec<Row>)> {
        std::mem::take(&mut self.pointed)
            .into_iter()
            .map(|(at, rows)| {
                let kept = rows
                    .into_iter()
                    .filter(|(k, _)| matches!(self.actions.get(k), Some(Action::Put(_))))
                    .map(|(_, row)| row)
                    .collect();
                (at, kept)
            })
            .collect()
    }

    pub(super) fn put(&mut self, key: &Item, a: Action) {
        if self.actions.insert(key_text(key), a).is_some() {
            self.folded += 1;
        }
    }

    /// One change of entity `f` (at `at`), folded in.
    fn change(
        &mut self,
        f: &Followed,
        at: (u32, usize),
        op: ChangeOp,
        old: Option<&Row>,
        new: Option<&Row>,
    ) {
        // The old item goes when the row is deleted, or moved to another key.
        let old_key = old.and_then(|row| match f.bound.item_key(row) {
            Ok(k) => Some(k),
            Err(r) => {
                self.rejects.push(r);
                None
            }
        });
        match op {
            ChangeOp::Delete => {
                if let Some(k) = old_key {
                    self.put(&k, Action::Delete(k.clone()));
                }
            }
            ChangeOp::Insert | ChangeOp::Update => {
                // Read again by key and gone: a later delete says so.
                let Some(row) = new else { return };
                let new_key = f.bound.item_key(row).ok();
                if let (Some(old), Some(new)) = (&old_key, &new_key) {
                    if key_text(old) != key_text(new) {
                        self.put(old, Action::Delete(old.clone()));
                    }
                }
                if !f.children.is_empty() {
                    // Rendered with its children after the batch.
                    self.dirty.entry(at).or_default().push(f.query.key_of(row));
                    return;
                }
                match f.bound.encode_row(row) {
                    Ok(item) => {
                        let k = item.key_item(&self.keys);
                        self.put(&k, Action::Put(item));
                        self.pointed(f, at, &k, row);
                    }
                    Err(r) => {
                        // As in a full load, a rejected row has no item.
                        self.rejects.push(r);
                        if let Some(k) = new_key {
                            self.put(&k, Action::Delete(k.clone()));
                        }
                    }
                }
            }
            ChangeOp::Truncate => unreachable!("refused above"),
        }
    }

    /// Writes the batch's puts and deletes; returns once all are acknowledged.
    async fn write(self, target: &Target<'_>, counts: &mut ApplyCounts) -> Result<(), EngineError> {
        counts.rejected += self.rejects.len() as u64;
        counts.folded += self.folded;
        target.rejects.write(&self.rejects)?;
        target.rejects.flush()?;
        let mut puts = Vec::new();
        let mut deletes = Vec::new();
        for (_, a) in self.actions {
            match a {
                Action::Put(item) => puts.push(item),
                Action::Delete(key) => deletes.push(key),
            }
        }
        let (n_puts, n_deletes) = (puts.len() as u64, deletes.len() as u64);
        let (written, deleted) = tokio::join!(target.writer.write(puts), async {
            futures::stream::iter(deletes.iter())
                .map(|k| delete_item(target.dynamo, target.table, target.keys, k, target.policy))
                .buffer_unordered(DELETES_IN_FLIGHT)
                .collect::<Vec<_>>()
                .await
        });
        for d in deleted {
            d?;
        }
        let first = written
            .failed
            .first()
            .map(|(item, why)| (item, why.clone()))
            .or(written
                .rejected
                .first()
                .map(|(item, e)| (item, e.message.clone())));
        if let Some((item, why)) = first {
            return Err(EngineError::Config(format!(
                "{} item(s) not written (first: row {}: {why}); the slot stays where it was, so following again retries them",
                written.failed.len() + written.rejected.len(),
                item.source_key.get(),
            )));
        }
        counts.puts += n_puts;
        counts.deletes += n_deletes;
        Ok(())
    }
}
