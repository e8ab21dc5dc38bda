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

mod anchor;
mod apply;
mod entities;
mod handover;
mod job;
pub(crate) use entities::reason_entity;
mod owner;
mod pipeline;
mod plan;
mod record;
mod refusals;
mod rerender;
mod status;
mod stream;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sql2ddb_aws::{Attempt, Retrier, RetryPolicy};
use sql2ddb_mapping::Plan;
use sql2ddb_source::cdc::{check_slot_name, format_lsn, BinlogReader, ReadAhead, Relations};
use sql2ddb_source::{Dialect, Source};

pub use anchor::{
    binlog_state, check_binlog, check_followable, check_slot, create_slot, drop_slot,
    is_binlog_source, lsn_text, slot_name, slot_state,
};
pub(crate) use anchor::{followable_reasons, unfollowable_source};
pub use handover::{run_and_follow, Anchor, FollowAfterLoad, RunFollowEvent, RunFollowOutcome};
pub use job::{follow_job, Compared, Cutover, FollowEvent, FollowOutcome, SlotFate};
pub use owner::{MappingOwner, FOLLOW_MAPPING};
use pipeline::{Applied, ReadSide, WriteSide};
pub use plan::ApplyCounts;
pub use record::{
    read_file as read_record, FollowRecord, FollowState, RecordTarget, RecordedCounts,
    FOLLOW_RECORD,
};
pub use sql2ddb_source::cdc::{replica_server_id, BinlogPosition, SlotState};
pub use status::{follow_status, FollowStatus, SourceNow};
pub use stream::{binlog_start, write_checkpoint, BINLOG_CHECKPOINT, BINLOG_COLUMNS};
use stream::{Checkpoint, Reader};

use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::rejects::RejectsFile;
use crate::resources::{Job, ResourceOptions, Resources};
use crate::settings::WriterSettings;
use crate::sink::{table_writer, write_limits};
use crate::stop::StopSignal;

/// Most messages read from the slot in one batch (a transaction is never cut).
pub const DEFAULT_BATCH_CHANGES: usize = 10_000;

/// Retained WAL past which every note warns that the slot fills the disk.
pub const RETAINED_WARNING_BYTES: u64 = 1 << 30;

/// How a follow runs.
#[derive(Clone)]
pub struct FollowOptions {
    /// The source URL (the mapping's, or the command line's).
    pub source: String,
    /// DynamoDB endpoint and region.
    pub resources: ResourceOptions,
    /// How the changes are written: the settings the job resolved once
    /// ([`WriterSettings::resolve`]), the full load's for `run --follow`.
    pub writer: WriterSettings,
    /// The slot (and publication) to read.
    pub slot: String,
    /// Stop once no change has come for this long.
    pub until_idle: Option<Duration>,
    /// Apply everything committed on the source when the follow starts,
    /// then stop. The slot is kept: [`drop_slot`] once the table is
    /// compared with the source.
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

impl FollowOptions {
    /// The hand-over of `run --follow`: how the follow goes on from the
    /// full load that `opts` ran and `report` describes, with the same
    /// source, endpoint, region and AWS context, and the writer settings
    /// the full load resolved from the same flags and mapping (never the
    /// mapping's alone). PostgreSQL reads the run's slot, MySQL/MariaDB the
    /// binary log from the run's directory as replica `server_id` (the
    /// run's own, [`replica_server_id`], when `None`). How it
    /// stops (`until_idle`, `cutover`, `stop`) is the caller's.
    pub fn after_full_load(
        plan: &Plan,
        opts: &crate::RunOptions,
        report: &crate::RunReport,
        server_id: Option<u32>,
    ) -> FollowOptions {
        let source = opts
            .source
            .clone()
            .unwrap_or_else(|| plan.source.url.clone());
        let run_dir = PathBuf::from(&report.run_dir);
        let binlog = is_binlog_source(&source).then(|| BinlogFollow {
            run_dir: run_dir.clone(),
            server_id: server_id.unwrap_or_else(|| replica_server_id(&report.run_id)),
        });
        FollowOptions {
            slot: match binlog {
                Some(_) => report.run_id.to_string(),
                None => slot_name(&report.run_id),
            },
            source,
            resources: ResourceOptions {
                progress_table: None,
                sqs_endpoint: None,
                ..opts.resource_options()
            },
            writer: opts.writer_settings(plan),
            until_idle: None,
            cutover: false,
            stop: None,
            rejects: run_dir.join(FOLLOW_REJECTS),
            batch_changes: DEFAULT_BATCH_CHANGES,
            binlog,
            record: Some(RecordTarget {
                run_id: report.run_id.clone(),
                run_dir,
                progress_table: report.progress_table.clone(),
            }),
        }
    }
}

/// The file, in the run's directory, of the rows a run's follow rejects.
pub const FOLLOW_REJECTS: &str = "follow-rejects.jsonl";

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
    /// Cut over: everything committed on the source when the follow
    /// started is applied (the slot is still there: [`drop_slot`]).
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
    /// What the changes were written with.
    pub writer: WriterSettings,
}

