//! What a batch of changes comes to, shared by the apply and the
//! re-rendering of embeds: each item's last action (put or delete), the
//! rejects, the parents to re-render, and the writes that carry it out.

use std::collections::HashMap;

use futures::StreamExt;
use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr, Reject, Row, SqlValue};
use sql2ddb_dynamo::{delete_item, Dynamo, DynamoError, Failure, RetryPolicy, TableWriter};
use sql2ddb_source::cdc::{ChangeOp, TupleValue};
use sql2ddb_source::Source;

use super::entities::Followed;
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
    pairs_text(key.iter().map(|(k, v)| (k.as_str(), v)))
}

/// [`key_text`] of the key attributes named `keys` with values `values`
/// (an encoded item's key), without making the key an [`Item`] first.
pub(super) fn values_text(keys: &[KeyAttr], values: &[AttrValue]) -> String {
    pairs_text(keys.iter().map(|k| k.name.as_str()).zip(values))
}

fn pairs_text<'a>(pairs: impl Iterator<Item = (&'a str, &'a AttrValue)>) -> String {
    let mut pairs: Vec<_> = pairs.map(|(k, v)| format!("{k}={v:?}")).collect();
    pairs.sort();
    pairs.join("\u{1f}")
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
    /// An empty plan for a table keyed by `keys`.
    pub(super) fn new(keys: &[KeyAttr]) -> Self {
        Plan {
            keys: keys.to_vec(),
            ..Plan::default()
        }
    }

    /// Keeps `row` (of the entity at `at`, whose item's key has text
    /// `key`, see [`key_text`]) as a pointer candidate.
    pub(super) fn pointed(&mut self, f: &Followed, at: (u32, usize), key: &str, row: &Row) {
        if !f.pointers.is_empty() {
            self.pointed
                .entry(at)
                .or_default()
                .push((key.to_string(), row.clone()));
        }
    }

    /// The pointer candidates whose items the batch still puts (a row put,
    /// then deleted in the same batch, points at nothing).
    pub(super) fn candidates(&mut self) -> Vec<((u32, usize), Vec<Row>)> {
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
        self.put_at(key_text(key), a);
    }

    /// [`Plan::put`] of a key given as its [`key_text`].
    pub(super) fn put_at(&mut self, key: String, a: Action) {
        if self.actions.insert(key, a).is_some() {
            self.folded += 1;
        }
    }

    /// One change of entity `f` (at `at`), folded in.
    pub(super) fn change(
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
                let Some(row) = new else {
                    // Read again by key (a TOASTed value left out) and gone
                    // since: a later change of the stream says where the
                    // row went, but only this one says where it was, so
                    // its item goes by the key the change names.
                    if let Some(old) = &old_key {
                        self.put(old, Action::Delete(old.clone()));
                    }
                    return;
                };
                // Rendered only when needed: encoding the row renders it too.
                let new_key = || f.bound.item_key(row).ok();
                if let Some(old) = &old_key {
                    if new_key().is_some_and(|new| key_text(old) != key_text(&new)) {
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
                        let k = values_text(&self.keys, &item.key);
                        self.pointed(f, at, &k, row);
                        self.put_at(k, Action::Put(item));
                    }
                    Err(r) => {
                        // As in a full load, a rejected row has no item.
                        self.rejects.push(r);
                        if let Some(k) = new_key() {
                            self.put(&k, Action::Delete(k.clone()));
                        }
                    }
                }
            }
            ChangeOp::Truncate => unreachable!("refused above"),
        }
    }

    /// Writes the batch's puts and deletes; returns once all are acknowledged.
    pub(super) async fn write(
        self,
        target: &Target<'_>,
        counts: &mut ApplyCounts,
    ) -> Result<(), EngineError> {
        counts.rejected += self.rejects.len() as u64;
        counts.folded += self.folded;
        target.rejects.write(&self.rejects).await?;
        target.rejects.flush().await?;
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
        let not_written = written.failed.len() + written.rejected.len();
        let slot_kept = "the slot stays where it was, so following again retries them";
        if let Some((item, why)) = written.unwritten.first() {
            // The table kept refusing them (throttled) past the budget: not
            // the rows' fault; following again later writes them.
            return Err(EngineError::Dynamo(DynamoError::KeptRefusing {
                table: target.table.to_string(),
                items: written.unwritten.len() as u64,
                first: format!("row {}: {why}; {slot_kept}", item.source_key.get()),
            }));
        }
        // The service could not be reached or kept refusing (retries
        // spent), or the table cannot be written at all: DynamoDB's
        // failure, whichever item met it first, never a setting's.
        let unavailable = written
            .failed
            .first()
            .map(|(item, why)| (item, why.clone(), written.failed_by))
            .or(written
                .rejected
                .iter()
                .find(|(_, e)| e.failure == Failure::TableFault)
                .map(|(item, e)| (item, e.message.clone(), Some(e.failure))));
        if let Some((item, why, failure)) = unavailable {
            return Err(EngineError::Dynamo(DynamoError::Call {
                operation: "BatchWriteItem",
                table: target.table.to_string(),
                message: format!(
                    "{not_written} item(s) not written (first: row {}: {why}); {slot_kept}",
                    item.source_key.get()
                ),
                failure: Some(failure.unwrap_or(Failure::Transient)),
            }));
        }
        if let Some((item, e)) = written.rejected.first() {
            return Err(EngineError::Config(format!(
                "{not_written} item(s) not written (first: row {}: {}); {slot_kept}",
                item.source_key.get(),
                e.message
            )));
        }
        counts.puts += n_puts;
        counts.deletes += n_deletes;
        Ok(())
    }
}
