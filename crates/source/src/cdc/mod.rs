//! Change data capture. MySQL/MariaDB: the binary log ([`BinlogReader`]).
//! PostgreSQL: a logical replication slot with the
//! `pgoutput` plugin and a publication of the followed tables, read through
//! the SQL interface (`pg_logical_slot_peek_binary_changes`), since sqlx does
//! not speak the replication protocol.
//!
//! The slot is the follower's checkpoint: changes are read without moving
//! it (peeked, or read from a temporary copy of the slot: [`SlotReader`]),
//! applied, and only once their writes are acknowledged is the slot
//! advanced past them ([`Source::advance_slot`]). A follower that dies in
//! between reads the same changes again; applying a change twice gives the
//! same item, so the replay is harmless.

mod binlog;
mod binlog_server;
mod binlog_sql;
mod binlog_tables;
mod binlog_values;
mod follow_check;
pub use follow_check::{PublishedTable, SlotServer};
mod gtid;
pub use gtid::{Gtids, MariaGtids, MysqlGtids};
mod pgoutput;
mod position;
mod slot;
pub use slot::check_slot_name;
mod slot_reader;
pub use slot_reader::{copy_name, ReadAhead, SlotReader};
mod tuples;

use std::collections::HashMap;
use std::sync::Arc;

pub use binlog::{replica_server_id, table_id, BinlogReader};
pub use pgoutput::{decode, format_lsn, parse_lsn, Message, RelationInfo, TupleValue};
pub use position::BinlogPosition;
pub use slot::SlotState;

/// What a change did to a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    /// A row inserted: `new` holds it.
    Insert,
    /// A row updated: `new` holds it, `old` its former identity when known.
    Update,
    /// A row deleted: `old` holds its identity (or the whole row).
    Delete,
    /// The table emptied: neither tuple.
    Truncate,
}

/// One row change of a committed transaction, in commit order.
#[derive(Debug, Clone)]
pub struct RowChange {
    /// The changed table's OID, or for MySQL/MariaDB a hash of its name
    /// (see [`Source::table_oid`]).
    pub oid: u32,
    /// `schema.table`, for messages.
    pub table: String,
    /// Column names in the order the tuples carry them.
    pub columns: Arc<Vec<String>>,
    /// What happened.
    pub op: ChangeOp,
    /// The row before (identity columns, or all with `REPLICA IDENTITY FULL`).
    pub old: Option<Vec<TupleValue>>,
    /// The row after.
    pub new: Option<Vec<TupleValue>>,
    /// Where the change's transaction ends: the slot (or the binary log
    /// checkpoint) may be advanced to it once this change and every one
    /// before it are applied.
    pub commit_end: u64,
}

/// Changes read from a slot, whole transactions only.
#[derive(Debug, Clone, Default)]
pub struct ChangeBatch {
    /// Row changes of the transactions read, in commit order.
    pub changes: Vec<RowChange>,
    /// The end of the last transaction read: where the slot goes once the
    /// batch is applied (the binary log: [`BinlogPosition::ordinal`] of
    /// [`ChangeBatch::end`]). `None` when nothing was read.
    pub end_lsn: Option<u64>,
    /// The binary log: where the last transaction read ends.
    pub end: Option<BinlogPosition>,
    /// Commit time of the last transaction read, microseconds since
    /// 2000-01-01 UTC.
    pub last_commit_time: Option<i64>,
    /// Transactions read (including those that touched no followed table).
    pub transactions: u64,
    /// A slot: bytes of the messages read (what a reader that sizes its
    /// reads goes by); 0 for the binary log.
    pub message_bytes: usize,
    /// The fence the follower watches for ([`Relations::watch_fence`]) is
    /// in this batch: every transaction committed before it was written is
    /// in this batch or an earlier one.
    pub fence_seen: bool,
    /// A followed table's columns changed: the batch ends at the last
    /// commit before the transaction of its first change in the new shape,
    /// and nothing after is read.
    pub shape_change: Option<ShapeChange>,
    /// A followed table was truncated: the batch ends at the last commit
    /// before the truncate's transaction, and nothing after is read.
    pub truncate: Option<Truncation>,
}

/// A `TRUNCATE` of followed tables, which no row change describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The followed tables it empties (`schema.table`), in the statement's order.
    pub tables: Vec<String>,
    /// The commit position of its transaction.
    pub commit_lsn: u64,
}

/// A column as a relation description gives it: its name, type OID and
/// type modifier.
pub type ColumnShape = (String, u32, i32);