/// Follows the slot named in `opts` until it is told to stop, idles for
/// `until_idle`, or (with `cutover`) has applied everything committed when
/// it started (PostgreSQL: up to a fence message it writes, committed with
/// its WAL flushed, so transactions committed with `synchronous_commit =
/// off` are waited for too); `progress` gets a line now and then (position, lag).
pub async fn follow(
    plan: &Plan,
    opts: &FollowOptions,
    progress: &RunProgress,
) -> Result<FollowReport, EngineError> {
    if opts.binlog.is_none() {
        check_slot_name(&opts.slot)?;
    }
    let source = Source::connect(&opts.source, 2).await?;
    let result = follow_on(&source, plan, opts, progress).await;
    source.close().await;
    result
}

/// [`follow`] on a source connected already (with two connections at
/// least: the reader holds one).
pub(crate) async fn follow_on(
    source: &Source,
    plan: &Plan,
    opts: &FollowOptions,
    progress: &RunProgress,
) -> Result<FollowReport, EngineError> {
    if opts.binlog.is_none() {
        check_slot_name(&opts.slot)?;
    }
    // Before anything is read or moved: the slot or run is this mapping's.
    let given = MappingOwner::of(plan);
    let owned = match (&opts.binlog, source.dialect()) {
        (Some(b), _) => owner::check_run(&b.run_dir, &given),
        (None, Dialect::MySql) => Ok(()),
        (None, _) => owner::check_slot(source, &opts.slot, &given).await,
    };
    match owned {
        Ok(()) => follow_with(source, plan, opts, progress).await,
        Err(e) => Err(e),
    }
}

/// Waiting for a slot's read-ahead copy that another reader holds: the copy
/// of a follower that just ended lasts until the server notices its
/// connection is gone, a moment; about 3 seconds of waits in all.
const COPY_WAIT: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(250),
    cap: Duration::from_secs(1),
    max_attempts: 8,
    throttle_budget: None,
};

