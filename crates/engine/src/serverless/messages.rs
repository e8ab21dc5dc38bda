//! One queue message at a time: what a Lambda function fed by the work
//! queue does with each record of its event. The batch is written through
//! the one write path and recorded in the run's progress table by the same
//! recorder as `sql2ddb worker`'s; deleting the message
//! (or not) is the event source mapping's part, from the outcome returned.
//!
//! Each execution environment is a member of its runs' fleets, as a
//! `sql2ddb worker` process is: it beats in-line before and while it writes
//! a batch, and its writes keep to its share of the write-capacity cap
//! among the members alive (`crate::fleet`).

use serde::Serialize;
use sql2ddb_dynamo::progress::ProgressStore;
use sql2ddb_mapping::{Plan, UpdateJob};

use crate::error::EngineError;
use crate::fleet::{Fleet, InlineBeating};
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

/// Writes queue messages' batches into one mapping's table: one per
/// execution environment, made at its cold start, and one member of the
/// fleets of the runs it writes for as long as it lives.
pub struct MessageWriter {
    recorder: BatchRecorder,
    /// Its membership of its runs' fleets; `None` when beating changes
    /// nothing (no cap, calls in flight fixed).
    fleet: Option<InlineBeating>,
}

impl MessageWriter {
    /// Connects to `plan`'s table and progress table as a worker would
    /// (`setup.queue` is not used: the messages come in the event).
    pub async fn connect(plan: &Plan, setup: &WorkerSetup) -> Result<Self, EngineError> {
        let (recorder, _) = BatchRecorder::connect(plan, setup).await?;
        Ok(MessageWriter::over(recorder))
    }

    /// Connects to an update job's table and progress table: a writer that
    /// applies the job's batches only.
    pub async fn connect_job(job: &UpdateJob, setup: &WorkerSetup) -> Result<Self, EngineError> {
        let (recorder, _) = BatchRecorder::connect_job(job, setup).await?;
        Ok(MessageWriter::over(recorder))
    }

    /// A writer through `recorder`, a new member of its runs' fleets,
    /// beating into the progress table it records batches in.
    fn over(recorder: BatchRecorder) -> Self {
        let fleet = Fleet::new(recorder.store.clone(), recorder.sink.limits.clone());
        MessageWriter {
            fleet: InlineBeating::new(fleet),
            recorder,
        }
    }

    /// Records batches (and beats) in `store` instead of the mapping's
    /// endpoint's progress table (a benchmark writes items into a null
    /// sink, which keeps no progress records).
    pub fn with_progress_store(mut self, store: ProgressStore) -> Self {
        self.recorder.store = store;
        MessageWriter::over(self.recorder)
    }

    /// Its name in its runs' fleets (its `FLEET#` records'); `None` when it
    /// does not beat (no cap to share, calls in flight fixed).
    pub fn fleet_member(&self) -> Option<&str> {
        self.fleet.as_ref().map(|f| f.fleet().member())
    }

    /// The write capacity per second its writes keep to now: its share of
    /// the cap among the members alive at its last beat; `None` without a
    /// cap.
    pub fn write_rate(&self) -> Option<f64> {
        self.recorder.sink.limits.limiter.as_ref().map(|l| l.rate())
    }

    /// How many calls its writes may have in flight now (halved when the
    /// table, or another member, was refused whole).
    pub fn calls_in_flight_limit(&self) -> usize {
        self.recorder.sink.limits.controller.snapshot().current
    }

    /// Decodes a message body, writes its batch and records it. An error
    /// leaves the batch unrecorded: the message is to be delivered again.
    pub async fn write_message(&self, body: &str) -> Result<MessageOutcome, EngineError> {
        let batch = sql2ddb_queue::codec::decode(body)
            .map_err(|e| EngineError::Worker(format!("message is not a batch: {e}")))?;
        let run = batch.run_id().clone();
        let write = self.recorder.write(batch);
        let (id, out) = match &self.fleet {
            Some(fleet) => fleet.around(&run, write).await?,
            None => write.await?,
        };
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
