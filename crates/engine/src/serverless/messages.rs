//! One queue message at a time: what a Lambda function fed by the work
//! queue does with each record of its event. The batch is written through
//! the one write path and recorded in the run's progress table by the same
//! recorder as `sql2ddb worker`'s; deleting the message
//! (or not) is the event source mapping's part, from the outcome returned.

use serde::Serialize;
use sql2ddb_dynamo::progress::ProgressStore;
use sql2ddb_mapping::{Plan, UpdateJob};

use crate::error::EngineError;
use crate::ids::RunId;
use crate::recorder::BatchRecorder;
use crate::worker::WorkerSetup;

/// What one message's batch came to, once written and recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageOutcome {
    /// The run the batch belongs to.
    pub run_id: RunId,
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
    recorder: BatchRecorder,
}

impl MessageWriter {
    /// Connects to `plan`'s table and progress table as a worker would
    /// (`setup.queue` is not used: the messages come in the event).
    pub async fn connect(plan: &Plan, setup: &WorkerSetup) -> Result<Self, EngineError> {
        let (recorder, _) = BatchRecorder::connect(plan, setup).await?;
        Ok(MessageWriter { recorder })
    }

    /// Connects to an update job's table and progress table: a writer that
    /// applies the job's batches only.
    pub async fn connect_job(job: &UpdateJob, setup: &WorkerSetup) -> Result<Self, EngineError> {
        let (recorder, _) = BatchRecorder::connect_job(job, setup).await?;
        Ok(MessageWriter { recorder })
    }

    /// Records batches in `store` instead of the mapping's endpoint's
    /// progress table (a benchmark writes items into a null sink, which
    /// keeps no progress records).
    pub fn with_progress_store(mut self, store: ProgressStore) -> Self {
        self.recorder.store = store;
        self
    }

    /// Decodes a message body, writes its batch and records it. An error
    /// leaves the batch unrecorded: the message is to be delivered again.
    pub async fn write_message(&self, body: &str) -> Result<MessageOutcome, EngineError> {
        let batch = sql2ddb_queue::codec::decode(body)
            .map_err(|e| EngineError::Worker(format!("message is not a batch: {e}")))?;
        let (id, out) = self.recorder.write(batch).await?;
        self.recorder.rejects.flush().await?;
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
