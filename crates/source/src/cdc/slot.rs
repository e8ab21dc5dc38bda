//! The replication slot and publication a follower reads through, by SQL.

use sqlx::postgres::PgPool;
use sqlx::AssertSqlSafe;

use super::pgoutput::{decode, format_lsn, parse_lsn};
use super::{ChangeBatch, ColumnShape, Relations, FENCE_PREFIX};

/// Reads the changes of publication `$3`, at most about `$2` messages, from
/// slot `$1` (`FUNCTION` is peek or get).
const READ_CHANGES: &str = "SELECT data FROM FUNCTION($1, NULL, $2, \
     'proto_version', '1', 'publication_names', $3)";

/// The same, with the logical messages written by `pg_logical_emit_message`
/// (PostgreSQL 14 and later): a cutover reads its fence among them.
const READ_CHANGES_AND_MESSAGES: &str = "SELECT data FROM FUNCTION($1, NULL, $2, \
     'proto_version', '1', 'publication_names', $3, 'messages', 'true')";

/// The statement that reads a slot with `function`
/// (`pg_logical_slot_peek_binary_changes` or `…_get_…`).
pub(super) fn read_changes_sql(function: &str, relations: &Relations) -> String {
    match relations.fenced() {
        true => READ_CHANGES_AND_MESSAGES,
        false => READ_CHANGES,
    }
    .replace("FUNCTION", function)
}

/// The `pgoutput` messages of one read of a slot, decoded and folded into
/// row changes.
pub(super) fn collect_batch(
    data: &[Vec<u8>],
    relations: &mut Relations,
) -> Result<ChangeBatch, SourceError> {
    let messages = data
        .iter()
        .map(|d| decode(d))
        .collect::<Result<Vec<_>, _>>()?;
    let mut batch = relations.collect(messages)?;
    batch.message_bytes = data.iter().map(Vec::len).sum();
    Ok(batch)
}
use crate::sql::{quote_ident, quote_table};
use crate::{Dialect, Pool, Source, SourceError};

/// Where a slot stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotState {
    /// Everything before it is applied (the slot's `confirmed_flush_lsn`).
    pub confirmed: u64,
    /// The server's current WAL position.
    pub current: u64,
    /// WAL bytes the slot keeps on the server's disk (current − restart_lsn).
    pub retained_bytes: u64,
}

impl SlotState {
    /// Bytes of WAL written since the last applied change.
    pub fn lag_bytes(&self) -> u64 {
        self.current.saturating_sub(self.confirmed)
    }
}

/// Slot and publication names: PostgreSQL identifiers of at most 63 bytes,
/// lower-case letters, digits and `_` (what a slot name may hold).
pub fn check_slot_name(name: &str) -> Result<(), SourceError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(SourceError::config(format!(
            "slot name {name:?}: use 1 to 63 lower-case letters, digits and _"
        )))
    }
}

impl Source {
    fn follow_pool(&self) -> Result<&PgPool, SourceError> {
        match &self.pool {
            Pool::Postgres(p) => Ok(p),
            _ => Err(SourceError::config(
                "following changes is supported for PostgreSQL sources only so far",
            )),
        }
    }

    /// The OID of `table` (`table` or `schema.table`, as the mapping names
    /// it); MySQL/MariaDB: [`super::table_id`] of its schema and name, as
    /// the binary log reader names its changes.
    pub async fn table_oid(&self, table: &str) -> Result<u32, SourceError> {
        if let Pool::MySql(_) = &self.pool {
            let (schema, name) = self.qualified_table(table).await?;
            return Ok(super::table_id(&schema, &name));
        }
        let pool = self.follow_pool()?;
        let qualified = quote_table(Dialect::Postgres, table);
        let oid: Option<i64> = sqlx::query_scalar("SELECT to_regclass($1)::oid::int8")
            .bind(&qualified)
            .fetch_one(pool)
            .await
            .map_err(|e| SourceError::query(format!("look up table {table}"), e))?;
        oid.map(|o| o as u32)
            .ok_or_else(|| SourceError::not_found(format!("table {table} does not exist")))
    }

