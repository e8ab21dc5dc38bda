//! Where a segment reader hands its pages: the in-process queue of this
//! run's writers, or an SQS queue read by `sql2ddb worker` processes. Either
//! way the segment's checkpoint moves only once a page is handed on for good:
//! written and recorded (in-process), or sent (SQS).

use std::sync::Arc;
use std::time::Duration;

use sql2ddb_core::{SqlValue, WorkBatch};
use sql2ddb_queue::{Producer, SqsQueue, WorkQueue};

use crate::checkpoint::{Checkpoints, SegmentStart};
use crate::error::EngineError;
use crate::stop::StopSignal;

/// How long a reader waits before looking at a full queue again.
const QUEUE_FULL_WAIT: Duration = Duration::from_secs(1);

/// The queue a run's readers feed.
pub(super) enum Handoff {
    /// This process's writers.
    Memory(Producer<WorkBatch>),
    /// An SQS queue; `max_queued` pauses reading while the queue holds that
    /// many messages waiting (keeps it shallow when workers fall behind).
    Sqs {
        queue: Arc<SqsQueue>,
        max_queued: Option<u64>,
    },
}

/// A segment reader's way out: the queue, and the checkpoints when the run
/// keeps them.
pub(super) struct PageOut {
    pub handoff: Handoff,
    pub checkpoints: Option<Arc<Checkpoints>>,
}

impl PageOut {
    /// Where a segment's reader starts (page 0 unless resumed).
    pub fn start(&self, entity: &str, segment: u32) -> SegmentStart {
        self.checkpoints
            .as_ref()
            .map(|c| c.start(entity, segment))
            .unwrap_or_default()
    }

    /// Hands a page on. `cursor` is the key of its last row and `rows` the
    /// rows of its segment so far, this page included. Once `stop` is
    /// raised, a page waiting for room is not handed on: it stays pending
    /// (the segment's cursor stays before it), as the writers that would
    /// make room may be gone or stuck.
    pub async fn hand_on(
        &self,
        batch: WorkBatch,
        cursor: Vec<SqlValue>,
        rows: u64,
        stop: Option<&StopSignal>,
    ) -> Result<(), EngineError> {
        let stopped = async {
            match stop {
                Some(s) => s.stopped().await,
                None => std::future::pending().await,
            }
        };
        let (entity, segment, page) = (batch.entity.clone(), batch.segment, batch.page);
        if let Some(c) = &self.checkpoints {
            c.handed(&entity, segment, page, cursor, rows);
        }
        match &self.handoff {
            Handoff::Memory(producer) => {
                // The writer marks the page done once it is written and recorded.
                tokio::select! {
                    biased;
                    pushed = producer.push(batch) => pushed.map_err(|e| EngineError::Entity {
                        entity,
                        message: e.to_string(),
                    }),
                    _ = stopped => Ok(()),
                }
            }
            Handoff::Sqs { queue, max_queued } => {
                if let Some(max) = max_queued {
                    while queue.depth().await?.visible >= *max {
                        if stop.is_some_and(StopSignal::is_stopped) {
                            return Ok(());
                        }
                        tokio::time::sleep(QUEUE_FULL_WAIT).await;
                    }
                }
                queue.send(vec![batch.into()]).await?;
                match &self.checkpoints {
                    Some(c) => c.done(&entity, segment, page).await,
                    None => Ok(()),
                }
            }
        }
    }

    /// A segment's reader reached its end after `pages` pages and `rows` rows.
    pub async fn segment_done(
        &self,
        entity: &str,
        segment: u32,
        pages: u64,
        rows: u64,
    ) -> Result<(), EngineError> {
        match &self.checkpoints {
            Some(c) => c.reader_done(entity, segment, pages, rows).await,
            None => Ok(()),
        }
    }
}
