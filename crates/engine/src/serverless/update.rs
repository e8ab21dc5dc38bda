//! An update job's reader with a deadline: `sql2ddb update --queue` cut
//! where a function's life ends. It reads and sends pages until the time
//! left is under the margin (at least `min_margin`, plus the slowest page
//! seen), each segment's cursor in the progress table, so the next
//! invocation continues the run with `resume`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sql2ddb_mapping::UpdateJob;

use super::reader::ReaderOutcome;
use crate::error::EngineError;
use crate::resources::{Job, ResourceOptions, Resources};
use crate::update::{update, UpdateOptions, UpdateProgress, UpdateReport, UpdateStatus};
use sql2ddb_dynamo::progress::default_table;

/// What one invocation of an update job's reader did.
#[derive(Debug, Clone, Serialize)]
pub struct UpdateStep {
    /// The run.
    pub run_id: crate::RunId,
    /// How it ended.
    pub outcome: ReaderOutcome,
    /// The margin it kept before the deadline.
    pub margin_ms: u64,
    /// The attempt's report; `None` when nothing was done.
    pub report: Option<UpdateReport>,
}

/// Runs (or, with `opts.resume`, continues) `job` into the queue
/// `opts.queue` until every segment is read or no page would end before
/// `deadline` less `min_margin`. It reads at least one page per segment.
pub async fn update_until(
    job: &UpdateJob,
    opts: &UpdateOptions,
    deadline: Instant,
    min_margin: Duration,
) -> Result<UpdateStep, EngineError> {
    if opts.queue.is_none() {
        return Err(EngineError::Config(
            "an update reader with a deadline sends its pages to a queue: give the queue URL"
                .into(),
        ));
    }
    let run_id = opts.run_id.clone().unwrap_or_else(crate::new_run_id);
    if opts.resume && already_read(job, opts, &run_id).await? {
        return Ok(UpdateStep {
            run_id,
            outcome: ReaderOutcome::AlreadyFinished,
            margin_ms: 0,
            report: None,
        });
    }
    let opts = UpdateOptions {
        deadline: Some(deadline.checked_sub(min_margin).unwrap_or(deadline)),
        run_id: Some(run_id),
        ..opts.clone()
    };
    let report = update(job, &opts, Arc::new(UpdateProgress::default())).await?;
    let outcome = match report.status {
        UpdateStatus::Failed | UpdateStatus::Interrupted | UpdateStatus::Throttled => {
            ReaderOutcome::Failed
        }
        UpdateStatus::TimeUp => ReaderOutcome::TimeUp,
        UpdateStatus::Ok => ReaderOutcome::Finished,
    };
    Ok(UpdateStep {
        run_id: report.run_id.clone(),
        outcome,
        margin_ms: min_margin.as_millis() as u64,
        report: Some(report),
    })
}

/// Whether every segment of the job's run `run_id` was read already, by
/// its progress table.
async fn already_read(
    job: &UpdateJob,
    opts: &UpdateOptions,
    run_id: &crate::RunId,
) -> Result<bool, EngineError> {
    let table = &job.target.table;
    let options = ResourceOptions {
        endpoint: opts.endpoint.clone().or(job.target.endpoint.clone()),
        region: opts.region.clone().or(job.target.region.clone()),
        progress_table: Some(
            opts.progress_table
                .clone()
                .unwrap_or_else(|| default_table(table)),
        ),
        sqs_endpoint: None,
        job_context: opts.job_context.clone(),
    };
    let resources = Resources::open(None, &options, Job::Status).await?;
    let read = super::reader::every_segment_read(&resources.progress_store()?, run_id).await;
    resources.close().await;
    read
}
