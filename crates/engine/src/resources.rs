//! What every job connects to, settled once: the AWS context (region,
//! credentials, timeouts, loaded once), the DynamoDB endpoint (AWS, a URL,
//! or the embedded `local` server) and its handle, the progress table, and
//! the SQS endpoint and its client, all made from that one context. `run`,
//! `worker`, `status` and `verify` open their [`Resources`] the same way, so
//! flags override the mapping the same way everywhere and a mistake is
//! reported the same way everywhere. A job of several phases (`run
//! --follow`) gives each phase the same [`JobContext`]: one AWS context and
//! one DynamoDB handle (one connection pool) for the whole job.

use std::path::Path;
use std::sync::{Arc, Mutex};

use sql2ddb_aws::AwsContext;
use sql2ddb_core::redact_url;
use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_dynamo::{BatchCalls, Dynamo, Endpoint, LocalDynamo};
use sql2ddb_mapping::Plan;
use sql2ddb_queue::{QueueDepth, SqsClient, SqsQueue, WorkQueue};
use tokio::sync::OnceCell;

use crate::error::EngineError;

/// Where a job's services are, as given on the command line; each `None`
/// falls back to the mapping, then to AWS's defaults.
#[derive(Debug, Clone, Default)]
pub struct ResourceOptions {
    /// DynamoDB endpoint: `local` or a URL; overrides the mapping's.
    pub endpoint: Option<String>,
    /// AWS region; overrides the mapping's.
    pub region: Option<String>,
    /// The progress table; default `<target table>-sql2ddb-progress`.
    pub progress_table: Option<String>,
    /// SQS endpoint URL (any SQS-compatible server); default AWS.
    pub sqs_endpoint: Option<String>,
    /// The job's context, shared by its phases ([`job_context`]), or one
    /// made of the process's AWS context (a Lambda function's, loaded at
    /// its cold start): its AWS context is used as it is, and its DynamoDB
    /// handle by every phase that names the same endpoint. Else the job
    /// loads a context from `region` and the environment, and makes a
    /// handle of its own.
    pub job_context: Option<JobContext>,
}

/// What the phases of one job share (`run --follow`: the table's check, the
/// full load, the follow, the comparison at a cutover): its AWS context and
/// its DynamoDB handles, made at the first phase that needs one and taken
/// by every later phase with the same endpoint, so the job keeps one
/// connection pool. Clones share the handles. The embedded `local` server's
/// handle is never kept: each phase that starts one has its own server.
#[derive(Debug, Clone)]
pub struct JobContext {
    aws: AwsContext,
    dynamo: Arc<Mutex<Handles>>,
}

/// The DynamoDB handles of a job, one per endpoint its phases named (one,
/// in practice), and how many times phases took one.
#[derive(Debug, Default)]
struct Handles {
    made: Vec<(Endpoint, Dynamo)>,
    taken: usize,
}

impl JobContext {
    /// The context of a job whose clients are all made from `aws`; no
    /// DynamoDB handle is made before a phase needs one.
    pub fn new(aws: AwsContext) -> JobContext {
        JobContext {
            aws,
            dynamo: Arc::default(),
        }
    }

    /// The AWS context every client of the job is made from.
    pub fn aws(&self) -> &AwsContext {
        &self.aws
    }

    /// The job's DynamoDB handle for `endpoint`: the one an earlier phase
    /// made for it, else a new one, kept for the phases after.
    pub fn dynamo(&self, endpoint: &Endpoint) -> Result<Dynamo, EngineError> {
        let mut handles = self.dynamo.lock().expect("handles lock");
        handles.taken += 1;
        if let Some((_, dynamo)) = handles.made.iter().find(|(e, _)| e == endpoint) {
            return Ok(dynamo.clone());
        }
        let dynamo = Dynamo::new(&self.aws, endpoint)?;
        handles.made.push((endpoint.clone(), dynamo.clone()));
        Ok(dynamo)
    }

    /// How many DynamoDB handles the job made (one per endpoint), and how
    /// many times its phases took one: what shows they share it.
    pub fn dynamo_handles(&self) -> (usize, usize) {
        let handles = self.dynamo.lock().expect("handles lock");
        (handles.made.len(), handles.taken)
    }
}

impl From<AwsContext> for JobContext {
    fn from(aws: AwsContext) -> JobContext {
        JobContext::new(aws)
    }
}

/// The embedded `local` endpoint's data file, in a run's directory.
pub const LOCAL_DATA_FILE: &str = "dynamodb.sqlite";

