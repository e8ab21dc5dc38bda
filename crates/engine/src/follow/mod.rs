//! `run --follow` / `follow`: after the full load, the source's changes are
//! read from a PostgreSQL logical replication slot or the MySQL/MariaDB
//! binary log and applied to the table, mapped exactly as the full load maps
//! rows, until a stop, an idle period or a cutover.
//!
//! **MySQL/MariaDB.** The full load's snapshot records the binary log
//! position it is consistent with (taken under a global read lock, so no
//! transaction falls between); the follower reads the log from there as a
//! replica, and its checkpoint is the end of the last transaction whose
//! writes are all acknowledged, kept in the run's directory
//! ([`BINLOG_CHECKPOINT`]). A follower killed in between reads those
//! transactions again; applying them twice gives the same items.
//!
//! **Anchor.** The slot is created before the full load takes its snapshot
//! ([`create_slot`]), so every transaction is either in the snapshot (it
//! committed before the slot's consistent point) or in the slot (after it).
//! Transactions that committed between the slot's point and the snapshot
//! are in both: they are applied again after the full load. That replay is
//! harmless because a change carries the whole row as it was then and each
//! item's changes are applied in commit order, so the item ends as the
//! last change left the row. Skipping them by LSN instead would not be
//! sound: a transaction's commit record can precede the snapshot's WAL
//! position and still be invisible to the snapshot.
//!
//! **Checkpoint.** The slot itself: changes are read (from a temporary
//! copy of the slot, so that the next batch can be read while one is
//! written), applied, and the slot is advanced past them only
//! once every write is acknowledged. A follower killed in between reads
//! those changes again on its next start.

mod apply;
mod entities;
mod pipeline;
mod plan;
mod record;
mod rerender;
mod status;
mod stream;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_mapping::Plan;
use sql2ddb_source::cdc::{check_slot_name, format_lsn, BinlogReader, ReadAhead, Relations};
use sql2ddb_source::{Dialect, Source};

use pipeline::{Applied, ReadSide, WriteSide};
pub use plan::ApplyCounts;
pub use record::{
    read_file as read_record, FollowRecord, FollowState, RecordTarget, RecordedCounts,
    FOLLOW_RECORD,
};
pub use sql2ddb_source::cdc::{BinlogPosition, SlotState, DEFAULT_SERVER_ID};
pub use status::{follow_status, FollowStatus, SourceNow};
pub use stream::{binlog_start, write_checkpoint, BINLOG_CHECKPOINT, BINLOG_COLUMNS};
use stream::{Checkpoint, Reader};

use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::rejects::RejectsFile;
use crate::resources::{Job, ResourceOptions, Resources};
use crate::sink::{table_writer, write_limits};
use crate::stop::StopSignal;

/// Most messages read from the slot in one batch (a transaction is never cut).
pub const DEFAULT_BATCH_CHANGES: usize = 10_000;

/// Retained WAL past which every note warns that the slot fills the disk.
pub const RETAINED_WARNING_BYTES: u64 = 1 << 30;

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

/// Checks that every entity of `plan` can be followed, then creates the
/// publication of their tables and the slot, both named `slot`, and returns
/// the slot's consistent point. Call it before the full load's snapshot.
pub async fn create_slot(plan: &Plan, source_url: &str, slot: &str) -> Result<u64, EngineError> {
    check_slot_name(slot)?;
    let source = Source::connect(source_url, 2).await?;
    let result = async {
        entities::prepare(&source, plan).await?;
        let tables = entities::tables(plan)?;
        let refs: Vec<&str> = tables.iter().map(String::as_str).collect();
        Ok::<_, EngineError>(source.create_slot(slot, slot, &refs).await?)
    }
    .await;
    source.close().await;
    result
}

