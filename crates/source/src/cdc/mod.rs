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

pub use binlog::{table_id, BinlogReader, DEFAULT_SERVER_ID};
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
}

/// The relations a follower has seen described, by OID: `Relation` messages
/// come once per read of the slot, before a relation's first change.
#[derive(Debug, Default)]
pub struct Relations {
    by_oid: HashMap<u32, (String, Arc<Vec<String>>)>,
}

impl Relations {
    /// Folds decoded messages into row changes, in order, and the batch's
    /// end position.
    pub fn collect(
        &mut self,
        messages: impl IntoIterator<Item = Message>,
    ) -> Result<ChangeBatch, crate::SourceError> {
        let mut batch = ChangeBatch::default();
        let mut pending: Vec<RowChange> = Vec::new();
        for m in messages {
            let (oid, op, old, new) = match m {
                Message::Relation(r) => {
                    let table = format!("{}.{}", r.schema, r.name);
                    self.by_oid.insert(r.oid, (table, Arc::new(r.columns)));
                    continue;
                }
                Message::Commit {
                    end_lsn, timestamp, ..
                } => {
                    for mut c in pending.drain(..) {
                        c.commit_end = end_lsn;
                        batch.changes.push(c);
                    }
                    batch.end_lsn = Some(end_lsn);
                    batch.last_commit_time = Some(timestamp);
                    batch.transactions += 1;
                    continue;
                }
                Message::Begin { .. } | Message::Other(_) => continue,
                Message::Insert { oid, new } => (oid, ChangeOp::Insert, None, Some(new)),
                Message::Update { oid, old, new } => (oid, ChangeOp::Update, old, Some(new)),
                Message::Delete { oid, old } => (oid, ChangeOp::Delete, Some(old), None),
                Message::Truncate { oids } => {
                    for oid in oids {
                        pending.push(self.change(oid, ChangeOp::Truncate, None, None)?);
                    }
                    continue;
                }
            };
            pending.push(self.change(oid, op, old, new)?);
        }
        Ok(batch)
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
    fn a_change_of_an_undescribed_relation_is_an_error() {
        let err = Relations::default()
            .collect([insert(9, "1"), commit(10)])
            .unwrap_err();
        assert!(err.to_string().contains("relation 9"), "{err}");
    }
}