/// A followed table whose columns are no longer those it was bound with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeChange {
    /// The table's OID.
    pub oid: u32,
    /// `schema.table`.
    pub table: String,
    /// Its columns as the stream describes them from that transaction on.
    pub shape: Vec<ColumnShape>,
    /// The commit position of the transaction holding the first change in
    /// the new shape.
    pub commit_lsn: u64,
    /// What changed, in words (`column note added; column code's type changed`).
    pub what: String,
}

/// What changed between two shapes of a table, in words; `None` when they
/// are the same.
fn shape_difference(before: &[ColumnShape], after: &[ColumnShape]) -> Option<String> {
    if before == after {
        return None;
    }
    let find = |list: &[ColumnShape], name: &str| list.iter().position(|c| c.0 == name);
    let mut what = Vec::new();
    for c in after {
        match find(before, &c.0) {
            None => what.push(format!("column {} added", c.0)),
            Some(i) if before[i] != *c => what.push(format!("column {}'s type changed", c.0)),
            Some(_) => {}
        }
    }
    for c in before {
        if find(after, &c.0).is_none() {
            what.push(format!("column {} dropped", c.0));
        }
    }
    if what.is_empty() {
        what.push("its columns were reordered".into());
    }
    Some(what.join("; "))
}

/// The relations a follower has seen described, by OID: `Relation` messages
/// come once per read of the slot, before a relation's first change.
#[derive(Debug, Default)]
pub struct Relations {
    by_oid: HashMap<u32, (String, Arc<Vec<String>>)>,
    /// The shapes followed tables were bound with: a description that
    /// differs ends the batch ([`ChangeBatch::shape_change`]).
    shapes: HashMap<u32, Vec<ColumnShape>>,
    /// The content of the fence message to watch for (prefix [`FENCE_PREFIX`]).
    fence: Option<String>,
}

/// The transaction being read: its changes join the batch only at its
/// commit, so a batch that ends early never holds part of one.
#[derive(Debug, Default)]
struct OpenTransaction {
    /// Its commit record's position (from its `Begin`).
    commit_lsn: u64,
    /// Its row changes so far.
    changes: Vec<RowChange>,
    /// Whether it holds the fence watched for.
    fence_seen: bool,
}

impl OpenTransaction {
    /// Moves the transaction, committed at `end_lsn` and `timestamp`, into
    /// `batch`, which then ends after it.
    fn commit_into(&mut self, batch: &mut ChangeBatch, end_lsn: u64, timestamp: i64) {
        for mut c in self.changes.drain(..) {
            c.commit_end = end_lsn;
            batch.changes.push(c);
        }
        batch.end_lsn = Some(end_lsn);
        batch.last_commit_time = Some(timestamp);
        batch.transactions += 1;
        batch.fence_seen |= std::mem::take(&mut self.fence_seen);
    }
}

/// The prefix of the logical message a cutover writes as its fence.
pub const FENCE_PREFIX: &str = "sql2ddb_fence";

impl Relations {
    /// Ends a batch at a description of table `oid` whose columns differ
    /// from `shape` (the columns it was bound with).
    pub fn watch_shape(&mut self, oid: u32, shape: Vec<ColumnShape>) {
        self.shapes.insert(oid, shape);
    }

    /// Marks the batch that holds the fence message `content`
    /// ([`ChangeBatch::fence_seen`]); logical messages are read from then on.
    pub fn watch_fence(&mut self, content: String) {
        self.fence = Some(content);
    }

    /// Whether a fence is watched for (the slot is then read with the
    /// option `messages`).
    pub fn fenced(&self) -> bool {
        self.fence.is_some()
    }

    /// Folds decoded messages into row changes, in order, and the batch's
    /// end position.
    pub fn collect(
        &mut self,
        messages: impl IntoIterator<Item = Message>,
    ) -> Result<ChangeBatch, crate::SourceError> {
        let mut batch = ChangeBatch::default();
        let mut open = OpenTransaction::default();
        for m in messages {
            let (oid, op, old, new) = match m {
                Message::Relation(r) => {
                    if let Some(change) = self.describe(r, open.commit_lsn) {
                        // The transaction in hand is left unread.
                        batch.shape_change = Some(change);
                        break;
                    }
                    continue;
                }
                Message::Commit {
                    end_lsn, timestamp, ..
                } => {
                    open.commit_into(&mut batch, end_lsn, timestamp);
                    continue;
                }
                Message::Begin { final_lsn, .. } => {
                    open.commit_lsn = final_lsn;
                    continue;
                }
                Message::Logical {
                    transactional,
                    prefix,
                    content,
                } => {
                    open.fence_seen |= self.is_fence(transactional, &prefix, &content);
                    continue;
                }
                Message::Other(_) => continue,
                Message::Insert { oid, new } => (oid, ChangeOp::Insert, None, Some(new)),
                Message::Update { oid, old, new } => (oid, ChangeOp::Update, old, Some(new)),
                Message::Delete { oid, old } => (oid, ChangeOp::Delete, Some(old), None),
                Message::Truncate { oids } => {
                    if let Some(truncation) = self.truncate(oids, &mut open)? {
                        // The transaction in hand is left unread, as for a shape change.
                        batch.truncate = Some(truncation);
                        break;
                    }
                    continue;
                }
            };
            open.changes.push(self.change(oid, op, old, new)?);
        }
        Ok(batch)
    }

