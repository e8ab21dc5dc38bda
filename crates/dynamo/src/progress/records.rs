//! What the progress store records, as plain data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sql2ddb_core::{SqlValue, WorkBatch};

/// What a run is, as `status` and `verify` need it from any machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The mapping file's path, as given.
    pub mapping: String,
    /// The source connection string, secrets redacted.
    pub source: String,
    /// The target table.
    pub table: String,
    /// Every entity of the run, in the mapping's order.
    pub entities: Vec<EntityMeta>,
    /// When the run started (RFC 3339).
    pub started: String,
    /// The SQS queue the run's pages were sent to; `None` for a run written
    /// in one process. A resumed run sends to the same queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The source snapshot each attempt of the run read, oldest first (a
    /// resumed run reads a new one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<SnapshotMark>,
}

/// Where one attempt's source snapshot stood, as a report shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMark {
    /// `postgres`, `mysql`, `sqlite` or `none`.
    pub kind: String,
    /// The snapshot's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// PostgreSQL: the WAL position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsn: Option<String>,
    /// MySQL/MariaDB: the binary log's `file:position`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binlog: Option<String>,
    /// MySQL/MariaDB: the executed GTID set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// When it was taken (the server's clock, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<String>,
}

/// One entity of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityMeta {
    /// Entity name.
    pub name: String,
    /// How many segments its key range was cut into.
    pub segments: u32,
    /// The bounds of each segment, in order, so a resumed run reads exactly
    /// the same ranges whatever the table holds by then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounds: Vec<SegmentBounds>,
}

/// The key range of one segment: keys `k` with `after < k <= until`, either
/// side open when `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentBounds {
    /// Exclusive lower bound.
    pub after: Option<Vec<SqlValue>>,
    /// Inclusive upper bound.
    pub until: Option<Vec<SqlValue>>,
}

/// One finished batch: what a writer did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Page within the segment.
    pub page: u64,
    /// Part of the page (0 when it was not split).
    pub part: u32,
    /// How many parts the page was split into (1 when it was not).
    pub parts: u32,
    /// Source rows the batch accounts for.
    pub rows: u64,
    /// Items written.
    pub items: u64,
    /// Rows rejected, while mapping or by DynamoDB (in the rejects file).
    pub rejected: u64,
    /// Items that ran out of retries (in the rejects file too).
    pub failed: u64,
}

impl BatchRecord {
    /// The record of `batch` once written: `written` items stored,
    /// `write_rejected` refused by DynamoDB, `failed` out of retries. The rows
    /// rejected while mapping are the batch's rows without an item.
    pub fn for_batch(batch: &WorkBatch, written: u64, write_rejected: u64, failed: u64) -> Self {
        let rejected_at_read = batch.rows_read.saturating_sub(batch.items.len() as u64);
        BatchRecord {
            entity: batch.entity.clone(),
            segment: batch.segment,
            page: batch.page,
            part: batch.part.index,
            parts: batch.part.count,
            rows: batch.rows_read,
            items: written,
            rejected: rejected_at_read + write_rejected,
            failed,
        }
    }

    /// The record's sort key: `BATCH#<entity>#<segment:05>#<page:010>#<part:03>`.
    pub fn sort_key(&self) -> String {
        format!(
            "BATCH#{}#{:05}#{:010}#{:03}",
            self.entity, self.segment, self.page, self.part
        )
    }
}

/// What writing one batch cost: recorded with its [`BatchRecord`], so a
/// run's report can show the whole run's figures after a resume. Bytes and
/// write units follow from the items alone, so a batch written twice costs
/// the same; retries are those of its last recorded write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct BatchCost {
    /// Bytes written, by DynamoDB's size rules.
    pub bytes: u64,
    /// Write units billed.
    pub write_units: u64,
    /// Calls retried.
    pub retries: u64,
}

impl BatchCost {
    fn add(&mut self, o: &BatchCost) {
        self.bytes += o.bytes;
        self.write_units += o.write_units;
        self.retries += o.retries;
    }
}

/// Where a segment's reader is.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentCursor {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// The key of the last row handed on (resume reads after it).
    pub cursor: Vec<SqlValue>,
    /// Pages handed on so far (pages `0..pages_sent`).
    pub pages_sent: u64,
    /// Rows in those pages, so a resumed reader's segment total counts them.
    pub rows_sent: u64,
}

/// A segment the reader finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentTotal {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Rows it read, in all.
    pub rows: u64,
    /// Pages it handed on, in all.
    pub pages: u64,
}

/// Everything recorded for one run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunProgress {
    /// The run's description, once recorded.
    pub meta: Option<RunMeta>,
    /// Finished batches, in key order.
    pub batches: Vec<BatchRecord>,
    /// Segment cursors.
    pub cursors: Vec<SegmentCursor>,
    /// Finished segments.
    pub totals: Vec<SegmentTotal>,
    /// The digest of the mapping's items the run started with, part name →
    /// hash; `None` when the run was recorded without one (an earlier release).
    pub digest: Option<BTreeMap<String, String>>,
    /// What writing each batch cost, by the batch's sort key
    /// ([`BatchRecord::sort_key`]); batches recorded without a cost are absent.
    pub costs: BTreeMap<String, BatchCost>,
}

impl RunProgress {
    /// What writing `entity`'s recorded batches cost, in all.
    pub fn cost_of(&self, entity: &str) -> BatchCost {
        let mut total = BatchCost::default();
        for b in self.batches.iter().filter(|b| b.entity == entity) {
            if let Some(c) = self.costs.get(&b.sort_key()) {
                total.add(c);
            }
        }
        total
    }

    /// Pages `entity`'s segments handed on, in all: a finished segment's
    /// total, else its cursor's.
    pub fn pages_of(&self, entity: &str) -> u64 {
        let mut pages: BTreeMap<u32, u64> = BTreeMap::new();
        let sent = self
            .cursors
            .iter()
            .map(|c| (&c.entity, c.segment, c.pages_sent))
            .chain(self.totals.iter().map(|t| (&t.entity, t.segment, t.pages)));
        for (e, segment, n) in sent {
            if e == entity {
                let p = pages.entry(segment).or_default();
                *p = (*p).max(n);
            }
        }
        pages.values().sum()
    }
}
