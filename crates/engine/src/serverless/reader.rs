//! A reader with a deadline: a run cut at the queue that stops in time.
//!
//! A function has a hard end (Lambda: at most 15 minutes). The run reads
//! and enqueues pages as `run --queue` does; a watcher estimates how long a
//! page takes and, once the time left is under the margin, raises the run's
//! [`StopSignal`]: the readers stop after the page they are reading, and
//! every segment's cursor is in the progress table for the next invocation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sql2ddb_mapping::Plan;

use crate::error::EngineError;
use crate::progress::{EntityProgress, RunProgress};
use crate::report::RunReport;
use crate::resources::{Job, Resources};
use crate::run::RunOptions;
use crate::stop::StopSignal;

/// The smallest margin before the deadline at which a reader stops.
pub const MIN_MARGIN: Duration = Duration::from_secs(10);

/// How often the watcher looks at the clock and the counters.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// How a reader invocation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReaderOutcome {
    /// Every segment is read: the chain ends.
    Finished,
    /// Time ran short: stopped after a page, cursors recorded; the run
    /// continues in another invocation.
    TimeUp,
    /// The run was read to its end before this invocation: nothing done.
    AlreadyFinished,
    /// The run failed (the report says why); another attempt would resume it.
    Failed,
}

/// What one reader invocation did.
#[derive(Debug, Clone, Serialize)]
pub struct ReaderStep {
    /// The run.
    pub run_id: crate::RunId,
    /// How it ended.
    pub outcome: ReaderOutcome,
    /// The margin it stopped at (or would have).
    pub margin_ms: u64,
    /// The run's report; `None` when nothing was done.
    pub report: Option<RunReport>,
}

/// Runs (or, with `opts.resume`, continues) `plan`'s migration into the
/// queue `opts.queue` until every segment is read or the time left before
/// `deadline` is under the margin: at least `min_margin`, and twice the
/// slowest page seen so far. It reads at least one page, whatever the time.
pub async fn read_until(
    plan: &Plan,
    opts: &RunOptions,
    deadline: Instant,
    min_margin: Duration,
) -> Result<ReaderStep, EngineError> {
    if opts.queue.is_none() && !opts.resume {
        return Err(EngineError::Config(
            "a reader with a deadline sends its pages to a queue: give the queue URL".into(),
        ));
    }
    // One AWS context and DynamoDB handle for the read and the checks
    // before and after it (a Lambda function's own context, when it gave
    // it).
    let opts = &opts.with_job_context(plan).await;
    if let (true, Some(run_id)) = (opts.resume, &opts.run_id) {
        if run_is_read(plan, opts, run_id).await? {
            return Ok(ReaderStep {
                run_id: run_id.clone(),
                outcome: ReaderOutcome::AlreadyFinished,
                margin_ms: 0,
                report: None,
            });
        }
    }
    let stop = StopSignal::new();
    let progress = RunProgress::new();
    let opts = RunOptions {
        stop: Some(stop.clone()),
        track_progress: true,
        ..opts.clone()
    };
    let watcher = Watcher {
        progress: progress.clone(),
        stop,
        deadline,
        min_margin,
        readers: opts.source_connections.max(1),
    };
    let watch = tokio::spawn(watcher.watch());
    let report = crate::run::run(plan, &opts, progress).await;
    watch.abort();
    let margin = watch.await.unwrap_or(min_margin);
    let report = report?;
    let run_id = report.run_id.clone();
    let outcome = if matches!(
        report.status,
        crate::RunStatus::Failed | crate::RunStatus::Throttled
    ) {
        ReaderOutcome::Failed
    } else if run_is_read(plan, &opts, &run_id).await? {
        ReaderOutcome::Finished
    } else {
        ReaderOutcome::TimeUp
    };
    Ok(ReaderStep {
        run_id,
        outcome,
        margin_ms: margin.as_millis() as u64,
        report: Some(report),
    })
}

/// Whether every segment of run `run_id` is read (its total recorded),
/// by the run's records in its progress table.
pub async fn run_is_read(
    plan: &Plan,
    opts: &RunOptions,
    run_id: &crate::RunId,
) -> Result<bool, EngineError> {
    let resources = Resources::open(Some(plan), &opts.resource_options(), Job::Status).await?;
    every_segment_read(&resources.progress_store()?, run_id).await
}

/// Whether the progress table records a total for every segment of run
/// `run_id` (a run it does not know is not read).
pub(crate) async fn every_segment_read(
    store: &sql2ddb_dynamo::progress::ProgressStore,
    run_id: &crate::RunId,
) -> Result<bool, EngineError> {
    if !store.exists().await? {
        return Ok(false);
    }
    let recorded = store.load(run_id).await?;
    let Some(meta) = &recorded.meta else {
        return Ok(false);
    };
    Ok(meta.entities.iter().all(|e| {
        (0..e.segments).all(|s| {
            recorded
                .totals
                .iter()
                .any(|t| t.entity == e.name && t.segment == s)
        })
    }))
}

/// Raises the stop once the time left is under the margin.
struct Watcher {
    progress: Arc<RunProgress>,
    stop: Arc<StopSignal>,
    deadline: Instant,
    min_margin: Duration,
    /// Segments read at once: a page takes about this many gaps between
    /// pages seen across all of them.
    readers: u32,
}

impl Watcher {
    /// Watches until it stops the run; returns the margin it used last.
    /// The slowest page is estimated from the longest gap between two
    /// changes of the rows read, times the readers reading at once: an
    /// estimate on the safe side.
    async fn watch(self) -> Duration {
        let mut last_read = 0u64;
        // Unset until the first page: the time before it is the run's set-up.
        let mut last_change: Option<Instant> = None;
        let mut slowest = Duration::ZERO;
        loop {
            let read: u64 = self
                .progress
                .entities()
                .iter()
                .map(|e| EntityProgress::get(&e.read))
                .sum();
            let now = Instant::now();
            if read != last_read {
                if let Some(last) = last_change {
                    slowest = slowest.max(now - last);
                }
                last_read = read;
                last_change = Some(now);
            }
            let margin = self.min_margin.max(slowest * 2 * self.readers);
            // Every invocation reads at least one page, so a chain always
            // moves on, however long the run's set-up took.
            let moved = last_change.is_some();
            if moved && self.deadline.saturating_duration_since(now) < margin {
                tracing::info!(
                    margin_ms = margin.as_millis() as u64,
                    "time left under the margin: stopping after the pages being read"
                );
                self.stop.stop();
                return margin;
            }
            tokio::time::sleep(WATCH_EVERY).await;
        }
    }
}