    /// `REPLICA IDENTITY` of `table`: `d` default, `f` full, `i` index, `n`
    /// nothing. MySQL/MariaDB: `f`, since the follower requires full row
    /// images (`binlog_row_image = FULL`).
    pub async fn replica_identity(&self, table: &str) -> Result<char, SourceError> {
        if let Pool::MySql(_) = &self.pool {
            return Ok('f');
        }
        let pool = self.follow_pool()?;
        let qualified = quote_table(Dialect::Postgres, table);
        let c: String = sqlx::query_scalar(
            "SELECT relreplident::text FROM pg_class WHERE oid = to_regclass($1)",
        )
        .bind(&qualified)
        .fetch_one(pool)
        .await
        .map_err(|e| SourceError::query(format!("read the replica identity of {table}"), e))?;
        Ok(c.chars().next().unwrap_or('d'))
    }

    /// Creates publication `publication` for `tables` and then logical slot
    /// `slot` (plugin `pgoutput`), and returns the slot's consistent point.
    /// Every transaction that commits after it is in the slot; every one
    /// that committed before it is in a snapshot taken after this returns.
    /// Needs `wal_level = logical` and the `REPLICATION` attribute (or
    /// superuser), and ownership of the tables for the publication.
    pub async fn create_slot(
        &self,
        slot: &str,
        publication: &str,
        tables: &[&str],
    ) -> Result<u64, SourceError> {
        check_slot_name(slot)?;
        check_slot_name(publication)?;
        let pool = self.follow_pool()?;
        let wal_level: String = sqlx::query_scalar("SELECT current_setting('wal_level')")
            .fetch_one(pool)
            .await
            .map_err(|e| SourceError::query("read wal_level", e))?;
        if wal_level != "logical" {
            return Err(SourceError::config(format!(
                "following changes needs wal_level = logical (the server has {wal_level}): set it in postgresql.conf and restart the server"
            )));
        }
        let list: Vec<String> = tables
            .iter()
            .map(|t| quote_table(Dialect::Postgres, t))
            .collect();
        let create = format!(
            "CREATE PUBLICATION {} FOR TABLE {}",
            quote_ident(Dialect::Postgres, publication),
            list.join(", ")
        );
        sqlx::query(AssertSqlSafe(create))
            .execute(pool)
            .await
            .map_err(|e| SourceError::query(format!("create publication {publication}"), e))?;
        let created: Result<String, _> = sqlx::query_scalar(
            "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
        )
        .bind(slot)
        .fetch_one(pool)
        .await;
        match created {
            Ok(lsn) => parse_lsn(&lsn),
            Err(e) => {
                let _ = self.drop_publication(publication).await;
                Err(SourceError::query(
                    format!("create replication slot {slot} (needs the REPLICATION attribute)"),
                    e,
                ))
            }
        }
    }

    /// Where slot `slot` stands; `None` when there is no such slot.
    pub async fn slot_state(&self, slot: &str) -> Result<Option<SlotState>, SourceError> {
        let pool = self.follow_pool()?;
        let row: Option<(String, String, String)> = sqlx::query_as(
            "SELECT confirmed_flush_lsn::text, pg_current_wal_lsn()::text, restart_lsn::text \
             FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()",
        )
        .bind(slot)
        .fetch_optional(pool)
        .await
        .map_err(|e| SourceError::query(format!("read replication slot {slot}"), e))?;
        let Some((confirmed, current, restart)) = row else {
            return Ok(None);
        };
        let (confirmed, current) = (parse_lsn(&confirmed)?, parse_lsn(&current)?);
        Ok(Some(SlotState {
            confirmed,
            current,
            retained_bytes: current.saturating_sub(parse_lsn(&restart)?),
        }))
    }

    /// The server's current WAL position.
    pub async fn current_wal_lsn(&self) -> Result<u64, SourceError> {
        let pool = self.follow_pool()?;
        let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(pool)
            .await
            .map_err(|e| SourceError::query("read the WAL position", e))?;
        parse_lsn(&lsn)
    }

    /// The committed changes after the slot's position, whole transactions,
    /// about `max_changes` messages at most (a transaction is never cut),
    /// without moving the slot.
    pub async fn peek_changes(
        &self,
        slot: &str,
        publication: &str,
        max_changes: usize,
        relations: &mut Relations,
    ) -> Result<ChangeBatch, SourceError> {
        let pool = self.follow_pool()?;
        let sql = read_changes_sql("pg_logical_slot_peek_binary_changes", relations);
        let data: Vec<Vec<u8>> = sqlx::query_scalar(AssertSqlSafe(sql))
            .bind(slot)
            .bind(max_changes.min(i32::MAX as usize) as i32)
            .bind(publication)
            .fetch_all(pool)
            .await
            .map_err(|e| {
                SourceError::query(format!("read changes from replication slot {slot}"), e)
            })?;
        collect_batch(&data, relations)
    }

