//! One queue message at a time: what a Lambda function fed by the work
//! queue does with each record of its event. The batch is written through
//! the one write path ([`BatchSink::write_batch`]) and recorded in the run's
//! progress table, exactly as `sql2ddb worker` does; deleting the message
//! (or not) is the event source mapping's part, from the outcome returned.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sql2ddb_dynamo::progress::{ProgressStore, RunMeta};
use sql2ddb_mapping::Plan;

use crate::checkpoint::BatchId;
use crate::error::EngineError;
use crate::rejects::RejectsFile;
use crate::resources::{Job, Resources};
use crate::sink::{build_sink, BatchSink};
use crate::worker::WorkerSetup;

/// What one message's batch came to, once written and recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageOutcome {
    /// The run the batch belongs to.
    pub run_id: String,
    /// Entity, segment and page of the batch.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Page.
    pub page: u64,
    /// Source rows the batch accounts for.
    pub rows: u64,
    /// Items written.
    pub written: u64,
    /// Rows rejected (by the mapping or DynamoDB), in the rejects file.
    pub rejected: u64,
}

/// Writes queue messages' batches into one mapping's table.
pub struct MessageWriter {
    sink: Arc<BatchSink>,
    store: ProgressStore,
    table: String,
    rejects: Arc<RejectsFile>,
    runs: Mutex<HashMap<String, RunMeta>>,
}

impl MessageWriter {
    /// Connects to `plan`'s table and progress table as a worker would
    /// (`setup.queue` is not used: the messages come in the event).
    pub async fn connect(plan: &Plan, setup: &WorkerSetup) -> Result<Self, EngineError> {
        let options = crate::resources::ResourceOptions {
            endpoint: setup.endpoint.clone(),
            region: setup.region.clone(),
            progress_table: setup.progress_table.clone(),
            sqs_endpoint: setup.sqs_endpoint.clone(),
        };
        let resources = Resources::open(Some(plan), &options, Job::Worker).await?;
        let dir = setup
            .runs_dir
            .join(format!("worker-{}", crate::run::new_run_id()));
        std::fs::create_dir_all(&dir).map_err(|e| EngineError::io(&dir, e))?;
        let rejects = Arc::new(RejectsFile::new(dir.join("rejects.jsonl")));
        let sink = build_sink(
            plan,
            &setup.writer.sink_options(),
            resources.client(),
            rejects.clone(),
        )
        .sink;
        Ok(MessageWriter {
            sink,
            store: resources.progress_store()?,
            table: plan.target.table.clone(),
            rejects,
            runs: Mutex::new(HashMap::new()),
        })
    }

    /// Records batches in `store` instead of the mapping's endpoint's
    /// progress table (a benchmark writes items into a null sink, which
    /// keeps no progress records).
    pub fn with_progress_store(mut self, store: ProgressStore) -> Self {
        self.store = store;
        self
    }

    /// The run's description, read once per run.
    async fn run_meta(&self, run: &str) -> Result<RunMeta, EngineError> {
        if let Some(meta) = self.runs.lock().expect("runs lock").get(run) {
            return Ok(meta.clone());
        }
        let meta = self.store.run_meta(run).await?.ok_or_else(|| {
            EngineError::Worker(format!(
                "run {run} is not recorded in the progress table {}",
                self.store.table()
            ))
        })?;
        self.runs
            .lock()
            .expect("runs lock")
            .insert(run.to_string(), meta.clone());
        Ok(meta)
    }

    /// Decodes a message body, writes its batch and records it. An error
    /// leaves the batch unrecorded: the message is to be delivered again.
    pub async fn write_message(&self, body: &str) -> Result<MessageOutcome, EngineError> {
        let batch = sql2ddb_queue::codec::decode(body)
            .map_err(|e| EngineError::Worker(format!("message is not a batch: {e}")))?;
        let meta = self.run_meta(&batch.run_id).await?;
        if meta.table != self.table {
            return Err(EngineError::Worker(format!(
                "run {} writes table {}, this function's mapping targets {}",
                batch.run_id, meta.table, self.table
            )));
        }
        let id = BatchId::of(&batch);
        let out = self.sink.write_batch(batch).await?;
        if out.failed > 0 {
            return Err(EngineError::Worker(format!(
                "{} items not written within their retry budget",
                out.failed
            )));
        }
        self.store
            .record_batch_with_cost(&id.run_id, &id.record(&out), &id.cost(&out))
            .await?;
        self.rejects.flush()?;
        Ok(MessageOutcome {
            rejected: id.rows_read.saturating_sub(id.items) + out.rejected,
            run_id: id.run_id,
            entity: id.entity,
            segment: id.segment,
            page: id.page,
            rows: id.rows_read,
            written: out.written,
        })
    }
}
