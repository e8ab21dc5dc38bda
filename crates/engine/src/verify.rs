//! `sql2ddb status` and `sql2ddb verify`: a run's state from its progress
//! store, readable from any machine while workers write.
//!
//! The batch records of the run's partition are read with one Query (paged)
//! and added up per entity; the sums are compared with the rows read (the
//! segments' totals). Whatever is missing is named: segments whose reader has
//! not finished, and pages sent without a record. When the run went through
//! a queue, the queue's depths (and its dead-letter queue's) are shown too.

use serde::Serialize;
use sql2ddb_dynamo::progress::{summarize, EntityCount, ProgressStore, Verification};
use sql2ddb_queue::{QueueDepth, SqsQueue, WorkQueue};

use crate::error::EngineError;

/// A segment whose reader has not reached its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnfinishedSegment {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Pages it handed on so far.
    pub pages_sent: u64,
}

/// Consecutive pages of one segment without a (whole) batch record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingPages {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// First page.
    pub first: u64,
    /// Last page (inclusive).
    pub last: u64,
}

/// The queue of a run, as seen now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueState {
    /// Queue URL.
    pub url: String,
    /// Messages waiting.
    pub visible: u64,
    /// Messages received and not yet deleted.
    pub in_flight: u64,
    /// Messages in the dead-letter queue (`None` without one).
    pub dead_letter: Option<u64>,
}

/// Everything `status` and `verify` show about a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunState {
    /// Run id.
    pub run_id: String,
    /// Target table.
    pub table: String,
    /// Progress table.
    pub progress_table: String,
    /// When the run started.
    pub started: String,
    /// Every row is accounted for (written, rejected or failed).
    pub complete: bool,
    /// Per entity, in the run's order.
    pub entities: Vec<EntityCount>,
    /// Segments still being read (or whose reader stopped).
    pub unfinished: Vec<UnfinishedSegment>,
    /// Pages sent but not recorded as written, in ranges.
    pub missing: Vec<MissingPages>,
    /// The run's queue, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueState>,
    /// Why the queue could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_error: Option<String>,
}

impl RunState {
    /// Rows that ran out of retries, over all entities.
    pub fn failed(&self) -> u64 {
        self.entities.iter().map(|e| e.failed).sum()
    }

    /// Rows rejected, over all entities.
    pub fn rejected(&self) -> u64 {
        self.entities.iter().map(|e| e.rejected).sum()
    }

    /// `verify`'s verdict: every row accounted for and none failed. Rejected
    /// rows are accounted for (each is in a rejects file with its reason).
    pub fn verified(&self) -> bool {
        self.complete && self.failed() == 0
    }

    /// Nothing can move the run on by itself: every segment is read, the
    /// queue holds nothing to write, yet pages are missing and some messages
    /// sit in the dead-letter queue (fix the cause, then `queue redrive`).
    pub fn stalled(&self) -> bool {
        let Some(q) = &self.queue else { return false };
        !self.complete
            && self.unfinished.is_empty()
            && q.visible == 0
            && q.in_flight == 0
            && q.dead_letter.unwrap_or(0) > 0
    }
}

/// Reads a run's state: its records from `store`, and its queue's depths
/// through `sqs_endpoint` (default AWS) when it has a queue.
pub async fn inspect(
    store: &ProgressStore,
    sqs_endpoint: Option<&str>,
    run_id: &str,
) -> Result<RunState, EngineError> {
    let progress = store.load(run_id).await?;
    let Some(meta) = progress.meta.clone() else {
        return Err(EngineError::Resume {
            run_id: run_id.to_string(),
            message: format!("is not recorded in the progress table {}", store.table()),
        });
    };
    let Verification {
        entities,
        missing,
        complete,
    } = summarize(&progress);
    let mut unfinished = Vec::new();
    for e in &meta.entities {
        for segment in 0..e.segments {
            let finished = progress
                .totals
                .iter()
                .any(|t| t.entity == e.name && t.segment == segment);
            if !finished {
                let pages_sent = progress
                    .cursors
                    .iter()
                    .find(|c| c.entity == e.name && c.segment == segment)
                    .map_or(0, |c| c.pages_sent);
                unfinished.push(UnfinishedSegment {
                    entity: e.name.clone(),
                    segment,
                    pages_sent,
                });
            }
        }
    }
    let mut ranges: Vec<MissingPages> = Vec::new();
    for m in missing {
        match ranges.last_mut() {
            Some(r) if r.entity == m.entity && r.segment == m.segment && r.last + 1 == m.page => {
                r.last = m.page;
            }
            _ => ranges.push(MissingPages {
                entity: m.entity,
                segment: m.segment,
                first: m.page,
                last: m.page,
            }),
        }
    }
    let (queue, queue_error) = match &meta.queue {
        Some(url) => match queue_depth(sqs_endpoint, url).await {
            Ok(d) => (
                Some(QueueState {
                    url: url.clone(),
                    visible: d.visible,
                    in_flight: d.in_flight,
                    dead_letter: d.dead_letter,
                }),
                None,
            ),
            Err(e) => (None, Some(sql2ddb_core::redact_secrets(&e.to_string()))),
        },
        None => (None, None),
    };
    Ok(RunState {
        run_id: run_id.to_string(),
        table: meta.table,
        progress_table: store.table().to_string(),
        started: meta.started,
        complete,
        entities,
        unfinished,
        missing: ranges,
        queue,
        queue_error,
    })
}

async fn queue_depth(endpoint: Option<&str>, url: &str) -> Result<QueueDepth, EngineError> {
    let client = sql2ddb_queue::connect(endpoint, None, Some(url)).await;
    Ok(SqsQueue::open(client, url).await?.depth().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(complete: bool, failed: u64, dead: u64, visible: u64) -> RunState {
        RunState {
            run_id: "r".into(),
            table: "t".into(),
            progress_table: "p".into(),
            started: String::new(),
            complete,
            entities: vec![EntityCount {
                entity: "order".into(),
                segments: 1,
                segments_finished: 1,
                rows_read: Some(10),
                rows_recorded: 10,
                written: 10 - failed,
                rejected: 0,
                failed,
                pending: Some(0),
            }],
            unfinished: Vec::new(),
            missing: Vec::new(),
            queue: Some(QueueState {
                url: "q".into(),
                visible,
                in_flight: 0,
                dead_letter: Some(dead),
            }),
            queue_error: None,
        }
    }

    #[test]
    fn verified_only_when_complete_without_failures() {
        assert!(state(true, 0, 0, 0).verified());
        assert!(!state(true, 1, 0, 0).verified());
        assert!(!state(false, 0, 0, 0).verified());
    }

    #[test]
    fn stalled_when_only_the_dead_letter_queue_holds_work() {
        assert!(state(false, 0, 2, 0).stalled());
        assert!(!state(false, 0, 2, 1).stalled(), "messages still waiting");
        assert!(!state(false, 0, 0, 0).stalled(), "nothing dead-lettered");
        assert!(!state(true, 0, 2, 0).stalled(), "complete");
    }
}
