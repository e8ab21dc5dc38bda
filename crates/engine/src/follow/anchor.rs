//! What a follow is anchored to on the source, and every check before it
//! exists: the PostgreSQL slot and publication of a run (named, checked,
//! created, dropped, read), the MySQL/MariaDB binary log's preconditions and
//! position, and `check --follow`'s list of reasons.

use sql2ddb_mapping::Plan;
use sql2ddb_source::cdc::{check_slot_name, format_lsn};
use sql2ddb_source::Source;

use super::{binlog_start, entities, owner, refusals, BinlogPosition, MappingOwner, SlotState};
use crate::error::EngineError;

/// The slot (and publication) name of a run: `sql2ddb_` and the run id,
/// lower-cased, every other character `_`.
pub fn slot_name(run_id: &str) -> String {
    let mut name: String = format!("sql2ddb_{run_id}")
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '_',
        })
        .collect();
    name.truncate(63);
    name
}

/// Checks everything slot `slot` (and its publication) needs to be
/// created and followed for `plan`, and refuses with every reason at once.
pub async fn check_slot(plan: &Plan, source_url: &str, slot: &str) -> Result<(), EngineError> {
    check_slot_name(slot)?;
    let source = Source::connect(source_url, 2).await?;
    let result = refusals::check_slot(&source, plan, slot).await;
    source.close().await;
    result
}

/// Every reason `plan` cannot be followed from `source_url`, as `run
/// --follow` checks them before it creates anything (the server's settings,
/// the user's privileges, each table's key and replica identity, the
/// mapping's entities), all at once; creates nothing (`check --follow`).
pub async fn check_followable(plan: &Plan, source_url: &str) -> Result<(), EngineError> {
    if let Some(why) = unfollowable_source(source_url) {
        return Err(EngineError::Refused {
            reasons: vec![why.into()],
        });
    }
    let source = Source::connect(source_url, 2).await?;
    let result = followable_reasons(&source, plan, source_url).await;
    source.close().await;
    entities::refuse_all(result?)
}

/// Every reason `plan` cannot be followed from `source` (at
/// `source_url`), as [`check_followable`] finds them; an entity's reasons
/// name it ([`entities::reason_entity`]).
pub(crate) async fn followable_reasons(
    source: &Source,
    plan: &Plan,
    source_url: &str,
) -> Result<Vec<String>, EngineError> {
    match is_binlog_source(source_url) {
        true => refusals::binlog_reasons(source, plan).await,
        // No slot is named yet: a run names its own after its id.
        false => refusals::slot_reasons(source, plan, "").await,
    }
}

/// Why no follow can read `source_url` (neither PostgreSQL nor
/// MySQL/MariaDB); `None` when one can.
pub(crate) fn unfollowable_source(source_url: &str) -> Option<&'static str> {
    (!is_binlog_source(source_url) && !is_postgres_source(source_url)).then_some(
        "following changes needs a PostgreSQL (logical replication) or MySQL/MariaDB (binary log) source; a SQLite file can only be loaded",
    )
}

/// Whether `source_url` names a PostgreSQL server.
fn is_postgres_source(source_url: &str) -> bool {
    let scheme = source_url.split("://").next().unwrap_or_default();
    scheme.eq_ignore_ascii_case("postgres") || scheme.eq_ignore_ascii_case("postgresql")
}

/// Checks as [`check_slot`] does, then creates the publication of the
/// tables of `plan` and the slot, both named `slot`, records that they
/// belong to `plan` ([`MappingOwner`]), and returns the slot's consistent
/// point. Call it before the full load's snapshot.
pub async fn create_slot(plan: &Plan, source_url: &str, slot: &str) -> Result<u64, EngineError> {
    check_slot_name(slot)?;
    let source = Source::connect(source_url, 2).await?;
    let result = async {
        refusals::check_slot(&source, plan, slot).await?;
        let tables = entities::tables(plan)?;
        let refs: Vec<&str> = tables.iter().map(String::as_str).collect();
        let at = source.create_slot(slot, slot, &refs).await?;
        if let Err(e) = owner::record_slot(&source, slot, &MappingOwner::of(plan)).await {
            let _ = source.drop_slot(slot, slot).await;
            return Err(e);
        }
        Ok::<_, EngineError>(at)
    }
    .await;
    source.close().await;
    result
}

/// MySQL/MariaDB, before the full load: checks that every entity of `plan`
/// can be followed, that the server writes the binary log as a follower
/// needs it (row format, full images) and that the user may read it,
/// refusing with every reason at once; then records in `run_dir` that the
/// run belongs to `plan` ([`MappingOwner`]). The position comes from the
/// full load's snapshot.
pub async fn check_binlog(
    plan: &Plan,
    source_url: &str,
    run_dir: &std::path::Path,
) -> Result<(), EngineError> {
    let source = Source::connect(source_url, 2).await?;
    let result = refusals::check_binlog(&source, plan).await;
    source.close().await;
    result?;
    owner::record_run(run_dir, &MappingOwner::of(plan))
}

/// Whether `source_url` names a MySQL or MariaDB server (followed through
/// its binary log rather than a slot).
pub fn is_binlog_source(source_url: &str) -> bool {
    let scheme = source_url.split("://").next().unwrap_or_default();
    scheme.eq_ignore_ascii_case("mysql") || scheme.eq_ignore_ascii_case("mariadb")
}

/// MySQL/MariaDB: the position a run's follower has applied up to, and the
/// source's current end of the binary log.
pub async fn binlog_state(
    source_url: &str,
    run_dir: &std::path::Path,
) -> Result<(BinlogPosition, BinlogPosition), EngineError> {
    let applied = binlog_start(run_dir)?;
    let source = Source::connect(source_url, 1).await?;
    let current = source.binlog_position().await;
    source.close().await;
    Ok((applied, current?))
}

/// Drops the slot and the publication named `slot`, unless they belong to
/// another mapping than `plan`.
pub async fn drop_slot(plan: &Plan, source_url: &str, slot: &str) -> Result<(), EngineError> {
    check_slot_name(slot)?;
    let source = Source::connect(source_url, 1).await?;
    let result = drop_slot_on(&source, plan, slot).await;
    source.close().await;
    result
}

/// [`drop_slot`] on a source connected already.
pub(crate) async fn drop_slot_on(
    source: &Source,
    plan: &Plan,
    slot: &str,
) -> Result<(), EngineError> {
    check_slot_name(slot)?;
    owner::check_slot(source, slot, &MappingOwner::of(plan)).await?;
    Ok(source.drop_slot(slot, slot).await?)
}

/// Where slot `slot` stands; `None` when there is no such slot.
pub async fn slot_state(source_url: &str, slot: &str) -> Result<Option<SlotState>, EngineError> {
    let source = Source::connect(source_url, 1).await?;
    let state = source.slot_state(slot).await;
    source.close().await;
    Ok(state?)
}

/// An LSN as PostgreSQL writes it (`16/B374D848`).
pub fn lsn_text(lsn: u64) -> String {
    format_lsn(lsn)
}