    /// Takes in a relation's description; when it is a followed table's
    /// and its columns differ from those it was bound with, the change of
    /// shape instead (and the description is not taken).
    fn describe(&mut self, r: RelationInfo, commit_lsn: u64) -> Option<ShapeChange> {
        let table = format!("{}.{}", r.schema, r.name);
        if let Some(shape) = self.shapes.get(&r.oid) {
            let now: Vec<ColumnShape> = r
                .columns
                .iter()
                .cloned()
                .zip(r.types.iter().copied())
                .map(|(n, (t, m))| (n, t, m))
                .collect();
            if let Some(what) = shape_difference(shape, &now) {
                return Some(ShapeChange {
                    oid: r.oid,
                    table,
                    shape: now,
                    commit_lsn,
                    what,
                });
            }
        }
        self.by_oid.insert(r.oid, (table, Arc::new(r.columns)));
        None
    }

    /// Whether a logical message is the fence watched for: written within
    /// a transaction, with our prefix and the expected content.
    fn is_fence(&self, transactional: bool, prefix: &str, content: &[u8]) -> bool {
        let fence = self.fence.as_deref().map(str::as_bytes);
        transactional && prefix == FENCE_PREFIX && fence == Some(content)
    }

    /// A `TRUNCATE` of relations `oids`: of followed tables, the
    /// [`Truncation`] that ends the batch; of others only, a change each
    /// added to the open transaction.
    fn truncate(
        &self,
        oids: Vec<u32>,
        open: &mut OpenTransaction,
    ) -> Result<Option<Truncation>, crate::SourceError> {
        let followed: Vec<String> = oids
            .iter()
            .filter(|oid| self.shapes.contains_key(oid))
            .map(|&oid| Ok(self.change(oid, ChangeOp::Truncate, None, None)?.table))
            .collect::<Result<_, crate::SourceError>>()?;
        if !followed.is_empty() {
            return Ok(Some(Truncation {
                tables: followed,
                commit_lsn: open.commit_lsn,
            }));
        }
        for oid in oids {
            open.changes
                .push(self.change(oid, ChangeOp::Truncate, None, None)?);
        }
        Ok(None)
    }

