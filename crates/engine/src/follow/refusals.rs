//! Everything a new follow needs of the source, checked before a slot, a
//! publication or an item exists and refused as one list: the server's
//! settings, the user's attributes and privileges, each table's replica
//! identity (a table published without a usable one makes the
//! application's own UPDATE and DELETE fail), and what
//! [`entities::bind`](super::entities::bind) finds in the mapping.

use sql2ddb_mapping::{EntitySource, Plan};
use sql2ddb_source::cdc::{PublishedTable, SlotServer};
use sql2ddb_source::Source;

use super::entities::{self, refuse_all, table_names};
use crate::error::EngineError;

/// PostgreSQL: every reason slot `slot` (and its publication, of the same
/// name) cannot be created for `plan`, or nothing to refuse.
pub(super) async fn check_slot(
    source: &Source,
    plan: &Plan,
    slot: &str,
) -> Result<(), EngineError> {
    refuse_all(slot_reasons(source, plan, slot).await?)
}

/// PostgreSQL: every reason slot `slot` cannot be created for `plan`.
pub(super) async fn slot_reasons(
    source: &Source,
    plan: &Plan,
    slot: &str,
) -> Result<Vec<String>, EngineError> {
    let mut reasons = server_reasons(source, slot).await?;
    let (_, entity_reasons) = entities::bind(source, plan, &[]).await?;
    for table in table_names(plan) {
        // An entity's table without a primary key is refused as such.
        let entity = plan
            .entities
            .iter()
            .any(|e| matches!(&e.from, EntitySource::Table(t) if *t == table));
        if let Some(t) = source.published_table(&table).await? {
            reasons.extend(table_reasons(&table, &t, !entity));
        }
    }
    reasons.extend(entity_reasons);
    Ok(reasons)
}

/// MySQL/MariaDB: every reason `plan` cannot be followed through the
/// binary log, or nothing to refuse.
pub(super) async fn check_binlog(source: &Source, plan: &Plan) -> Result<(), EngineError> {
    refuse_all(binlog_reasons(source, plan).await?)
}

/// MySQL/MariaDB: every reason `plan` cannot be followed through the
/// binary log.
pub(super) async fn binlog_reasons(
    source: &Source,
    plan: &Plan,
) -> Result<Vec<String>, EngineError> {
    let mut reasons = source.binlog_setting_problems().await?;
    let missing = source.missing_binlog_privileges().await?;
    if !missing.is_empty() {
        reasons.push(format!(
            "following changes needs the global privileges {list} (reading the binary log as a replica, its position, the snapshot's brief read lock): GRANT {list} ON *.* TO the source's user",
            list = missing.join(", ")
        ));
    }
    let mut unreadable = Vec::new();
    for table in table_names(plan) {
        if !source.may_select(&table).await? {
            reasons.push(format!(
                "table {table} cannot be read by the source's user: GRANT SELECT ON {table} TO it"
            ));
            unreadable.push(table);
        }
    }
    // The server hides a table the user may not read: describing it would
    // say it does not exist.
    let (_, entity_reasons) = entities::bind(source, plan, &unreadable).await?;
    reasons.extend(entity_reasons);
    Ok(reasons)
}

/// What the server and the user lack for slot and publication `slot`.
async fn server_reasons(source: &Source, slot: &str) -> Result<Vec<String>, EngineError> {
    Ok(slot_server_reasons(slot, &source.slot_server(slot).await?))
}

/// What server `s` and its user lack for slot and publication `slot`,
/// every reason at once.
fn slot_server_reasons(slot: &str, s: &SlotServer) -> Vec<String> {
    let mut out = Vec::new();
    if s.wal_level != "logical" {
        out.push(format!("following changes needs wal_level = logical (the server has {}): set it in postgresql.conf and restart the server", s.wal_level));
    }
    if !s.can_replicate {
        out.push(format!("user {} may not create a replication slot: ALTER ROLE {} REPLICATION (or follow as a superuser)", s.user, s.user));
    }
    if s.used_slots >= s.max_slots {
        out.push(format!("the server has no free replication slot ({} of max_replication_slots = {} in use): drop one that is no longer read (pg_replication_slots), or raise max_replication_slots and restart the server", s.used_slots, s.max_slots));
    }
    if !s.can_create_publication {
        out.push(format!("user {} may not create a publication in this database: GRANT CREATE ON DATABASE … TO {}", s.user, s.user));
    }
    if s.slot_exists {
        out.push(format!("a replication slot named {slot} exists already: follow it (`sql2ddb follow MAPPING --slot {slot}`) or drop it (`--drop-slot`) before a new run creates it"));
    }
    if s.publication_exists {
        out.push(format!("a publication named {slot} exists already in this database: drop it (DROP PUBLICATION {slot}) before a new run creates it"));
    }
    out
}