/// Which job opens the resources: it decides what `local` means.
#[derive(Debug, Clone, Copy)]
pub enum Job<'a> {
    /// A run: `local` starts the embedded server with its data file in the
    /// run directory; a dry run calls nothing at all.
    Run {
        /// The directory of the `local` endpoint's data: the run's own, or,
        /// for `--only-rejects`, the run whose rejects it replays.
        run_dir: &'a Path,
        /// No DynamoDB call will be made.
        dry_run: bool,
    },
    /// A queue worker: `local` is refused (it belongs to one process).
    Worker,
    /// A job that reads a table another process wrote (`update`, the
    /// serverless functions): `local` is refused likewise.
    Status,
    /// `status` / `verify` of one run: `local` opens the data the run's
    /// embedded server left in its directory.
    Inspect {
        /// The run's directory.
        run_dir: &'a Path,
    },
}

/// The settled connections of a job.
pub struct Resources {
    aws: AwsContext,
    dynamo: Dynamo,
    /// Made at the first queue opened: an AWS queue's URL names its region.
    sqs: OnceCell<SqsClient>,
    local: Option<LocalDynamo>,
    endpoint: String,
    progress_table: Option<String>,
    sqs_endpoint: Option<String>,
}

/// How long the credentials chain may take to find credentials before a
/// job starts (the instance metadata service answers in milliseconds where
/// it exists).
const CREDENTIALS_LOOKUP: std::time::Duration = std::time::Duration::from_secs(10);

/// A job whose table is on AWS itself stops before any work when the
/// credentials chain finds no credentials, saying so in one line.
async fn no_credentials(aws: &AwsContext) -> Result<(), EngineError> {
    let found = tokio::time::timeout(CREDENTIALS_LOOKUP, aws.find_credentials()).await;
    let why = match found {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(why)) => why,
        Err(_) => format!(
            "the credentials chain found none within {} s",
            CREDENTIALS_LOOKUP.as_secs()
        ),
    };
    Err(EngineError::Config(format!(
        "no AWS credentials found ({why}); set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give --endpoint (a DynamoDB URL, or `local`) to write elsewhere than AWS"
    )))
}

/// The region `opts` name, over `plan`'s.
fn region<'a>(plan: Option<&'a Plan>, opts: &'a ResourceOptions) -> Option<&'a str> {
    let target = plan.map(|p| &p.target);
    opts.region
        .as_deref()
        .or(target.and_then(|t| t.region.as_deref()))
}

/// The one [`JobContext`] of a job of several phases (`run --follow`: the
/// table's check, the full load, the follow, the comparison at a cutover),
/// each of which opens its [`Resources`] with it: `opts.job_context` when
/// it has one (shared, not copied), else a new one, its AWS context loaded
/// here, once, with the region `opts` name over `plan`'s (and, when no
/// endpoint is named, so the table is on AWS itself, the SDK's chain asked
/// for one too).
pub async fn job_context(plan: Option<&Plan>, opts: &ResourceOptions) -> JobContext {
    if let Some(job) = &opts.job_context {
        return job.clone();
    }
    let endpoint = opts
        .endpoint
        .as_deref()
        .or(plan.and_then(|p| p.target.endpoint.as_deref()));
    JobContext::new(AwsContext::load(region(plan, opts), endpoint.is_none()).await)
}

impl ResourceOptions {
    /// The options with the job's one context in them ([`job_context`]):
    /// every phase opened with them shares its AWS context and DynamoDB
    /// handle.
    pub async fn with_job_context(&self, plan: Option<&Plan>) -> ResourceOptions {
        ResourceOptions {
            job_context: Some(job_context(plan, self).await),
            ..self.clone()
        }
    }
}

/// The AWS context and DynamoDB handle of a phase that writes to
/// `endpoint`: the job's, when `opts` carry its [`JobContext`], else made
/// here. The embedded server a phase started (`local`) is that phase's
/// alone, and so is its handle.
async fn context_and_handle(
    plan: Option<&Plan>,
    opts: &ResourceOptions,
    endpoint: &Endpoint,
    local: bool,
) -> Result<(AwsContext, Dynamo), EngineError> {
    match &opts.job_context {
        Some(job) if local => Ok((job.aws().clone(), Dynamo::new(job.aws(), endpoint)?)),
        Some(job) => Ok((job.aws().clone(), job.dynamo(endpoint)?)),
        None => {
            let aws = AwsContext::load(region(plan, opts), *endpoint == Endpoint::Aws).await;
            let dynamo = Dynamo::new(&aws, endpoint)?;
            Ok((aws, dynamo))
        }
    }
}

