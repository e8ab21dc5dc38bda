//! What a run takes besides the mapping.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_mapping::Plan;

use crate::ids::RunId;
use crate::if_not_empty::IfNotEmpty;
use crate::resources::{JobContext, ResourceOptions};
use crate::settings::WriterSettings;
use crate::sink::{Destination, SinkOptions};
use crate::stop::StopSignal;

/// Default number of source connections per run (keeps the source healthy).
pub const DEFAULT_SOURCE_CONNECTIONS: u32 = 4;

/// Once a run ended early (stopped, or failed while writing), how long
/// reading its figures back for the report may take (the progress table's
/// records, the pointers' values): past it, the report keeps this
/// process's own figures. An endpoint that holds every request cannot
/// keep the report from being written.
pub const REPORT_WAIT: Duration = Duration::from_secs(10);

/// Everything a run takes besides the mapping.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Overrides the mapping's source URL.
    pub source: Option<String>,
    /// Overrides the mapping's endpoint: `local` or a URL.
    pub endpoint: Option<String>,
    /// Overrides the mapping's region.
    pub region: Option<String>,
    /// Where run directories go (`<runs_dir>/<run id>/`).
    pub runs_dir: PathBuf,
    /// Overrides the mapping's writer concurrency.
    pub concurrency: Option<usize>,
    /// Overrides every entity's page size.
    pub page_size: Option<usize>,
    /// Retry parameters of the writers.
    pub retry: RetryPolicy,
    /// How long an item the table throttles is retried (`--retry-budget`),
    /// over the mapping's `[writer] retry_seconds`.
    pub retry_budget: Option<Duration>,
    /// Source connections of the run, also the most segments read at once.
    pub source_connections: u32,
    /// Overrides every entity's `read_parallelism` (segments per entity).
    pub read_parallelism: Option<u32>,
    /// Overrides the mapping's `max_wcu`: write units per second for this process.
    pub max_wcu: Option<u64>,
    /// Keeps concurrency fixed instead of adapting to throttling.
    pub fixed_concurrency: bool,
    /// Read and map everything, write nothing (no DynamoDB call at all): the
    /// source-read ceiling, and a full check of every row against the mapping.
    pub dry_run: bool,
    /// The run's id; a new one from [`crate::new_run_id`] when `None`. With
    /// `resume`, the run to continue.
    pub run_id: Option<RunId>,
    /// Continue run `run_id` from its checkpoints.
    pub resume: bool,
    /// Keep progress in the progress store (always so with `queue` or `resume`).
    pub track_progress: bool,
    /// The progress table; default `<target>-sql2ddb-progress`. Naming one
    /// turns progress tracking on.
    pub progress_table: Option<String>,
    /// Send pages to this SQS queue instead of writing them: workers write.
    pub queue: Option<String>,
    /// SQS endpoint URL (any SQS-compatible server); default AWS.
    pub sqs_endpoint: Option<String>,
    /// The job's context (its AWS context and DynamoDB handle), when the
    /// run is a phase of a job or the process has one already (see
    /// [`ResourceOptions::job_context`]); else the run loads its own.
    pub job_context: Option<JobContext>,
    /// Pause reading while the queue holds this many messages waiting.
    pub max_queued: Option<u64>,
    /// Raised to stop the run cleanly (Ctrl-C): readers stop after their
    /// page, writers finish within `shutdown_grace`, the report says
    /// `interrupted`.
    pub stop: Option<Arc<StopSignal>>,
    /// Once `stop` is raised, how long the pages handed to the writers may
    /// take to be written before the run gives up on them (they stay
    /// pending); then the report is written, within [`REPORT_WAIT`].
    pub shutdown_grace: Duration,
    /// Replay the rows of this rejects file (read again by key through the
    /// current mapping) instead of reading every row.
    pub only_rejects: Option<PathBuf>,
    /// Read one point-in-time snapshot of the source (PostgreSQL), or not.
    pub snapshot: SnapshotMode,
    /// What a fresh load does when the table already holds items: refuse
    /// (the default), write into it as it is, or empty it first. A resume
    /// and a replay of rejects write into their own run's table and are not
    /// asked.
    pub if_not_empty: IfNotEmpty,
    /// Where the pages go: the mapping's table (the default), or files
    /// (`sql2ddb export`, given with `dry_run`, so no DynamoDB call is
    /// made). A run reads a SQL source, so its pages are never an update
    /// job's: [`Destination::Updates`] is refused.
    pub destination: Destination,
}

/// Whether a run reads one consistent snapshot of its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotMode {
    /// Every read of the run sees the source as it was at one moment
    /// (PostgreSQL: an exported snapshot; other sources: not yet, and the
    /// report says so).
    #[default]
    Consistent,
    /// Each read sees the source as it is then: rows written during the run
    /// may or may not be in the copy.
    None,
}

impl RunOptions {
    /// Where the run's services are: the endpoint, region, progress table
    /// and SQS endpoint the options name.
    pub fn resource_options(&self) -> ResourceOptions {
        ResourceOptions {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            progress_table: self.progress_table.clone(),
            sqs_endpoint: self.sqs_endpoint.clone(),
            job_context: self.job_context.clone(),
        }
    }

    /// The options with the job's one context in them (see
    /// [`crate::job_context`]): every phase of a job of several phases
    /// (`run --follow`) runs with them, so the job loads one AWS context
    /// and makes one DynamoDB handle.
    pub async fn with_job_context(&self, plan: &Plan) -> RunOptions {
        let resources = self.resource_options().with_job_context(Some(plan)).await;
        RunOptions {
            job_context: resources.job_context,
            ..self.clone()
        }
    }

    /// The options' writer settings over `plan`'s `[writer]`, resolved as
    /// the full load resolves them: hand them to the follow after it.
    pub fn writer_settings(&self, plan: &Plan) -> WriterSettings {
        self.sink_options().writer_settings(plan)
    }

    /// The writer's part of the options.
    pub fn sink_options(&self) -> SinkOptions {
        SinkOptions {
            concurrency: self.concurrency,
            fixed_concurrency: self.fixed_concurrency,
            max_wcu: self.max_wcu,
            retry: self.retry,
            retry_budget: self.retry_budget,
            dry_run: self.dry_run,
            destination: self.destination.clone(),
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            source: None,
            endpoint: None,
            region: None,
            runs_dir: PathBuf::from("sql2ddb-runs"),
            concurrency: None,
            page_size: None,
            retry: RetryPolicy::default(),
            retry_budget: None,
            source_connections: DEFAULT_SOURCE_CONNECTIONS,
            read_parallelism: None,
            max_wcu: None,
            fixed_concurrency: false,
            dry_run: false,
            run_id: None,
            resume: false,
            track_progress: false,
            progress_table: None,
            queue: None,
            sqs_endpoint: None,
            job_context: None,
            max_queued: None,
            stop: None,
            shutdown_grace: crate::stop::STOP_GRACE,
            only_rejects: None,
            snapshot: SnapshotMode::default(),
            if_not_empty: IfNotEmpty::default(),
            destination: Destination::Table,
        }
    }
}
