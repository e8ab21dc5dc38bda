//! What every job connects to, settled once: the DynamoDB endpoint (AWS, a
//! URL, or the embedded `local` server), its client, the progress table and
//! the SQS endpoint. `run`, `worker`, `status` and `verify` open their
//! [`Resources`] the same way, so flags override the mapping the same way
//! everywhere and a mistake is reported the same way everywhere.

use std::path::Path;
use std::sync::Arc;

use sql2ddb_core::redact_url;
use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_dynamo::{connect_with_calls, BatchCalls, Client, Endpoint, LocalDynamo};
use sql2ddb_mapping::Plan;
use sql2ddb_queue::SqsQueue;

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
}

/// Which job opens the resources: it decides what `local` means.
#[derive(Debug, Clone, Copy)]
pub enum Job<'a> {
    /// A run: `local` starts the embedded server with its data file in the
    /// run directory; a dry run calls nothing at all.
    Run {
        /// The run directory.
        run_dir: &'a Path,
        /// No DynamoDB call will be made.
        dry_run: bool,
    },
    /// A queue worker: `local` is refused (it belongs to one process).
    Worker,
    /// `status` / `verify`: `local` is refused likewise.
    Status,
}

/// The settled connections of a job.
pub struct Resources {
    client: Client,
    calls: BatchCalls,
    local: Option<LocalDynamo>,
    endpoint: String,
    progress_table: Option<String>,
    sqs_endpoint: Option<String>,
}

impl Resources {
    /// Settles the endpoint, region and progress table from `opts` over
    /// `plan` (absent for `status` given only a progress table), and builds
    /// the one DynamoDB client of the job.
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
                let l = LocalDynamo::start(Some(&run_dir.join("dynamodb.sqlite"))).await?;
                let e = Endpoint::Url(l.url().to_string());
                local = Some(l);
                (e, "local".to_string())
            }
            (Some("local"), Job::Worker) => return Err(EngineError::Worker(
                "the embedded `local` endpoint belongs to one process; give workers the URL of a DynamoDB endpoint they share (--endpoint)".into(),
            )),
            (Some("local"), Job::Status) => return Err(EngineError::Config(
                "the embedded `local` endpoint belongs to the run's own process; give --endpoint".into(),
            )),
            (Some(url), _) => (Endpoint::parse(url)?, redact_url(url)),
            (None, _) => (Endpoint::Aws, "aws".to_string()),
        };
        let region = opts
            .region
            .as_deref()
            .or(target.and_then(|t| t.region.as_deref()));
        let (client, calls) = connect_with_calls(&endpoint, region).await?;
        let progress_table = opts
            .progress_table
            .clone()
            .filter(|t| !t.is_empty())
            .or_else(|| target.map(|t| default_table(&t.table)));
        Ok(Resources {
            client,
            calls,
            local,
            endpoint: shown,
            progress_table,
            sqs_endpoint: opts.sqs_endpoint.clone(),
        })
    }

    /// The DynamoDB client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The batch writer's `BatchWriteItem` calls, of the client's
    /// configuration.
    pub fn calls(&self) -> &BatchCalls {
        &self.calls
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
            self.client.clone(),
            self.progress_table()?.to_string(),
        ))
    }

    /// Opens the SQS queue at `url`.
    pub async fn queue(&self, url: &str) -> Result<Arc<SqsQueue>, EngineError> {
        let sqs = sql2ddb_queue::connect(self.sqs_endpoint.as_deref(), None, Some(url)).await?;
        Ok(Arc::new(SqsQueue::open(sqs, url).await?))
    }

    /// Stops the embedded server, if one runs.
    pub async fn close(self) {
        if let Some(l) = self.local {
            l.stop().await;
        }
    }
}
