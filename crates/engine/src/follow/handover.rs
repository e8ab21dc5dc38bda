//! `run --follow` as one job: what anchors the changes is made before the
//! full load (every reason it cannot be followed refused first, in one
//! list, before anything exists), then the full load, then the hand-over of
//! its position to the follow job ([`super::follow_job`]), with the writer
//! settings, source, endpoint and stop signal the load ran with. The
//! caller prints what it is told ([`RunFollowEvent`]) and maps the
//! [`RunFollowOutcome`] to an exit code.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sql2ddb_mapping::Plan;

use super::{
    check_binlog, check_slot, create_slot, follow_job, format_lsn, is_binlog_source, slot_name,
    FollowEvent, FollowOptions, FollowOutcome,
};
use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::{RunOptions, RunReport, RunStatus};

/// What anchors `run --follow`'s changes, made before the full load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// PostgreSQL: the replication slot it created (with its publication).
    Slot(String),
    /// MySQL/MariaDB: the snapshot's binary log position, which the full
    /// load records in the run's directory.
    Binlog,
}

/// How the follow after the full load stops, and what is done at a cutover.
#[derive(Debug, Clone, Default)]
pub struct FollowAfterLoad {
    /// MySQL/MariaDB: the replica server id (else the run's own).
    pub server_id: Option<u32>,
    /// Stop once no change has come for this long.
    pub until_idle: Option<Duration>,
    /// Apply everything committed when the follow starts, then cut over.
    pub cutover: bool,
    /// At a cutover, compare the table with the source before the slot is
    /// dropped.
    pub compare: bool,
}

/// What happens in `run --follow`, as it happens.
pub enum RunFollowEvent<'a> {
    /// The full load ended: its report. The follow starts after it when
    /// the load is complete.
    Loaded(&'a RunReport),
    /// The follow starts, as these options say.
    Following(&'a FollowOptions),
    /// The follow job's events.
    Follow(FollowEvent<'a>),
}

/// How `run --follow` ended.
pub struct RunFollowOutcome {
    /// What the changes are anchored to.
    pub anchor: Anchor,
    /// The full load's report, or why it could not run.
    pub load: Result<RunReport, EngineError>,
    /// The follow, when the load was complete (ok, or rows rejected): how
    /// it ran and ended.
    pub follow: Option<(FollowOptions, FollowOutcome)>,
}

/// `run --follow`: refuses (before anything exists) what cannot be
/// followed; anchors the changes; loads; then follows as `after` says from
/// the load's position. `opts.run_id` must be set (the anchor is named
/// after it). `Err` only when nothing was created.
pub async fn run_and_follow(
    plan: &Plan,
    opts: &RunOptions,
    after: &FollowAfterLoad,
    progress: Arc<RunProgress>,
    on: &(dyn Fn(RunFollowEvent<'_>) + Sync),
) -> Result<RunFollowOutcome, EngineError> {
    let run_id = opts
        .run_id
        .clone()
        .ok_or_else(|| EngineError::Config("run --follow needs its run id first".into()))?;
    // One AWS context and DynamoDB handle for the whole job: the table's
    // check, the load, the follow and a cutover's comparison each open
    // their resources with them.
    let opts = &opts.with_job_context(plan).await;
    // The run would refuse a table that holds items: before the anchor.
    crate::target::check_table(plan, opts).await?;
    let anchor = anchor(plan, opts, &opts.runs_dir.join(&run_id), &run_id, &progress).await?;
    let load = crate::run(plan, opts, progress.clone()).await;
    let report = match &load {
        Ok(report) => report,
        Err(_) => {
            return Ok(RunFollowOutcome {
                anchor,
                load,
                follow: None,
            })
        }
    };
    on(RunFollowEvent::Loaded(report));
    if !matches!(report.status, RunStatus::Ok | RunStatus::Rejected) {
        return Ok(RunFollowOutcome {
            anchor,
            load,
            follow: None,
        });
    }
    let follow = FollowOptions {
        until_idle: after.until_idle,
        cutover: after.cutover,
        stop: opts.stop.clone(),
        ..FollowOptions::after_full_load(plan, opts, report, after.server_id)
    };
    on(RunFollowEvent::Following(&follow));
    let followed = follow_job(
        plan,
        &follow,
        after.compare,
        &opts.runs_dir,
        &progress,
        &|event| on(RunFollowEvent::Follow(event)),
    )
    .await;
    Ok(RunFollowOutcome {
        anchor,
        load,
        follow: Some((follow, followed)),
    })
}

/// Before the full load: checks the mapping can be followed (every reason
/// at once, before anything is created) and (PostgreSQL) creates the slot
/// (named after the run) before the snapshot; the slot, or the run's
/// directory `run_dir`, records the mapping it belongs to.
async fn anchor(
    plan: &Plan,
    opts: &RunOptions,
    run_dir: &Path,
    run_id: &str,
    progress: &RunProgress,
) -> Result<Anchor, EngineError> {
    let source = opts.source.as_deref().unwrap_or(&plan.source.url);
    let endpoint = opts.endpoint.as_deref();
    if endpoint.or(plan.target.endpoint.as_deref()) == Some("local") {
        return Err(EngineError::Config("--follow needs a DynamoDB endpoint that outlives this process: `local` belongs to the full load's process; give --endpoint URL".into()));
    }
    if is_binlog_source(source) {
        check_binlog(plan, source, run_dir).await?;
        progress.note("the binary log is followed from the snapshot's position after the full load (the position is kept in the run's directory)");
        return Ok(Anchor::Binlog);
    }
    let slot = slot_name(run_id);
    check_slot(plan, source, &slot).await?;
    progress.note(format!("creating replication slot {slot} (it waits for the transactions in progress on the source to end)"));
    let at = create_slot(plan, source, &slot).await?;
    progress.note(format!(
        "replication slot {slot} created at {}: the changes from there are followed after the full load",
        format_lsn(at)
    ));
    Ok(Anchor::Slot(slot))
}
