//! `sql2ddb run`: read each entity page by page, map rows to items, queue the
//! batches, write them with a pool of writers, count everything.
//!
//! A run goes through named stages, each in a file of its own: open (this
//! file: options, run directory, source, [`Resources`], progress store),
//! [`prepare`] (entities, key rules, counts, segments, the table),
//! [`execute`] (read and write, or enqueue), and [`settle`] (the report).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sql2ddb_core::redact_url;
use sql2ddb_dynamo::RetryPolicy;
use sql2ddb_mapping::{BoundEntity, BoundPointer, EntitySource, Plan};
use sql2ddb_source::{PageQuery, Segment, Source};

mod drain;
mod embed;
mod ending;
mod execute;
mod expected;
mod handoff;
mod keys;
mod prepare;
mod read;
mod replay;
mod sample;
mod settle;
mod snapshot;
mod tracking;

pub(crate) use expected::SourceItems;
pub use sample::{EntitySample, Sampler};

use crate::error::EngineError;
use crate::progress::{EntityProgress, RunProgress};
use crate::rejects::RejectsFile;
use crate::report::{EntityReport, RunReport, RunStatus, WriterReport};
use crate::resources::{Job, ResourceOptions, Resources};

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
    /// The run's id; a new one from [`new_run_id`] when `None`. With
    /// `resume`, the run to continue.
    pub run_id: Option<String>,
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
    /// Pause reading while the queue holds this many messages waiting.
    pub max_queued: Option<u64>,
    /// Raised to stop the run cleanly (Ctrl-C): readers stop after their
    /// page, writers finish within `shutdown_grace`, the report says
    /// `interrupted`.
    pub stop: Option<Arc<crate::stop::StopSignal>>,
    /// Once `stop` is raised, how long the pages handed to the writers may
    /// take to be written before the run gives up on them (they stay
    /// pending); then the report is written, within [`REPORT_WAIT`].
    pub shutdown_grace: Duration,
    /// Replay the rows of this rejects file (read again by key through the
    /// current mapping) instead of reading every row.
    pub only_rejects: Option<PathBuf>,
    /// Read one point-in-time snapshot of the source (PostgreSQL), or not.
    pub snapshot: SnapshotMode,
    /// Write the items to these files (`sql2ddb export`) instead of
    /// DynamoDB; given with `dry_run`, so no DynamoDB call is made.
    pub export: Option<Arc<crate::export::ItemFiles>>,
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
        }
    }

    /// The writer's part of the options.
    pub fn sink_options(&self) -> crate::sink::SinkOptions {
        crate::sink::SinkOptions {
            concurrency: self.concurrency,
            fixed_concurrency: self.fixed_concurrency,
            max_wcu: self.max_wcu,
            retry: self.retry,
            dry_run: self.dry_run,
            export: self.export.clone(),
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
            max_queued: None,
            stop: None,
            shutdown_grace: crate::stop::STOP_GRACE,
            only_rejects: None,
            snapshot: SnapshotMode::default(),
            export: None,
        }
    }
}

/// Write-side figures of one entity, updated by the writers.
#[derive(Default)]
struct WriteStats {
    bytes: AtomicU64,
    write_units: AtomicU64,
    retries: AtomicU64,
    pages: AtomicU64,
    started: Mutex<Option<Instant>>,
    finished: Mutex<Option<Instant>>,
}

impl WriteStats {
    fn touch(&self) {
        *self.finished.lock().expect("stats lock") = Some(Instant::now());
    }
}

/// One entity, resolved against its source and ready to read.
struct Prepared {
    bound: Arc<BoundEntity>,
    query: PageQuery,
    segments: Vec<Segment>,
    /// Embedded child rows, fetched per page.
    children: Vec<embed::ChildPlan>,
    /// Pointers this entity's rows move.
    pointers: Vec<BoundPointer>,
    counters: Arc<EntityProgress>,
    stats: Arc<WriteStats>,
    /// Rows that landed on an earlier row's item (`overwrite = true` only).
    overwrites: Option<keys::Overwrites>,
    /// What the entity reads, to count its rows again at the end.
    from: EntitySource,
    /// Rows the source held when the run prepared the entity (with
    /// `--only-rejects`: the rows to replay).
    counted: u64,
    /// With `--only-rejects`: the keys of the rows to read again, instead of
    /// the segments.
    replay: Option<Vec<Vec<sql2ddb_core::SqlValue>>>,
    /// Segments whose rows read differ from the rows their range held when
    /// they finished, described for the report.
    segment_mismatches: Mutex<Vec<String>>,
}

