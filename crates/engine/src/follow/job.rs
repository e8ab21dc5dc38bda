//! A follow as one job: the changes applied until a stop, an idle period
//! or the cutover; at a cutover, the table compared with the source item
//! by item (`verify --deep`), then (PostgreSQL) the slot dropped once the
//! table equals the source, or kept so that the cutover can be made again
//! from where it stopped. `sql2ddb follow` and `run --follow` both run it;
//! they print what it tells them ([`FollowEvent`]) and turn its
//! [`FollowOutcome`] into an exit code.

use std::path::PathBuf;
use std::sync::Arc;

use sql2ddb_mapping::Plan;

use sql2ddb_source::Source;

use super::anchor::drop_slot_on;
use super::{follow_on, FollowEnd, FollowOptions, FollowReport};
use crate::deep::{
    verify_deep, DeepOptions, DeepProgress, DeepReport, DEFAULT_MEMORY_BUDGET,
    DEFAULT_SCAN_SEGMENTS,
};
use crate::error::EngineError;
use crate::progress::RunProgress;

/// What happens in a follow job, as it happens (the caller prints it).
pub enum FollowEvent<'a> {
    /// The follow itself ended: its report.
    Followed(&'a FollowReport),
    /// At a cutover: the comparison with the source begins.
    Comparing,
    /// The comparison's report.
    Compared(&'a DeepReport),
}

/// How a follow job ended.
pub struct FollowOutcome {
    /// The follow: its report, or why it stopped (its position kept).
    pub follow: Result<FollowReport, EngineError>,
    /// What came after a cutover; `None` when the follow did not end at
    /// one.
    pub cutover: Option<Cutover>,
}

/// After a cutover: the comparison and what became of the slot.
pub struct Cutover {
    /// The table compared with the source.
    pub compared: Compared,
    /// What became of the slot.
    pub slot: SlotFate,
}

/// The table compared with the source after a cutover.
pub enum Compared {
    /// Not asked (`--no-verify`).
    Skipped,
    /// Compared: equal when [`DeepReport::clean`].
    Done(DeepReport),
    /// The comparison could not be made.
    Failed(EngineError),
}

impl Compared {
    /// Whether the table is known to equal the source, or was not compared.
    pub fn equal_or_skipped(&self) -> bool {
        match self {
            Compared::Skipped => true,
            Compared::Done(r) => r.clean(),
            Compared::Failed(_) => false,
        }
    }
}

/// The slot after a cutover.
pub enum SlotFate {
    /// MySQL/MariaDB: there is no slot (the position is a file of the run).
    NoSlot,
    /// Dropped, with its publication: the table equals the source.
    Dropped,
    /// Kept at the cutover's position: the table differs, or was not
    /// compared to the end.
    Kept,
    /// The table equals the source, but dropping failed.
    DropFailed(EngineError),
}

/// Follows as `opts` says; at a cutover, compares the table with the
/// source when `compare`, then drops the slot if it is equal (or was not
/// compared). `runs_dir` is where the comparison's run directory goes.
pub async fn follow_job(
    plan: &Plan,
    opts: &FollowOptions,
    compare: bool,
    runs_dir: &std::path::Path,
    progress: &RunProgress,
    on: &(dyn Fn(FollowEvent<'_>) + Sync),
) -> FollowOutcome {
    // One AWS context and DynamoDB handle for the follow and a cutover's
    // comparison.
    let opts = &FollowOptions {
        resources: opts.resources.with_job_context(Some(plan)).await,
        ..opts.clone()
    };
    // One source for the follow and the slot's drop after it: each
    // connection costs its set-up (a TLS handshake) again.
    let source = match Source::connect(&opts.source, 2).await {
        Ok(source) => source,
        Err(e) => {
            return FollowOutcome {
                follow: Err(e.into()),
                cutover: None,
            }
        }
    };
    let outcome = follow_then_cut_over(&source, plan, opts, compare, runs_dir, progress, on).await;
    source.close().await;
    outcome
}

/// [`follow_job`] on `source`.
async fn follow_then_cut_over(
    source: &Source,
    plan: &Plan,
    opts: &FollowOptions,
    compare: bool,
    runs_dir: &std::path::Path,
    progress: &RunProgress,
    on: &(dyn Fn(FollowEvent<'_>) + Sync),
) -> FollowOutcome {
    let report = match follow_on(source, plan, opts, progress).await {
        Ok(report) => report,
        Err(e) => {
            return FollowOutcome {
                follow: Err(e),
                cutover: None,
            }
        }
    };
    on(FollowEvent::Followed(&report));
    if report.end != FollowEnd::CutOver {
        return FollowOutcome {
            follow: Ok(report),
            cutover: None,
        };
    }
    let compared = match compare {
        false => Compared::Skipped,
        true => {
            on(FollowEvent::Comparing);
            match compare_with_source(plan, opts, runs_dir.to_path_buf()).await {
                Ok(deep) => {
                    on(FollowEvent::Compared(&deep));
                    Compared::Done(deep)
                }
                Err(e) => Compared::Failed(e),
            }
        }
    };
    let slot = match (&opts.binlog, compared.equal_or_skipped()) {
        (Some(_), _) => SlotFate::NoSlot,
        (None, false) => SlotFate::Kept,
        (None, true) => match drop_slot_on(source, plan, &opts.slot).await {
            Ok(()) => SlotFate::Dropped,
            Err(e) => SlotFate::DropFailed(e),
        },
    };
    FollowOutcome {
        follow: Ok(report),
        cutover: Some(Cutover { compared, slot }),
    }
}

/// Every item of the table compared with what the mapping makes of the
/// source now, with the follow's source, endpoint, region and AWS context.
async fn compare_with_source(
    plan: &Plan,
    opts: &FollowOptions,
    runs_dir: PathBuf,
) -> Result<DeepReport, EngineError> {
    let deep = DeepOptions {
        run: crate::RunOptions {
            source: Some(opts.source.clone()),
            endpoint: opts.resources.endpoint.clone(),
            region: opts.resources.region.clone(),
            job_context: opts.resources.job_context.clone(),
            runs_dir,
            run_id: Some(crate::new_run_id()),
            ..crate::RunOptions::default()
        },
        entity: None,
        sample: None,
        max_rcu: None,
        segments: DEFAULT_SCAN_SEGMENTS,
        memory_budget: DEFAULT_MEMORY_BUDGET,
    };
    let progress = RunProgress::new();
    verify_deep(plan, &deep, &progress, Arc::new(DeepProgress::default())).await
}
