//! Reading a slot ahead of its applied position: a temporary copy of the
//! slot, consumed batch after batch on a connection of its own, while the
//! slot itself only moves once a batch's writes are acknowledged.
//!
//! `pg_logical_slot_peek_binary_changes` always starts at the slot's
//! confirmed position, so a follower that peeks cannot read the next batch
//! before the one in hand is applied and the slot advanced. A copy
//! (`pg_copy_logical_replication_slot`, PostgreSQL 12 and later) starts
//! where the slot is and is read with `pg_logical_slot_get_binary_changes`,
//! which moves the copy past what it returns: each read goes on where the
//! last one ended. The copy is temporary: PostgreSQL drops it when its
//! session ends, a crash included, so it never holds WAL on its own, and
//! the slot stays the checkpoint.

use sqlx::postgres::PgConnection;
use sqlx::Connection;

use super::slot::{collect_batch, read_changes_sql};
use super::{ChangeBatch, Relations};
use crate::{Pool, Source, SourceError};

/// The suffix of a read-ahead copy's name.
const COPY_SUFFIX: &str = "_read";

/// A temporary copy of a slot, read ahead of the slot's position.
pub struct SlotReader {
    conn: PgConnection,
    copy: String,
    publication: String,
    relations: Relations,
}

/// What [`Source::open_slot_reader`] could do.
pub enum ReadAhead {
    /// A copy of the slot to read ahead with.
    Copy(SlotReader),
    /// The server cannot make a copy (before PostgreSQL 12, or every
    /// replication slot is in use): the slot is peeked, one batch after
    /// the other. Says why.
    Unavailable(String),
    /// Another reader holds the copy: another follower of the slot, or one
    /// that just ended, whose copy lasts until the server notices its
    /// connection is gone (a moment). The caller tries again after a wait;
    /// this is the error to end with when the copy stays held.
    Held(SourceError),
}

/// The name of `slot`'s read-ahead copy: the slot's name (cut to fit) and
/// `_read` (`_copy` for a slot of 63 bytes that ends in `_read`).
pub fn copy_name(slot: &str) -> String {
    let keep = slot.len().min(63 - COPY_SUFFIX.len());
    let name = format!("{}{COPY_SUFFIX}", &slot[..keep]);
    match name == slot {
        true => format!("{}_copy", &slot[..keep]),
        false => name,
    }
}

impl Source {
    /// Opens a temporary copy of slot `slot` on a connection of its own, to
    /// read the changes of `publication` from the slot's position on
    /// without moving the slot, in one attempt: a copy held by another
    /// reader of the same slot (one reads a slot at a time) is
    /// [`ReadAhead::Held`], with an error naming its process.
    pub async fn open_slot_reader(
        &self,
        slot: &str,
        publication: &str,
    ) -> Result<ReadAhead, SourceError> {
        super::check_slot_name(slot)?;
        let Pool::Postgres(pool) = &self.pool else {
            return Err(SourceError::config(
                "a replication slot is read on PostgreSQL only",
            ));
        };
        let copy = copy_name(slot);
        let mut conn = pool
            .acquire()
            .await
            .map_err(|e| SourceError::query(format!("connect to read replication slot {slot}"), e))?
            .detach();
        let created = sqlx::query("SELECT 1 FROM pg_copy_logical_replication_slot($1, $2, true)")
            .bind(slot)
            .bind(&copy)
            .execute(&mut conn)
            .await;
        let Err(e) = created else {
            return Ok(ReadAhead::Copy(SlotReader {
                conn,
                copy,
                publication: publication.to_string(),
                relations: Relations::default(),
            }));
        };
        let _ = conn.close().await;
        let (code, message) = match e.as_database_error() {
            Some(d) => (d.code().map(|c| c.into_owned()), d.message().to_string()),
            None => (None, e.to_string()),
        };
        match code.as_deref() {
            // undefined_function: before PostgreSQL 12.
            Some("42883") => Ok(ReadAhead::Unavailable(
                "the server has no pg_copy_logical_replication_slot (PostgreSQL 12 and later)"
                    .into(),
            )),
            // configuration_limit_exceeded: every slot is in use.
            Some("53400") => Ok(ReadAhead::Unavailable(format!(
                "no replication slot is free for a read-ahead copy ({message}); raise max_replication_slots by one"
            ))),
            // duplicate_object: another follower's copy.
            Some("42710") => {
                let pid: Option<i32> = sqlx::query_scalar(
                    "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1",
                )
                .bind(&copy)
                .fetch_optional(pool)
                .await
                .ok()
                .flatten();
                Ok(ReadAhead::Held(SourceError::config(format!(
                    "replication slot {slot} is being read by another follower (its copy {copy} is held by server process {}): stop that follower first (one follower reads a slot at a time), or end that process with pg_terminate_backend",
                    pid.map_or_else(|| "unknown".to_string(), |p| p.to_string())
                ))))
            }
            _ => Err(SourceError::query(
                format!("copy replication slot {slot} to read it ahead"),
                e,
            )),
        }
    }
}

impl SlotReader {
    /// The copy's name.
    pub fn name(&self) -> &str {
        &self.copy
    }

    /// The relations the copy has described, and what the reads watch for.
    pub fn relations_mut(&mut self) -> &mut Relations {
        &mut self.relations
    }

    /// The committed changes after the last batch read, whole transactions,
    /// about `max_changes` messages at most (a transaction is never cut);
    /// the copy moves past them, the slot does not.
    pub async fn next_batch(&mut self, max_changes: usize) -> Result<ChangeBatch, SourceError> {
        let sql = read_changes_sql("pg_logical_slot_get_binary_changes", &self.relations);
        let data: Vec<Vec<u8>> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(&self.copy)
            .bind(max_changes.min(i32::MAX as usize) as i32)
            .bind(&self.publication)
            .fetch_all(&mut self.conn)
            .await
            .map_err(|e| {
                SourceError::query(
                    format!("read changes from replication slot {} (a copy)", self.copy),
                    e,
                )
            })?;
        collect_batch(&data, &mut self.relations)
    }

    /// Drops the copy and ends its connection (ending the connection alone
    /// would drop it too).
    pub async fn close(mut self) {
        let _ = sqlx::query("SELECT pg_drop_replication_slot($1)")
            .bind(&self.copy)
            .execute(&mut self.conn)
            .await;
        let _ = self.conn.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_name_is_a_valid_slot_name_of_at_most_63_bytes() {
        assert_eq!(copy_name("sql2ddb_abc"), "sql2ddb_abc_read");
        let long = "s".repeat(63);
        let name = copy_name(&long);
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("_read"));
        assert!(super::super::check_slot_name(&name).is_ok());
        let ends_so = format!("{}_read", "s".repeat(58));
        assert_eq!(copy_name(&ends_so), format!("{}_copy", "s".repeat(58)));
    }
}