/// A new run id: UTC time and a short random suffix (`20240501T100000Z-3f9a1c`).
pub fn new_run_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let short = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &short[..6])
}

/// Runs a migration.
///
/// Which failures are returned and which are reported: a run that cannot
/// start returns `Err`, with nothing written and no report — bad options,
/// an unreadable rejects file to replay, a source or DynamoDB endpoint that
/// cannot be reached, a resume that is refused, or a mapping that does not
/// fit its source (a column, key or template that does not fit, a key not
/// proven unique, templates that collapse rows). A failure of a service
/// once it answered — a source query, the table check or creation, the
/// queue — and any failure while reading and writing end the run with
/// status `failed`, the error in the report, and the report written.
pub async fn run(
    plan: &Plan,
    opts: &RunOptions,
    progress: Arc<RunProgress>,
) -> Result<RunReport, EngineError> {
    let started = Instant::now();
    let mut ctx = Context::open(plan, opts).await?;
    snapshot::announce(&ctx.report.snapshot, &progress);
    let ending = ending::Ending::new(opts.stop.clone(), opts.shutdown_grace);
    let prepared = match ctx.prepare(plan, opts, &progress).await {
        Ok((prepared, checkpoints)) => {
            if let Err(e) = ctx
                .execute(plan, opts, &prepared, checkpoints, &ending)
                .await
            {
                ctx.fail(&e);
            }
            prepared
        }
        Err(e) if is_reported(&e) => {
            ctx.fail(&e);
            Vec::new()
        }
        Err(e) => {
            ctx.source.close().await;
            ctx.resources.close().await;
            return Err(e);
        }
    };
    ctx.settle(opts, &prepared, started).await
}

/// Whether an error while preparing ends in the report (a service failed)
/// rather than being returned (the run could not start as asked).
fn is_reported(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Source(_) | EngineError::Dynamo(_) | EngineError::Queue(_)
    )
}

/// What a run holds from its start to its report.
struct Context {
    run_id: String,
    run_dir: PathBuf,
    /// The source URL as given (the report shows it redacted).
    source_url: String,
    source: Arc<Source>,
    resources: Resources,
    tracking: Option<tracking::Tracking>,
    /// The SQS queue pages go to, for a run cut at the queue.
    queue_url: Option<String>,
    rejects: Arc<RejectsFile>,
    /// With `--only-rejects`: the rows to read again.
    rejected: Option<replay::Rejected>,
    report: RunReport,
}