/// Opens `slot`'s read-ahead copy, waiting through the retry engine while
/// another reader holds it; that reader's error once the waits are spent.
async fn read_ahead(source: &Source, slot: &str) -> Result<ReadAhead, EngineError> {
    Retrier::new(COPY_WAIT)
        .run("copy replication slot", (), |()| async move {
            match source.open_slot_reader(slot, slot).await {
                Ok(ReadAhead::Held(error)) => Attempt::Retry {
                    work: (),
                    throttled: false,
                    error,
                },
                Ok(other) => Attempt::Done(other),
                Err(error) => Attempt::GiveUp(error),
            }
        })
        .await
        .map_err(|gave_up| gave_up.error.into())
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
        let reader = match read_ahead(source, slot).await? {
            ReadAhead::Copy(copy) => Reader::Copy(copy),
            ReadAhead::Held(err) => return Err(err.into()),
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
    // The settings the job resolved once, as the full load writes: calls
    // in flight (adaptive or not), write-capacity cap, retry budget.
    let policy = opts.writer.retry;
    let (controller, limiter) = write_limits(&opts.writer);
    let writer = table_writer(plan, &opts.writer, resources.calls(), &controller, &limiter);
    progress.note(format!("follow writes with {}", opts.writer.describe()));
    let rejects = rejects_file(opts)?;
    let target = plan::Target {
        dynamo: resources.client(),
        writer: &writer,
        table: &plan.target.table,
        keys: &keys,
        policy: &policy,
        rejects: &rejects,
    };
    let followed = apply_stream(source, plan, opts, &by_table, &target, progress).await;
    resources.close().await;
    followed
}

/// Opens the follow's stream and applies it to `target` until the follow
/// ends, keeping the run's record (when it has one) as it goes.
async fn apply_stream(
    source: &Source,
    plan: &Plan,
    opts: &FollowOptions,
    by_table: &Arc<entities::ByTable>,
    target: &plan::Target<'_>,
    progress: &RunProgress,
) -> Result<FollowReport, EngineError> {
    let Opened {
        reader,
        mut checkpoint,
        start,
        name,
        binlog_cut,
        fenced,
    } = open_to_cut(source, plan, opts, by_table, progress).await?;
    let binlog = source.dialect() == Dialect::MySql;
    let slot = (!binlog).then_some(opts.slot.as_str());
    let mut record = record::Recorder::start(
        opts.record.as_ref(),
        target.dynamo,
        slot,
        checkpoint.text(start),
        progress,
    )
    .await;
    let read = ReadSide {
        source: source.clone(),
        by_table: by_table.clone(),
        keys: target.keys.to_vec(),
        batch_changes: opts.batch_changes.max(1),
        binlog_cut: binlog_cut.as_ref().map(BinlogPosition::ordinal),
        start,
        name: name.clone(),
    };
    let write = WriteSide {
        source,
        by_table,
        target,
        checkpoint: &mut checkpoint,
        record: &mut record,
        fenced,
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
    let state = result.as_ref().map(|end| FollowState::from(*end));
    record.finish(state, shown.clone(), &counts, progress).await;
    let end = result?;
    Ok(FollowReport {
        slot: name,
        end,
        position: shown,
        counts,
        rejects: opts.rejects.clone(),
        writer: opts.writer,
    })
}

/// Where a follow's rejects go, its directory made.
fn rejects_file(opts: &FollowOptions) -> Result<RejectsFile, EngineError> {
    if let Some(dir) = opts.rejects.parent() {
        std::fs::create_dir_all(dir).map_err(|e| EngineError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
    }
    Ok(RejectsFile::new(&opts.rejects))
}

/// A follow's stream, opened: the reader, the checkpoint, the first
/// position and the stream's name (see [`open_stream`]), and where a
/// cutover stops.
struct Opened {
    reader: Reader,
    checkpoint: Checkpoint,
    start: u64,
    name: String,
    /// MySQL/MariaDB at a cutover: the source's position when it started.
    binlog_cut: Option<BinlogPosition>,
    /// PostgreSQL at a cutover: a fence was written into the slot's stream.
    fenced: bool,
}

/// Opens the follow's stream, with (at a cutover) the point it stops at:
/// the binary log's position, or a fence written into the slot's stream,
/// both taken when the follow starts; says where it follows from.
async fn open_to_cut(
    source: &Source,
    plan: &Plan,
    opts: &FollowOptions,
    by_table: &entities::ByTable,
    progress: &RunProgress,
) -> Result<Opened, EngineError> {
    let binlog = source.dialect() == Dialect::MySql;
    let binlog_cut = match (opts.cutover, binlog) {
        (true, true) => Some(source.binlog_position().await?),
        _ => None,
    };
    let (mut reader, checkpoint, start, name) = open_stream(source, plan, opts, progress).await?;
    let fence = match (opts.cutover, binlog) {
        (true, false) => Some(write_fence(source, &opts.slot).await?),
        _ => None,
    };
    watch(source, by_table, &mut reader, fence.as_ref().map(|f| &f.0)).await?;
    let cut_text = match (&binlog_cut, &fence) {
        (Some(at), _) => Some(at.to_string()),
        (None, Some((_, lsn))) => Some(format!("{} (the fence written there)", format_lsn(*lsn))),
        (None, None) => None,
    };
    progress.note(format!(
        "following {name} from {}{}",
        checkpoint.text(start),
        match &cut_text {
            Some(at) => format!(", cutting over at {at}"),
            None => String::new(),
        }
    ));
    Ok(Opened {
        reader,
        checkpoint,
        start,
        name,
        binlog_cut,
        fenced: fence.is_some(),
    })
}

/// What a slot's reads watch for: the shapes of the followed tables (one
/// whose columns change in the stream stops the follower before its first
/// row in the new shape) and the cutover's fence.
async fn watch(
    source: &Source,
    by_table: &entities::ByTable,
    reader: &mut Reader,
    fence: Option<&String>,
) -> Result<(), EngineError> {
    let Some(relations) = reader.relations_mut() else {
        return Ok(());
    };
    for oid in by_table.parents.keys().chain(by_table.children.keys()) {
        relations.watch_shape(*oid, source.relation_shape(*oid).await?);
    }
    if let Some(content) = fence {
        relations.watch_fence(content.clone());
    }
    Ok(())
}

/// Writes a cutover's fence into slot `slot`'s stream: returns the
/// message's content (the slot's name and the time, so that the fence of
/// an earlier cutover is never taken for this one's) and its position.
async fn write_fence(source: &Source, slot: &str) -> Result<(String, u64), EngineError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let content = format!("{slot} {nanos}");
    let lsn = source.write_fence(&content).await?;
    Ok((content, lsn))
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