    fn change(
        &self,
        oid: u32,
        op: ChangeOp,
        old: Option<Vec<TupleValue>>,
        new: Option<Vec<TupleValue>>,
    ) -> Result<RowChange, crate::SourceError> {
        let (table, columns) = self.by_oid.get(&oid).ok_or_else(|| {
            crate::SourceError::config(format!(
                "a change of relation {oid} came before its description"
            ))
        })?;
        Ok(RowChange {
            oid,
            table: table.clone(),
            columns: columns.clone(),
            op,
            old,
            new,
            commit_end: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relation(oid: u32) -> Message {
        Message::Relation(RelationInfo {
            oid,
            schema: "public".into(),
            name: format!("t{oid}"),
            replica_identity: b'd',
            columns: vec!["id".into()],
            types: vec![(23, -1)],
        })
    }

    fn insert(oid: u32, id: &str) -> Message {
        Message::Insert {
            oid,
            new: vec![TupleValue::Text(id.into())],
        }
    }

    fn commit(end_lsn: u64) -> Message {
        Message::Commit {
            commit_lsn: end_lsn - 8,
            end_lsn,
            timestamp: 1,
        }
    }

    #[test]
    fn changes_carry_their_transaction_end_and_the_batch_ends_at_the_last_commit() {
        let begin = Message::Begin {
            final_lsn: 0,
            timestamp: 0,
        };
        let batch = Relations::default()
            .collect([
                begin.clone(),
                relation(1),
                insert(1, "1"),
                insert(1, "2"),
                commit(100),
                begin.clone(),
                commit(200),
                begin,
                Message::Truncate { oids: vec![1] },
                commit(300),
            ])
            .unwrap();
        let ends: Vec<(ChangeOp, u64)> =
            batch.changes.iter().map(|c| (c.op, c.commit_end)).collect();
        assert_eq!(
            ends,
            [
                (ChangeOp::Insert, 100),
                (ChangeOp::Insert, 100),
                (ChangeOp::Truncate, 300)
            ]
        );
        assert_eq!(batch.end_lsn, Some(300));
        assert_eq!(batch.transactions, 3);
        assert_eq!(batch.changes[0].table, "public.t1");
    }

    #[test]
    fn a_changed_shape_ends_the_batch_before_its_transaction() {
        let begin = |final_lsn| Message::Begin {
            final_lsn,
            timestamp: 0,
        };
        let mut wider = RelationInfo {
            oid: 1,
            schema: "public".into(),
            name: "t1".into(),
            replica_identity: b'd',
            columns: vec!["id".into(), "note".into()],
            types: vec![(23, -1), (1043, 7)],
        };
        let mut relations = Relations::default();
        relations.watch_shape(1, vec![("id".into(), 23, -1)]);
        let same = relations
            .collect([begin(92), relation(1), insert(1, "1"), commit(100)])
            .unwrap();
        assert_eq!((same.changes.len(), same.shape_change), (1, None));
        let batch = relations
            .collect([
                begin(92),
                relation(1),
                insert(1, "1"),
                commit(100),
                begin(192),
                Message::Relation(wider.clone()),
                insert(1, "2"),
                commit(200),
            ])
            .unwrap();
        assert_eq!(batch.changes.len(), 1);
        assert_eq!(batch.end_lsn, Some(100));
        let change = batch.shape_change.unwrap();
        assert_eq!(change.commit_lsn, 192);
        assert_eq!(change.what, "column note added");
        wider.columns.pop();
        wider.types = vec![(20, -1)];
        let batch = relations
            .collect([begin(292), Message::Relation(wider), commit(300)])
            .unwrap();
        assert_eq!(batch.end_lsn, None);
        assert_eq!(batch.shape_change.unwrap().what, "column id's type changed");
    }

    #[test]
    fn a_truncate_of_a_followed_table_ends_the_batch_before_its_transaction() {
        let begin = |final_lsn| Message::Begin {
            final_lsn,
            timestamp: 0,
        };
        let mut relations = Relations::default();
        relations.watch_shape(1, vec![("id".into(), 23, -1)]);
        relations.watch_shape(3, vec![("id".into(), 23, -1)]);
        // A table not followed (2) is only a change, as before.
        let other = relations
            .collect([
                begin(92),
                relation(2),
                Message::Truncate { oids: vec![2] },
                commit(100),
            ])
            .unwrap();
        assert_eq!(
            (other.changes[0].op, other.truncate),
            (ChangeOp::Truncate, None)
        );
        let batch = relations
            .collect([
                begin(192),
                relation(1),
                relation(3),
                insert(1, "1"),
                commit(200),
                begin(292),
                insert(1, "2"),
                Message::Truncate {
                    oids: vec![3, 2, 1],
                },
                insert(1, "3"),
                commit(300),
                begin(392),
                insert(1, "4"),
                commit(400),
            ])
            .unwrap();
        let ends: Vec<u64> = batch.changes.iter().map(|c| c.commit_end).collect();
        assert_eq!(ends, [200]);
        assert_eq!((batch.end_lsn, batch.transactions), (Some(200), 1));
        assert_eq!(
            batch.truncate,
            Some(Truncation {
                tables: vec!["public.t3".into(), "public.t1".into()],
                commit_lsn: 292,
            })
        );
        let first = relations
            .collect([begin(292), Message::Truncate { oids: vec![1] }, commit(300)])
            .unwrap();
        assert_eq!((first.end_lsn, first.changes.len()), (None, 0));
        assert_eq!(first.truncate.unwrap().commit_lsn, 292);
    }

    #[test]
    fn only_the_watched_fence_marks_its_batch() {
        let fence = |content: &str| Message::Logical {
            transactional: true,
            prefix: FENCE_PREFIX.into(),
            content: content.as_bytes().to_vec(),
        };
        let begin = Message::Begin {
            final_lsn: 0,
            timestamp: 0,
        };
        let mut relations = Relations::default();
        relations.watch_fence("b".into());
        let old = relations
            .collect([begin.clone(), fence("a"), commit(100)])
            .unwrap();
        assert!(!old.fence_seen);
        let ours = relations.collect([begin, fence("b"), commit(200)]).unwrap();
        assert!(ours.fence_seen);
    }

    #[test]
    fn a_change_of_an_undescribed_relation_is_an_error() {
        let err = Relations::default()
            .collect([insert(9, "1"), commit(10)])
            .unwrap_err();
        assert!(err.to_string().contains("relation 9"), "{err}");
    }
}