impl Resources {
    /// Settles the endpoint, region and progress table from `opts` over
    /// `plan` (absent for `status` given only a progress table), loads the
    /// AWS context of the job once and makes its DynamoDB handle from it;
    /// with a [`JobContext`], takes the job's context and handle instead.
    pub async fn open(
        plan: Option<&Plan>,
        opts: &ResourceOptions,
        job: Job<'_>,
    ) -> Result<Resources, EngineError> {
        let target = plan.map(|p| &p.target);
        let setting = opts
            .endpoint
            .as_deref()
            .or(target.and_then(|t| t.endpoint.as_deref()));
        let mut local = None;
        let (endpoint, shown) = match (setting, job) {
            // A dry run makes no DynamoDB call: nothing to start or resolve.
            (_, Job::Run { dry_run: true, .. }) => (
                Endpoint::Url("http://127.0.0.1:9".to_string()),
                "none (dry run)".to_string(),
            ),
            (Some("local"), Job::Run { run_dir, .. }) => {
                let l = LocalDynamo::start(Some(&run_dir.join(LOCAL_DATA_FILE))).await?;
                let e = Endpoint::Url(l.url().to_string());
                local = Some(l);
                (e, "local".to_string())
            }
            (Some("local"), Job::Worker) => return Err(EngineError::Worker(
                "the embedded `local` endpoint belongs to one process; give workers the URL of a DynamoDB endpoint they share (--endpoint)".into(),
            )),
            (Some("local"), Job::Status) => return Err(EngineError::Config(
                "the embedded `local` endpoint lives only inside the process that started it; give the URL of a DynamoDB endpoint (--endpoint URL)".into(),
            )),
            (Some("local"), Job::Inspect { run_dir }) => {
                let data = run_dir.join(LOCAL_DATA_FILE);
                if !data.is_file() {
                    return Err(EngineError::Config(format!(
                        "`--endpoint local` reads the data the run's embedded endpoint kept in its directory, and {} is not there: give the id of a run made with `--endpoint local` (and --runs-dir if its directory is elsewhere)",
                        data.display()
                    )));
                }
                let l = LocalDynamo::start(Some(&data)).await?;
                let e = Endpoint::Url(l.url().to_string());
                local = Some(l);
                (e, "local".to_string())
            }
            (Some(url), _) => (Endpoint::parse(url)?, redact_url(url)),
            (None, _) => (Endpoint::Aws, "aws".to_string()),
        };
        let (aws, dynamo) = context_and_handle(plan, opts, &endpoint, local.is_some()).await?;
        // After the region's check: a region missing is said first.
        if endpoint == Endpoint::Aws {
            no_credentials(&aws).await?;
        }
        let progress_table = opts
            .progress_table
            .clone()
            .filter(|t| !t.is_empty())
            .or_else(|| target.map(|t| default_table(&t.table)));
        Ok(Resources {
            aws,
            dynamo,
            sqs: OnceCell::new(),
            local,
            endpoint: shown,
            progress_table,
            sqs_endpoint: opts.sqs_endpoint.clone(),
        })
    }

    /// The AWS context every client of the job is made from.
    pub fn aws(&self) -> &AwsContext {
        &self.aws
    }

    /// The DynamoDB handle.
    pub fn client(&self) -> &Dynamo {
        &self.dynamo
    }

    /// The batch writer's `BatchWriteItem` calls, of the handle's
    /// configuration.
    pub fn calls(&self) -> &BatchCalls {
        self.dynamo.calls()
    }

    /// The endpoint as reports show it: `aws`, `local`, `none (dry run)` or
    /// the URL with any password masked.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The embedded server's data file, when one runs.
    pub fn local_data_file(&self) -> Option<&Path> {
        self.local.as_ref().map(LocalDynamo::path)
    }

    /// The progress table's name.
    pub fn progress_table(&self) -> Result<&str, EngineError> {
        self.progress_table.as_deref().ok_or_else(|| {
            EngineError::Config(
                "name the run's progress table: give the mapping file or --progress-table".into(),
            )
        })
    }

    /// The progress store.
    pub fn progress_store(&self) -> Result<ProgressStore, EngineError> {
        Ok(ProgressStore::new(
            self.dynamo.clone(),
            self.progress_table()?.to_string(),
        ))
    }

    /// The SQS client of the job, made once from its AWS context (the
    /// region given, else the environment's, else that of `url`, an AWS
    /// queue's URL).
    pub async fn sqs(&self, url: &str) -> Result<&SqsClient, EngineError> {
        let made = self.sqs.get_or_try_init(|| async {
            sql2ddb_queue::client_of(&self.aws, self.sqs_endpoint.as_deref(), Some(url))
        });
        Ok(made.await?)
    }

    /// Opens the SQS queue at `url`.
    pub async fn queue(&self, url: &str) -> Result<Arc<SqsQueue>, EngineError> {
        let sqs = self.sqs(url).await?.clone();
        Ok(Arc::new(SqsQueue::open(sqs, url).await?))
    }

    /// The depths of the SQS queue at `url` and of its dead-letter queue.
    pub async fn queue_depth(&self, url: &str) -> Result<QueueDepth, EngineError> {
        Ok(self.queue(url).await?.depth().await?)
    }

    /// Stops the embedded server, if one runs.
    pub async fn close(self) {
        if let Some(l) = self.local {
            l.stop().await;
        }
    }
}