    /// The WAL position written and flushed to disk: what a read of a slot
    /// started after this returns reaches at least this far.
    pub async fn flushed_wal_lsn(&self) -> Result<u64, SourceError> {
        let pool = self.follow_pool()?;
        let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_flush_lsn()::text")
            .fetch_one(pool)
            .await
            .map_err(|e| SourceError::query("read the flushed WAL position", e))?;
        parse_lsn(&lsn)
    }

    /// Writes a cutover's fence: a transactional logical message (prefix
    /// [`FENCE_PREFIX`], content `content`) committed with its WAL flushed,
    /// which flushes every transaction committed before it too, those
    /// committed with `synchronous_commit = off` included. Once a read of
    /// the slot returns the fence, everything committed before it is read.
    /// Returns the fence's position. Needs PostgreSQL 14 or later (a slot
    /// sends logical messages from then on).
    pub async fn write_fence(&self, content: &str) -> Result<u64, SourceError> {
        let pool = self.follow_pool()?;
        let version: i32 = sqlx::query_scalar("SELECT current_setting('server_version_num')::int")
            .fetch_one(pool)
            .await
            .map_err(|e| SourceError::query("read the server's version", e))?;
        if version < 140_000 {
            return Err(SourceError::config(
                "a cutover needs PostgreSQL 14 or later: it waits for its own message in the slot, which older servers do not send; stop the application's writes, wait, then follow with --follow-until-idle instead",
            ));
        }
        let fail = |e| SourceError::query("write the cutover's fence message", e);
        let mut tx = pool.begin().await.map_err(fail)?;
        // Flushed locally whatever the session's or the role's setting.
        sqlx::query("SET LOCAL synchronous_commit = local")
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        let lsn: String = sqlx::query_scalar("SELECT pg_logical_emit_message(true, $1, $2)::text")
            .bind(FENCE_PREFIX)
            .bind(content)
            .fetch_one(&mut *tx)
            .await
            .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        parse_lsn(&lsn)
    }

    /// The columns of table `oid` as a slot describes them (name, type OID,
    /// type modifier; neither dropped nor generated), in order.
    pub async fn relation_shape(&self, oid: u32) -> Result<Vec<ColumnShape>, SourceError> {
        let pool = self.follow_pool()?;
        let rows: Vec<(String, i64, i32)> = sqlx::query_as(
            "SELECT attname::text, atttypid::int8, atttypmod FROM pg_attribute \
             WHERE attrelid = $1::int8::oid AND attnum > 0 AND NOT attisdropped \
             AND attgenerated = '' ORDER BY attnum",
        )
        .bind(oid as i64)
        .fetch_all(pool)
        .await
        .map_err(|e| SourceError::query(format!("read the columns of relation {oid}"), e))?;
        Ok(rows.into_iter().map(|(n, t, m)| (n, t as u32, m)).collect())
    }

    /// Moves slot `slot` to `lsn`: the server may then recycle the WAL
    /// before it. Only once every change before `lsn` is applied.
    pub async fn advance_slot(&self, slot: &str, lsn: u64) -> Result<(), SourceError> {
        let pool = self.follow_pool()?;
        sqlx::query("SELECT 1 FROM pg_replication_slot_advance($1, $2::text::pg_lsn)")
            .bind(slot)
            .bind(format_lsn(lsn))
            .execute(pool)
            .await
            .map_err(|e| SourceError::query(format!("advance replication slot {slot}"), e))?;
        Ok(())
    }

    /// Drops slot `slot` (if it exists) and publication `publication`.
    pub async fn drop_slot(&self, slot: &str, publication: &str) -> Result<(), SourceError> {
        let pool = self.follow_pool()?;
        sqlx::query(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE slot_name = $1 AND database = current_database()",
        )
        .bind(slot)
        .execute(pool)
        .await
        .map_err(|e| SourceError::query(format!("drop replication slot {slot}"), e))?;
        self.drop_publication(publication).await
    }

    async fn drop_publication(&self, publication: &str) -> Result<(), SourceError> {
        check_slot_name(publication)?;
        let pool = self.follow_pool()?;
        let sql = format!(
            "DROP PUBLICATION IF EXISTS {}",
            quote_ident(Dialect::Postgres, publication)
        );
        sqlx::query(AssertSqlSafe(sql))
            .execute(pool)
            .await
            .map_err(|e| SourceError::query(format!("drop publication {publication}"), e))?;
        Ok(())
    }
}