/// MySQL/MariaDB, before the full load: checks that every entity of `plan`
/// can be followed and that the server writes the binary log as a follower
/// needs it (row format, full images). The position comes from the full
/// load's snapshot.
pub async fn check_binlog(plan: &Plan, source_url: &str) -> Result<(), EngineError> {
    let source = Source::connect(source_url, 2).await?;
    let result = async {
        source.check_binlog_settings().await?;
        entities::prepare(&source, plan).await?;
        Ok::<_, EngineError>(())
    }
    .await;
    source.close().await;
    result
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

/// Drops the slot and the publication named `slot`.
pub async fn drop_slot(source_url: &str, slot: &str) -> Result<(), EngineError> {
    check_slot_name(slot)?;
    let source = Source::connect(source_url, 1).await?;
    let result = source.drop_slot(slot, slot).await;
    source.close().await;
    Ok(result?)
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

/// How a follow runs.
#[derive(Clone)]
pub struct FollowOptions {
    /// The source URL (the mapping's, or the command line's).
    pub source: String,
    /// DynamoDB endpoint and region.
    pub resources: ResourceOptions,
    /// The slot (and publication) to read.
    pub slot: String,
    /// Stop once no change has come for this long.
    pub until_idle: Option<Duration>,
    /// Apply what the source holds now, then drop the slot and stop.
    pub cutover: bool,
    /// A stop request (SIGINT, SIGTERM): stop after the batch in hand.
    pub stop: Option<Arc<StopSignal>>,
    /// Where rows that cannot become items go.
    pub rejects: PathBuf,
    /// Most messages per batch.
    pub batch_changes: usize,
    /// MySQL/MariaDB: the run's directory (the checkpoint lives there) and
    /// the replica server id to read the binary log as.
    pub binlog: Option<BinlogFollow>,
    /// The run whose record (`status`) the follow keeps; `None` keeps none.
    pub record: Option<RecordTarget>,
}

/// How a MySQL/MariaDB source is followed.
#[derive(Clone, Debug)]
pub struct BinlogFollow {
    /// The run's directory: its `report.json` holds the snapshot's position,
    /// [`BINLOG_CHECKPOINT`] the applied one.
    pub run_dir: PathBuf,
    /// The server id the reader registers as (unique among the source's
    /// replicas, not the source's own).
    pub server_id: u32,
}

/// Why a follow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowEnd {
    /// A stop request.
    Stopped,
    /// No change for `until_idle`.
    Idle,
    /// Cut over: everything the source held at the cutover is applied, the
    /// slot is dropped.
    CutOver,
}

impl From<FollowEnd> for FollowState {
    fn from(end: FollowEnd) -> Self {
        match end {
            FollowEnd::Stopped => FollowState::Stopped,
            FollowEnd::Idle => FollowState::Idle,
            FollowEnd::CutOver => FollowState::CutOver,
        }
    }
}

/// What a follow did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FollowReport {
    /// The slot read (MySQL/MariaDB: the checkpoint file).
    pub slot: String,
    /// Why it ended.
    pub end: FollowEnd,
    /// Everything before it is applied.
    pub position: String,
    /// Changes, puts, deletes, rejects.
    pub counts: ApplyCounts,
    /// Where the rejects are.
    pub rejects: PathBuf,
}

/// Follows the slot named in `opts` until it is told to stop, idles for
/// `until_idle`, or (with `cutover`) has applied what the source held when
/// it started; `progress` gets a line now and then (position, lag).
pub async fn follow(
    plan: &Plan,
    opts: &FollowOptions,
    progress: &RunProgress,
) -> Result<FollowReport, EngineError> {
    if opts.binlog.is_none() {
        check_slot_name(&opts.slot)?;
    }
    let source = Source::connect(&opts.source, 2).await?;
    let result = follow_with(&source, plan, opts, progress).await;
    source.close().await;
    result
}

/// Where a follow reads, where its checkpoint is and its first position,
/// and what it is called in messages (the slot, or the checkpoint file).
async fn open_stream(
    source: &Source,
    plan: &Plan,
    opts: &FollowOptions,
    progress: &RunProgress,
) -> Result<(Reader, Checkpoint, u64, String), EngineError> {
    if source.dialect() != Dialect::MySql {
        let slot = opts.slot.as_str();
        let state = source.slot_state(slot).await?.ok_or_else(|| {
            EngineError::Config(format!(
                "replication slot {slot} does not exist in the source database (dropped, or created for another database)"
            ))
        })?;
        let reader = match source.open_slot_reader(slot, slot).await? {
            ReadAhead::Copy(copy) => Reader::Copy(copy),
            ReadAhead::Unavailable(why) => {
                progress.note(format!(
                    "reading replication slot {slot} one batch at a time, each once the one before is applied: {why}"
                ));
                Reader::Peek {
                    slot: slot.to_string(),
                    relations: Relations::default(),
                }
            }
        };
        let checkpoint = Checkpoint::Slot {
            slot: slot.to_string(),
        };
        let name = format!("replication slot {slot}");
        return Ok((reader, checkpoint, state.confirmed, name));
    }
    let Some(b) = &opts.binlog else {
        return Err(EngineError::Config(
            "a MySQL/MariaDB source is followed by run (--run RUN_ID): its binary log position is kept in the run's directory".into(),
        ));
    };
    let start = binlog_start(&b.run_dir)?;
    let path = b.run_dir.join(BINLOG_CHECKPOINT);
    if !path.exists() {
        write_checkpoint(&path, &start)?;
    }
    let tables = entities::tables(plan)?;
    let mut reader = BinlogReader::open(source, &opts.source, b.server_id, &start, &tables).await?;
    stream::bind_columns(&mut reader, source, &b.run_dir).await?;
    let name = format!("binary log checkpoint {}", path.display());
    let ordinal = start.ordinal();
    let checkpoint = Checkpoint::Binlog {
        path,
        position: start,
    };
    Ok((Reader::Binlog(Box::new(reader)), checkpoint, ordinal, name))
}

