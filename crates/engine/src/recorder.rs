//! What every queue consumer does with a batch it took — a `sql2ddb worker`
//! process or a Lambda function fed by the queue: write it through the one
//! write path ([`BatchSink::write`]: a migration page is written, an update
//! page applied to the keys it carries) and record it in the run's progress
//! table. An error leaves the batch unrecorded, to be delivered
//! again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sql2ddb_dynamo::progress::{default_table, ProgressStore, RunMeta};
use sql2ddb_mapping::{Plan, UpdateJob};
use sql2ddb_queue::Message;

use crate::checkpoint::BatchId;
use crate::error::EngineError;
use crate::ids::{new_run_id, RunId};
use crate::outcome::BatchOutcome;
use crate::rejects::RejectsFile;
use crate::resources::{Job, ResourceOptions, Resources};
use crate::run::RunOptions;
use crate::sink::{build_sink, BatchSink};

/// Everything a worker process needs besides the mapping.
#[derive(Debug, Clone, Default)]
pub struct WorkerSetup {
    /// The queue URL the worker takes batches from (unused by a Lambda
    /// worker: its batches come in the event).
    pub queue: String,
    /// The rest as for a run: the DynamoDB and SQS endpoints, region,
    /// progress table, the directory the worker's own (its rejects file) is
    /// created in, the process's AWS context, and the writer's settings
    /// (concurrency, capacity cap, retries).
    pub run: RunOptions,
}

/// Writes and records the batches of runs into one mapping's table.
pub(crate) struct BatchRecorder {
    pub sink: Arc<BatchSink>,
    pub store: ProgressStore,
    pub table: String,
    pub rejects: Arc<RejectsFile>,
    /// Each run's description, read once.
    runs: Mutex<HashMap<RunId, RunMeta>>,
}

impl BatchRecorder {
    /// A recorder writing `table` through `sink`, recording in `store`.
    pub fn new(
        sink: Arc<BatchSink>,
        store: ProgressStore,
        table: impl Into<String>,
        rejects: Arc<RejectsFile>,
    ) -> Self {
        BatchRecorder {
            sink,
            store,
            table: table.into(),
            rejects,
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// Settles `plan`'s table, progress table and writer as a worker does,
    /// with a rejects file in a directory of its own under `setup.run.runs_dir`;
    /// returns the resources too (a worker takes its queue from them).
    pub async fn connect(
        plan: &Plan,
        setup: &WorkerSetup,
    ) -> Result<(BatchRecorder, Resources), EngineError> {
        let options = setup.run.resource_options();
        let resources = Resources::open(Some(plan), &options, Job::Worker).await?;
        let rejects = worker_rejects(setup)?;
        let sink = build_sink(
            plan,
            &setup.run.sink_options(),
            resources.client(),
            resources.calls(),
            rejects.clone(),
        )
        .sink;
        let recorder = BatchRecorder::new(
            sink,
            resources.progress_store()?,
            plan.target.table.clone(),
            rejects,
        );
        Ok((recorder, resources))
    }

    /// Settles an update job's table and progress table as a worker does:
    /// a recorder that applies the job's batches (and any update batch of
    /// the same table), and refuses migration batches, which need a mapping.
    pub async fn connect_job(
        job: &UpdateJob,
        setup: &WorkerSetup,
    ) -> Result<(BatchRecorder, Resources), EngineError> {
        let table = &job.target.table;
        let run = &setup.run;
        let options = ResourceOptions {
            endpoint: run.endpoint.clone().or(job.target.endpoint.clone()),
            region: run.region.clone().or(job.target.region.clone()),
            progress_table: Some(
                run.progress_table
                    .clone()
                    .unwrap_or_else(|| default_table(table)),
            ),
            ..run.resource_options()
        };
        let resources = Resources::open(None, &options, Job::Worker).await?;
        let rejects = worker_rejects(setup)?;
        let sink = BatchSink::for_updates(
            resources.client(),
            &setup.run.sink_options(),
            rejects.clone(),
        );
        let recorder = BatchRecorder::new(
            Arc::new(sink),
            resources.progress_store()?,
            table.clone(),
            rejects,
        );
        Ok((recorder, resources))
    }

    /// The run's description, read once per run.
    async fn run_meta(&self, run: &RunId) -> Result<RunMeta, EngineError> {
        if let Some(meta) = self.runs.lock().expect("runs lock").get(run) {
            return Ok(meta.clone());
        }
        let meta = self.store.run_meta(run).await?.ok_or_else(|| {
            EngineError::Worker(format!(
                "run {run} is not recorded in the progress table {} (give the run's --progress-table)",
                self.store.table()
            ))
        })?;
        self.runs
            .lock()
            .expect("runs lock")
            .insert(run.clone(), meta.clone());
        Ok(meta)
    }

    /// Writes one message's page and records it; an error leaves it unrecorded.
    pub async fn write(&self, message: Message) -> Result<(BatchId, BatchOutcome), EngineError> {
        let run = message.run_id();
        if matches!(message, Message::Migration(_)) && !self.sink.writes_migrations() {
            return Err(EngineError::Worker(format!(
                "run {run} is a migration: this worker was started with an update job; start workers of migrations with the mapping"
            )));
        }
        let meta = self.run_meta(run).await?;
        if meta.table != self.table {
            return Err(EngineError::Worker(format!(
                "run {run} writes table {}, this mapping targets {}",
                meta.table, self.table
            )));
        }
        if let Message::Update(page) = &message {
            if page.change.table != self.table {
                return Err(EngineError::Worker(format!(
                    "run {run} updates table {}, this mapping targets {}",
                    page.change.table, self.table
                )));
            }
        }
        let id = BatchId::of_message(&message);
        let out = self.sink.write(message).await?;
        if out.failed > 0 {
            return Err(EngineError::Worker(format!(
                "{} items not written within their retry budget",
                out.failed
            )));
        }
        self.store
            .record_batch_with_cost(&id.run_id, &id.record(&out), &id.cost(&out))
            .await?;
        Ok((id, out))
    }
}

/// The rejects file of a worker, in a directory of its own under
/// `setup.run.runs_dir`.
fn worker_rejects(setup: &WorkerSetup) -> Result<Arc<RejectsFile>, EngineError> {
    let dir = setup.run.runs_dir.join(format!("worker-{}", new_run_id()));
    std::fs::create_dir_all(&dir).map_err(|e| EngineError::io(&dir, e))?;
    Ok(Arc::new(RejectsFile::new(dir.join("rejects.jsonl"))))
}