/// What keeps `table` from being published and followed: privileges, and
/// a replica identity that would make the application's own UPDATE and
/// DELETE fail once it is published, or that does not carry the row's key;
/// a missing primary key only when `keyless` (no entity refuses it already).
fn table_reasons(table: &str, t: &PublishedTable, keyless: bool) -> Vec<String> {
    let mut out = Vec::new();
    if !t.can_select {
        out.push(format!(
            "table {table} cannot be read by the source's user: GRANT SELECT ON {table} TO it"
        ));
    }
    if !t.owned {
        out.push(format!("table {table} belongs to {}: a publication takes only tables of their owner; follow as {} (or a member of it), or ALTER TABLE {table} OWNER TO the source's user", t.owner, t.owner));
    }
    let published = "once it is published, the application's own UPDATE and DELETE on it fail (\"does not have a replica identity and publishes updates\")";
    let fix = match t.primary_key_immediate {
        Some(true) => format!("ALTER TABLE {table} REPLICA IDENTITY DEFAULT"),
        _ => format!("ALTER TABLE {table} REPLICA IDENTITY FULL"),
    };
    match (t.identity, t.primary_key_immediate) {
        ('n', _) => out.push(format!(
            "table {table} has REPLICA IDENTITY NOTHING: {published}, and a deleted row could not be matched to its item; run {fix}"
        )),
        ('d', Some(false)) => out.push(format!(
            "the primary key of table {table} is DEFERRABLE, so REPLICA IDENTITY DEFAULT has no index to use: {published}, and a change of the key could not say which item it moved from; run ALTER TABLE {table} REPLICA IDENTITY FULL (or make the key NOT DEFERRABLE)"
        )),
        ('d', None) if keyless => out.push(format!(
            "table {table} has no primary key and REPLICA IDENTITY DEFAULT: {published}; add a primary key"
        )),
        ('i', _) => out.push(format!(
            "table {table} has REPLICA IDENTITY USING INDEX {}: a changed or deleted row then carries only that index's columns, not the key its item is found by; run {fix}",
            t.identity_index.as_deref().unwrap_or("?")
        )),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(identity: char, primary_key_immediate: Option<bool>) -> PublishedTable {
        PublishedTable {
            identity,
            identity_index: Some("t_code".into()),
            primary_key_immediate,
            can_select: true,
            owned: true,
            owner: "app".into(),
        }
    }

    #[test]
    fn a_replica_identity_the_application_would_trip_on_is_named_with_its_fix() {
        assert!(table_reasons("s.t", &table('d', Some(true)), true).is_empty());
        assert!(table_reasons("s.t", &table('f', None), true).is_empty());
        // A table without a key: named unless its entity is refused for it.
        assert_eq!(table_reasons("s.t", &table('d', None), true).len(), 1);
        assert!(table_reasons("s.t", &table('d', None), false).is_empty());
        let nothing = table_reasons("s.t", &table('n', Some(true)), true).join("\n");
        assert!(nothing.contains("REPLICA IDENTITY NOTHING"), "{nothing}");
        assert!(
            nothing.contains("ALTER TABLE s.t REPLICA IDENTITY DEFAULT"),
            "{nothing}"
        );
        let deferred = table_reasons("s.t", &table('d', Some(false)), true).join("\n");
        assert!(deferred.contains("DEFERRABLE"), "{deferred}");
        assert!(
            deferred.contains("ALTER TABLE s.t REPLICA IDENTITY FULL"),
            "{deferred}"
        );
        let index = table_reasons("s.t", &table('i', Some(true)), true).join("\n");
        assert!(index.contains("USING INDEX t_code"), "{index}");
        assert!(index.contains("REPLICA IDENTITY DEFAULT"), "{index}");
        let mut locked = table('d', Some(true));
        (locked.can_select, locked.owned) = (false, false);
        let locked = table_reasons("s.t", &locked, true);
        assert_eq!(locked.len(), 2, "{locked:?}");
        assert!(locked[0].contains("GRANT SELECT ON s.t"), "{locked:?}");
        assert!(locked[1].contains("belongs to app"), "{locked:?}");
    }

    #[test]
    fn every_server_side_reason_is_named_at_once_with_its_fix() {
        let ready = SlotServer {
            user: "migrator".into(),
            wal_level: "logical".into(),
            can_replicate: true,
            max_slots: 10,
            used_slots: 3,
            can_create_publication: true,
            slot_exists: false,
            publication_exists: false,
        };
        assert!(slot_server_reasons("sql2ddb_r1", &ready).is_empty());
        let nothing = SlotServer {
            wal_level: "replica".into(),
            can_replicate: false,
            used_slots: 10,
            can_create_publication: false,
            slot_exists: true,
            publication_exists: true,
            ..ready
        };
        let reasons = slot_server_reasons("sql2ddb_r1", &nothing);
        let expected = [
            "wal_level = logical (the server has replica)",
            "ALTER ROLE migrator REPLICATION",
            "no free replication slot (10 of max_replication_slots = 10 in use)",
            "GRANT CREATE ON DATABASE",
            "a replication slot named sql2ddb_r1 exists already",
            "DROP PUBLICATION sql2ddb_r1",
        ];
        assert_eq!(reasons.len(), expected.len(), "{reasons:#?}");
        for (reason, part) in reasons.iter().zip(expected) {
            assert!(reason.contains(part), "{reason:?} should say {part:?}");
        }
    }
}
