//! What a run holds from its start to its report, and how it opens: the
//! options checked, the run directory, the source, [`Resources`] and the
//! progress store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sql2ddb_core::redact_url;
use sql2ddb_mapping::Plan;
use sql2ddb_source::Source;

use super::options::RunOptions;
use super::replay::Rejected;
use super::snapshot;
use super::tracking::{self, Tracking};
use crate::error::EngineError;
use crate::ids::{new_run_id, RunId};
use crate::rejects::RejectsFile;
use crate::report::{EntityReport, RunReport, RunStatus, WriterReport};
use crate::resources::{Job, Resources};
use crate::sink::Destination;
use crate::target::TablePlan;

/// What a context is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A run's load: it looks at what its table holds first.
    Load,
    /// Reading the source alone (`verify --deep`, `plan`'s sample): the
    /// table is left be.
    Read,
}

/// What a run holds from its start to its report.
pub(super) struct Context {
    pub(super) run_id: RunId,
    pub(super) run_dir: PathBuf,
    /// The source URL as given (the report shows it redacted).
    pub(super) source_url: String,
    pub(super) source: Arc<Source>,
    pub(super) resources: Resources,
    pub(super) tracking: Option<Tracking>,
    /// The SQS queue pages go to, for a run cut at the queue.
    pub(super) queue_url: Option<String>,
    pub(super) rejects: Arc<RejectsFile>,
    /// With `--only-rejects`: the rows to read again.
    pub(super) rejected: Option<Rejected>,
    /// What the run does with its table before its first write (or why
    /// that could not be decided), taken by [`Context::prepare`].
    pub(super) table_plan: Option<Result<TablePlan, EngineError>>,
    pub(super) report: RunReport,
}

impl Context {
    /// Checks the options, creates the run directory, connects to
    /// DynamoDB, decides what a load does with its table (refusing one that
    /// holds items unless told), connects to the source, and opens the
    /// progress store when the run keeps one.
    pub(super) async fn open(
        plan: &Plan,
        opts: &RunOptions,
        purpose: Purpose,
    ) -> Result<Context, EngineError> {
        let rejected = checked(plan, opts)?;
        let run_id = opts.run_id.clone().unwrap_or_else(new_run_id);
        let run_dir = opts.runs_dir.join(&run_id);
        std::fs::create_dir_all(&run_dir).map_err(|e| EngineError::io(&run_dir, e))?;
        let rejects = Arc::new(RejectsFile::new(run_dir.join("rejects.jsonl")));
        let source_url = opts
            .source
            .clone()
            .unwrap_or_else(|| plan.source.url.clone());
        // DynamoDB's side first: no AWS credentials (or region) is said
        // before any work on the source.
        let (resources, table_plan) = open_table(plan, opts, purpose, &run_dir).await?;
        let (source, mut snapshot) = snapshot::connect(&source_url, opts).await?;
        let tracking = match tracking::wanted(opts) {
            true => Some(Tracking::open(plan, opts, resources.progress_store()?, &run_id).await?),
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
            mapping: plan.file().to_string(),
            status: RunStatus::Ok,
            source: redact_url(&source_url),
            table: plan.target.table.clone(),
            endpoint: resources.endpoint().to_string(),
            local_data_file: resources.local_data_file().map(|p| p.display().to_string()),
            table_created: false,
            queue: queue_url.clone(),
            progress_table: None,
            run_dir: run_dir.display().to_string(),
            rejects_file: Some(rejects.path().display().to_string()),
            entities: Vec::new(),
            totals: EntityReport::default(),
            writer: WriterReport::default(),
            pointers: Vec::new(),
            rejects_by_reason: Vec::new(),
            timeline: Default::default(),
            warnings: Vec::new(),
            table_emptied: None,
            error: None,
            cause: None,
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
            table_plan: Some(table_plan),
            report,
        })
    }

    /// Records the error that ended the run (the first one), secrets masked.
    pub(super) fn fail(&mut self, e: &EngineError) {
        if self.report.error.is_none() {
            self.report.error = Some(sql2ddb_core::redact_secrets(&e.to_string()));
            self.report.cause = Some(e.cause());
        }
    }
}

/// The options checked before anything is made; with `--only-rejects`,
/// the rows to read again.
fn checked(plan: &Plan, opts: &RunOptions) -> Result<Option<Rejected>, EngineError> {
    if matches!(opts.destination, Destination::Updates) {
        return Err(EngineError::Config(
            "a run reads a SQL source: its pages go to a table or to files, never to an update job's changes".into(),
        ));
    }
    if opts.resume && opts.run_id.is_none() {
        // Settings that do not fit together, as for an update: no run to name.
        return Err(EngineError::Config(
            "to resume a run, give its run id".into(),
        ));
    }
    match &opts.only_rejects {
        Some(_) if opts.resume || opts.queue.is_some() || opts.track_progress => {
            Err(EngineError::Config(
                "--only-rejects replays rows in this process: it cannot be combined with --queue, --resume or --progress-table".into(),
            ))
        }
        Some(path) => Ok(Some(Rejected::load(path, plan)?)),
        None => Ok(None),
    }
}

/// Opens the run's [`Resources`] and decides what a load does with its
/// table (or why that could not be decided: a failed call is the run's
/// failure, reported where the table's other checks would report it). A
/// refusal leaves nothing behind: the resources are closed and the run's
/// directory `run_dir`, made a moment ago, removed.
async fn open_table(
    plan: &Plan,
    opts: &RunOptions,
    purpose: Purpose,
    run_dir: &Path,
) -> Result<(Resources, Result<TablePlan, EngineError>), EngineError> {
    // `--only-rejects` fixes the rows of the run that rejected them: with
    // the embedded `local` endpoint, that run's items are in its
    // directory, beside its rejects file.
    let local_dir = opts
        .only_rejects
        .as_deref()
        .and_then(Path::parent)
        .filter(|dir| dir.join(crate::resources::LOCAL_DATA_FILE).is_file())
        .unwrap_or(run_dir);
    let job = Job::Run {
        run_dir: local_dir,
        dry_run: opts.dry_run,
    };
    let resources = Resources::open(Some(plan), &opts.resource_options(), job).await?;
    let decided = match purpose {
        Purpose::Load => crate::target::decide(plan, opts, resources.client()).await,
        Purpose::Read => Ok(TablePlan::AsItIs),
    };
    match decided {
        Err(e) if !matches!(e, EngineError::Dynamo(_)) => {
            resources.close().await;
            // Only when it is empty: the run's own, made a moment ago.
            let _ = std::fs::remove_dir(run_dir);
            Err(e)
        }
        decided => Ok((resources, decided)),
    }
}