impl Context {
    /// Checks the options, creates the run directory, connects to the
    /// source and DynamoDB, and opens the progress store when the run keeps
    /// one.
    async fn open(plan: &Plan, opts: &RunOptions) -> Result<Context, EngineError> {
        if opts.resume && opts.run_id.is_none() {
            return Err(EngineError::Resume {
                run_id: String::new(),
                message: "to resume, give the run id".into(),
            });
        }
        let rejected = match &opts.only_rejects {
            Some(_) if opts.resume || opts.queue.is_some() || opts.track_progress => {
                return Err(EngineError::Config(
                    "--only-rejects replays rows in this process: it cannot be combined with --queue, --resume or --progress-table".into(),
                ))
            }
            Some(path) => Some(replay::Rejected::load(path, plan)?),
            None => None,
        };
        let run_id = opts.run_id.clone().unwrap_or_else(new_run_id);
        let run_dir = opts.runs_dir.join(&run_id);
        std::fs::create_dir_all(&run_dir).map_err(|e| EngineError::io(&run_dir, e))?;
        let rejects = Arc::new(RejectsFile::new(run_dir.join("rejects.jsonl")));
        let source_url = opts
            .source
            .clone()
            .unwrap_or_else(|| plan.source.url.clone());
        let (source, mut snapshot) = snapshot::connect(&source_url, opts).await?;
        let job = Job::Run {
            run_dir: &run_dir,
            dry_run: opts.dry_run,
        };
        let resources = Resources::open(Some(plan), &opts.resource_options(), job).await?;
        let tracking = match tracking::wanted(opts) {
            true => Some(
                tracking::Tracking::open(plan, opts, resources.progress_store()?, &run_id).await?,
            ),
            false => None,
        };
        if let Some(t) = &tracking {
            snapshot.earlier = t.recorded_snapshots();
        }
        // A resumed run sends to the queue it sent to before, unless told otherwise.
        let queue_url = opts
            .queue
            .clone()
            .or_else(|| tracking.as_ref()?.recorded_queue().map(str::to_string));
        let report = RunReport {
            run_id: run_id.clone(),
            status: RunStatus::Ok,
            source: redact_url(&source_url),
            table: plan.target.table.clone(),
            endpoint: resources.endpoint().to_string(),
            local_data_file: resources.local_data_file().map(|p| p.display().to_string()),
            table_created: false,
            queue: queue_url.clone(),
            progress_table: None,
            run_dir: run_dir.display().to_string(),
            rejects_file: rejects.path().display().to_string(),
            entities: Vec::new(),
            totals: EntityReport::default(),
            writer: WriterReport::default(),
            pointers: Vec::new(),
            warnings: Vec::new(),
            error: None,
            snapshot,
        };
        Ok(Context {
            run_id,
            run_dir,
            source_url,
            source,
            resources,
            tracking,
            queue_url,
            rejects,
            rejected,
            report,
        })
    }

    /// Records the error that ended the run (the first one), secrets masked.
    fn fail(&mut self, e: &EngineError) {
        self.report
            .error
            .get_or_insert_with(|| sql2ddb_core::redact_secrets(&e.to_string()));
    }
}

#[cfg(test)]
mod tests {
    //! The rule of [`run`] for failures, without servers: the SQLite example
    //! as the source, and a DynamoDB endpoint nobody listens on.

    use super::*;
    use crate::error::ErrorKind;

    fn plan(template: &str) -> Plan {
        let text = format!(
            "version = 1\n[source]\nurl = \"sqlite://../../examples/shop.db\"\n[target]\ntable = \"shop_t\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\n[[entity]]\nname = \"customer\"\nfrom = \"customers\"\npk = \"{template}\"\n"
        );
        Plan::parse(&text, "m.toml".as_ref(), &|_| None).unwrap()
    }

    fn options(runs: &std::path::Path) -> RunOptions {
        RunOptions {
            runs_dir: runs.to_path_buf(),
            // Nothing listens on port 1: every DynamoDB call fails at once.
            endpoint: Some("http://127.0.0.1:1".into()),
            ..RunOptions::default()
        }
    }

    #[tokio::test]
    async fn a_mapping_that_does_not_fit_its_source_is_returned() {
        let runs = tempfile::tempdir().unwrap();
        let err = run(
            &plan("C#{no_such_column}"),
            &options(runs.path()),
            RunProgress::new(),
        )
        .await
        .expect_err("the template names a column the table lacks");
        assert_eq!(err.kind(), ErrorKind::Mapping, "{err}");
        assert!(err.to_string().contains("no_such_column"), "{err}");
    }

    #[tokio::test]
    async fn a_service_failure_ends_in_the_report() {
        let runs = tempfile::tempdir().unwrap();
        let report = run(
            &plan("C#{customer_id}"),
            &options(runs.path()),
            RunProgress::new(),
        )
        .await
        .expect("a DynamoDB failure is reported, not returned");
        assert_eq!(report.status, RunStatus::Failed);
        let error = report.error.clone().expect("the error is in the report");
        assert!(error.starts_with("DynamoDB:"), "{error}");
        let saved = std::path::Path::new(&report.run_dir).join("report.json");
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
        assert_eq!(saved["status"], "failed");
    }
}