async fn follow_with(
    source: &Source,
    plan: &Plan,
    opts: &FollowOptions,
    progress: &RunProgress,
) -> Result<FollowReport, EngineError> {
    let by_table = Arc::new(entities::prepare(source, plan).await?);
    let resources = Resources::open(Some(plan), &opts.resources, Job::Status).await?;
    let keys = plan.key_attrs();
    let policy = RetryPolicy::default();
    // The mapping's writer settings, as the full load writes: calls in
    // flight (adaptive), write-capacity cap, retries.
    let w = &plan.writer;
    let (controller, limiter) = write_limits(w.concurrency.max(1), w.adaptive, w.max_wcu);
    let writer = table_writer(plan, policy, resources.calls(), &controller, &limiter);
    if let Some(dir) = opts.rejects.parent() {
        std::fs::create_dir_all(dir).map_err(|e| EngineError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
    }
    let rejects = RejectsFile::new(&opts.rejects);
    let target = plan::Target {
        dynamo: resources.client(),
        writer: &writer,
        table: &plan.target.table,
        keys: &keys,
        policy: &policy,
        rejects: &rejects,
    };
    let binlog = source.dialect() == Dialect::MySql;
    let cutover_at = match (opts.cutover, binlog) {
        (false, _) => None,
        (true, false) => Some(Cut::Lsn(source.current_wal_lsn().await?)),
        (true, true) => Some(Cut::Binlog(source.binlog_position().await?)),
    };
    let (reader, mut checkpoint, start, name) = open_stream(source, plan, opts, progress).await?;
    let cutover_ordinal = cutover_at.as_ref().map(|p| match p {
        Cut::Lsn(l) => *l,
        Cut::Binlog(b) => b.ordinal(),
    });
    progress.note(format!(
        "following {name} from {}{}",
        checkpoint.text(start),
        match &cutover_at {
            Some(at) => format!(", cutting over at {at}"),
            None => String::new(),
        }
    ));
    let slot = (!binlog).then_some(opts.slot.as_str());
    let mut record = record::Recorder::start(
        opts.record.as_ref(),
        resources.client(),
        slot,
        checkpoint.text(start),
        progress,
    )
    .await;
    let read = ReadSide {
        source: source.clone(),
        by_table: by_table.clone(),
        keys: keys.clone(),
        batch_changes: opts.batch_changes.max(1),
        binlog_cut: cutover_ordinal.filter(|_| binlog),
        start,
    };
    let write = WriteSide {
        source,
        by_table: &by_table,
        target: &target,
        checkpoint: &mut checkpoint,
        record: &mut record,
        slot_cut: cutover_ordinal.filter(|_| !binlog),
        until_idle: opts.until_idle,
        stop: opts.stop.clone(),
        progress,
        name: &name,
    };
    let mut applied = Applied {
        position: start,
        counts: ApplyCounts::default(),
    };
    let (result, reader) = pipeline::run(read, reader, write, &mut applied).await;
    let Applied { position, counts } = applied;
    let shown = checkpoint.text(position);
    if let Some(reader) = reader {
        reader.close().await;
    }
    let result = match result {
        Ok(FollowEnd::CutOver) if !binlog => source
            .drop_slot(&opts.slot, &opts.slot)
            .await
            .map(|()| FollowEnd::CutOver)
            .map_err(EngineError::from),
        other => other,
    };
    let state = result.as_ref().map(|end| FollowState::from(*end));
    record.finish(state, shown.clone(), &counts, progress).await;
    let end = result?;
    resources.close().await;
    Ok(FollowReport {
        slot: name,
        end,
        position: shown,
        counts,
        rejects: opts.rejects.clone(),
    })
}

/// Where a cutover stops.
enum Cut {
    Lsn(u64),
    Binlog(BinlogPosition),
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cut::Lsn(l) => f.write_str(&format_lsn(*l)),
            Cut::Binlog(b) => write!(f, "{b}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_gives_a_valid_slot_name() {
        let name = slot_name("20240501T100000Z-3f2a1c");
        assert_eq!(name, "sql2ddb_20240501t100000z_3f2a1c");
        assert!(check_slot_name(&name).is_ok());
        let long = slot_name(&"X".repeat(100));
        assert_eq!(long.len(), 63);
        assert!(check_slot_name(&long).is_ok());
    }
}
